"""The classical reference solvers every gap is measured against: LKH for TSP (`elkai`), HGS for
CVRP (`pyvrp`). Each returns the true cost of its solutions after the problem's own feasibility
check; each problem names its solver in `Problem.reference_costs` (bin packing's, the best
sort-then-place heuristic, lives beside it in `eie.problems.bpp_heuristics`).
"""

from __future__ import annotations

import numpy as np
import torch


def lkh_tsp_tours(coords: torch.Tensor, runs: int = 1, scale: float = 1e5) -> torch.Tensor:
    """Tours (B, n) found by LKH (the `elkai` package) on coordinates scaled to integers: LKH optimises
    the rounded integer distances of the scaled coordinates (`eie.problems.TSP.reference_costs` checks
    the tours and gives their true Euclidean lengths in the original units)."""
    import elkai

    coords = coords.detach().cpu()
    tours = []
    for xy in coords:
        points = {i: (int(round(float(x) * scale)), int(round(float(y) * scale))) for i, (x, y) in enumerate(xy)}
        tour = elkai.Coordinates2D(points).solve_tsp(runs=runs)[:-1]
        tours.append(tour)
    return torch.as_tensor(np.array(tours), dtype=torch.long)


def hgs_cvrp_solutions(instance: dict, capacity: float, iterations: int | None = 1000, time_limit: float | None = None,
                       scale: float = 1e4, seed: int = 0) -> torch.Tensor:
    """Solutions (B, length) found by HGS (the `pyvrp` package) on each instance, as the study's CVRP
    models write them: customer indices, 0 for a return to the depot, padded with 0.

    Each search stops after `iterations` HGS iterations or `time_limit` seconds, whichever comes
    first (None disables that criterion). Only an iteration limit is reproducible: a time limit
    gives different answers on different machines and runs, so reported tables use iterations.
    Coordinates and distances are scaled by `scale` and rounded; demands (in units of C_v in the
    instance) are scaled by C_v * `scale` and rounded *up*, so a solution feasible for the integer
    data is feasible for the real one (`eie.problems.CVRP.reference_costs` checks the solutions and
    gives their true Euclidean costs).
    """
    import pyvrp
    from pyvrp.stop import MaxIterations, MaxRuntime, MultipleCriteria

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
    return torch.tensor([s + [0] * (width - len(s)) for s in solutions], dtype=torch.long)
