"""Extrapolation evaluation: fixed seeded test sets at n = N * 2^k, greedy decoding in chunks with a
feasibility check of every solution, a classical reference solver, and the long-format result table

    problem, setting, method, seed, n, objective, gap_pct

`method` names the method used at test time (`eie.methods`): a test-time method (EIE, exact
lambda*, calibrated log) runs on the model trained with the method it is applied to (1/sqrt(d)),
a trained method on its own model. `gap_pct` = 100 * (mean objective / mean reference objective - 1) over the instances
the reference solved (the first `reference_size` of each test set).
"""

from __future__ import annotations

import numbers
import time
from contextlib import contextmanager

import numpy as np
import torch

from .methods import BoundMethod
from .model import AttentionModel


def extrapolation_lengths(n_train: int, n_max: int) -> list[int]:
    """n = N * 2^k up to n_max (the tables' columns)."""
    for name, value in (("n_train", n_train), ("n_max", n_max)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if n_max < n_train:
        raise ValueError(f"n_max ({n_max}) must be at least the training length ({n_train})")
    return [n_train * 2**k for k in range(0, 32) if n_train * 2**k <= n_max]


def fixed_test_set(problem, n: int, size: int, seed: int = 1234, device="cpu") -> dict:
    """The fixed test set of `size` instances at size n (the same for every method and model seed)."""
    generator = torch.Generator().manual_seed(seed * 1_000_003 + n)
    return problem.generate(size, n, generator, device)


@torch.no_grad()
def greedy_costs(model: AttentionModel, instance: dict, method: BoundMethod | None = None,
                 chunk: int = 256) -> torch.Tensor:
    """Greedy costs, decoded in chunks to bound memory, with `method` applied at test time (same
    sites and n mode as trained; None keeps the model's own attention).

    Every solution passes the problem's feasibility check before its cost is returned.
    """
    model.eval()
    with method_applied(model, method):
        batch = next(iter(instance.values())).shape[0]
        costs = []
        for start in range(0, batch, chunk):
            part = {k: v[start:start + chunk] for k, v in instance.items()}
            solution, _ = model.rollout(part, "greedy")
            model.problem.check(part, solution)
            costs.append(model.problem.cost(part, solution))
        return torch.cat(costs)


@contextmanager
def method_applied(model: AttentionModel, method: BoundMethod | None):
    """Within the block the model's attention is `method`'s (same sites and n mode as trained); None
    keeps the model's own. The trained attention is restored on leaving, errors included."""
    trained = model.attention
    if method is not None:
        model.attention = method.attention_for(trained)
    try:
        yield model
    finally:
        model.attention = trained


def median_seconds(fn, repeats: int = 3, device: torch.device | str = "cpu") -> float:
    """Median wall-clock seconds of `fn()` over `repeats` calls (CUDA work synchronised)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    cuda = torch.device(device).type == "cuda"
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def inference_seconds(model: AttentionModel, instance: dict, method: BoundMethod | None = None, chunk: int = 256,
                      repeats: int = 3) -> float:
    """Median wall-clock seconds to decode `instance` greedily (checks included), over `repeats` runs.

    The method is applied inside the timed region (its scale computed once per chunk), so an EIE
    net's evaluation is part of what is measured.
    """
    device = next(model.parameters()).device
    return median_seconds(lambda: greedy_costs(model, instance, method, chunk=chunk), repeats, device)


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

    criteria = ([MaxIterations(int(iterations))] if iterations is not None else []) + \
               ([MaxRuntime(float(time_limit))] if time_limit is not None else [])
    if not criteria or (iterations is not None and iterations < 1) or (time_limit is not None and time_limit <= 0):
        raise ValueError(f"HGS needs iterations >= 1 and/or time_limit > 0, got iterations={iterations}, "
                         f"time_limit={time_limit}")
    coords = instance["coords"].detach().cpu().numpy().astype(np.float64)
    demand = instance["demand"].detach().cpu().numpy().astype(np.float64)
    points = np.round(coords * scale)  # (B, n + 1, 2)
    distances = np.round(np.linalg.norm(points[:, :, None] - points[:, None, :], axis=-1)).astype(np.int64)
    loads = np.ceil(demand * capacity * scale).astype(np.int64)
    vehicle = pyvrp.VehicleType(num_available=coords.shape[1] - 1, capacity=[int(round(capacity * scale))])
    solutions = []
    for xy, load, dist in zip(points, loads, distances):
        data = pyvrp.ProblemData(
            locations=[pyvrp.Location(float(x), float(y)) for x, y in xy],
            clients=[pyvrp.Client(location=i, delivery=[int(q)]) for i, q in enumerate(load[1:], start=1)],
            depots=[pyvrp.Depot(location=0)], vehicle_types=[vehicle], distance_matrices=[dist],
            duration_matrices=[np.zeros_like(dist)])
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


def reference_costs(problem, instance: dict, **options) -> np.ndarray:
    """The classical reference for `problem`: LKH for TSP, HGS for CVRP, the best of the
    sort-then-place heuristics (by mean load rate) for bin packing."""
    if problem.name == "tsp":
        return lkh_tsp_costs(instance["coords"], **options)
    if problem.name == "cvrp":
        return hgs_cvrp_costs(instance, problem.capacity, **options)
    if problem.name == "bpp":
        from .problems.bpp_heuristics import best_heuristic_costs

        return best_heuristic_costs(problem, instance, **options)
    raise ValueError(f"no reference solver for {problem.name!r}")
