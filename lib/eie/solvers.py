"""The classical reference solvers every gap is measured against: LKH for TSP (`elkai`), HGS for
CVRP (`pyvrp`). Each returns the true cost of its solutions after the problem's own feasibility
check; each problem names its solver in `Problem.reference_costs` (bin packing's, the best
sort-then-place heuristic, lives beside it in `eie.problems.bpp_heuristics`).
"""

from __future__ import annotations

import numpy as np
import torch


def lkh_tsp_costs(coords: torch.Tensor, runs: int = 1, scale: float = 1e5) -> np.ndarray:
    """Tour lengths found by LKH (the `elkai` package) on coordinates scaled to integers.

    LKH optimises the rounded integer distances of the scaled coordinates; the returned lengths are
    the true Euclidean lengths of its tours in the original units.
    """
    import elkai

    from .problems.tsp import TSP

    coords = coords.detach().cpu()
    tours = []
    for xy in coords:
        points = {i: (int(round(float(x) * scale)), int(round(float(y) * scale))) for i, (x, y) in enumerate(xy)}
        tour = elkai.Coordinates2D(points).solve_tsp(runs=runs)[:-1]
        tours.append(tour)
    solution = torch.as_tensor(np.array(tours), dtype=torch.long)
    problem = TSP()
    problem.check({"coords": coords}, solution)
    return problem.cost({"coords": coords}, solution).numpy()


def hgs_cvrp_costs(instance: dict, capacity: float, iterations: int | None = 1000, time_limit: float | None = None,
                   scale: float = 1e4, seed: int = 0) -> np.ndarray:
    """Total distances found by HGS (the `pyvrp` package) on each instance.

    Each search stops after `iterations` HGS iterations or `time_limit` seconds, whichever comes
    first (None disables that criterion). Only an iteration limit is reproducible: a time limit
    gives different answers on different machines and runs, so reported tables use iterations.
    Coordinates and distances are scaled by `scale` and rounded; demands (in units of C_v in the
    instance) are scaled by C_v * `scale` and rounded *up*, so a solution feasible for the integer
    data is feasible for the real one. Returned: the true Euclidean cost of each solution, after
    the problem's own feasibility check.
    """
    import pyvrp
    from pyvrp.stop import MaxIterations, MaxRuntime, MultipleCriteria

    from .problems.cvrp import CVRP

    if (iterations is None and time_limit is None) or (iterations is not None and iterations < 1) or \
            (time_limit is not None and time_limit <= 0):
        raise ValueError(f"HGS needs iterations >= 1 and/or time_limit > 0, got iterations={iterations}, "
                         f"time_limit={time_limit}")
    coords = instance["coords"].detach().cpu().numpy().astype(np.float64)
    demand = instance["demand"].detach().cpu().numpy().astype(np.float64)
    points = np.round(coords * scale)  # (B, n + 1, 2)
    distances = np.round(np.linalg.norm(points[:, :, None] - points[:, None, :], axis=-1)).astype(np.int64)
    loads = np.ceil(demand * capacity * scale).astype(np.int64)
    vehicle = pyvrp.VehicleType(num_available=coords.shape[1] - 1, capacity=[int(round(capacity * scale))])
    solutions = []
    for xy, load, dist in zip(points, loads, distances, strict=True):
        data = pyvrp.ProblemData(
            locations=[pyvrp.Location(float(x), float(y)) for x, y in xy],
            clients=[pyvrp.Client(location=i, delivery=[int(q)]) for i, q in enumerate(load[1:], start=1)],
            depots=[pyvrp.Depot(location=0)], vehicle_types=[vehicle], distance_matrices=[dist],
            duration_matrices=[np.zeros_like(dist)])
        # a new stopping criterion per instance: pyvrp's criteria count iterations (and time) from
        # their first use, so one shared by every instance would leave all but the first unsearched
        criteria = ([MaxIterations(int(iterations))] if iterations is not None else []) + \
                   ([MaxRuntime(float(time_limit))] if time_limit is not None else [])
        stop = criteria[0] if len(criteria) == 1 else MultipleCriteria(criteria)
        result = pyvrp.solve(data, stop=stop, seed=seed, collect_stats=False, display=False)
        sequence = []
        for route in result.best.routes():
            sequence += [a.idx + 1 for a in route if a.type == pyvrp.ActivityType.CLIENT] + [0]
        solutions.append(sequence)
    width = max(len(s) for s in solutions)
    solution = torch.tensor([s + [0] * (width - len(s)) for s in solutions], dtype=torch.long)
    data = {"coords": torch.as_tensor(coords), "demand": torch.as_tensor(demand)}
    problem = CVRP(capacity)
    problem.check(data, solution)
    return problem.cost(data, solution).numpy()
