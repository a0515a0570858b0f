"""Real CVRP instances: the 70 X instances of Uchoa et al. (2017) in `data/cvrplib/` (100-1000 customers).

Read with the maintained `vrplib` reader. The model sees the coordinates mapped to [-1, 1]^2 with one
scale for both axes (the aspect ratio kept, centred in the square), the depot as node 0 and each
customer's demand divided by the vehicle capacity (the study's demands are in units of the capacity,
so a model trained with capacity C_v sees demands in (0, 1/C_v] on its own instances; X instances
hold 3-25 customers per route, a distribution shift as well as a length shift). A solution is
checked like every CVRP solution of the study and scored in the original units with the set's EUC_2D
metric (each edge's Euclidean length rounded to the nearest integer, routes depot to depot), against
the original demands and capacity, so its gap to the best-known cost is exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .best_known import read_best_known
from .paths import repo_root

# size bands of the tables: customers
BANDS = ((250, "100-250"), (500, "251-500"), (float("inf"), "501-1000"))


def cvrplib_dir() -> Path:
    return repo_root() / "data" / "cvrplib"


@dataclass(frozen=True)
class CVRPLIBInstance:
    name: str
    coords: np.ndarray  # (n + 1, 2), depot first, in the file's units
    demand: np.ndarray  # (n + 1,), integers, 0 at the depot
    capacity: int
    best_known: int  # best-known cost (integer convention), from best_known.csv

    @property
    def n(self) -> int:
        """Customers."""
        return len(self.coords) - 1

    @property
    def band(self) -> str:
        return next(label for limit, label in BANDS if self.n <= limit)

    def for_model(self, device="cpu") -> dict:
        """A batch of one instance as the study's CVRP models take it: coordinates in [-1, 1]^2,
        demands in units of the vehicle capacity."""
        low, high = self.coords.min(0), self.coords.max(0)
        half = max(float((high - low).max()) / 2, 1e-12)
        unit = (self.coords - (low + high) / 2) / half
        return {"coords": torch.tensor(unit, dtype=torch.float32, device=device)[None],
                "demand": torch.tensor(self.demand / self.capacity, dtype=torch.float32, device=device)[None]}

    def cost(self, solution) -> int:
        """The set's cost of a solution (node indices, 0 = the depot, as the study's models emit it):
        each route's rounded Euclidean edges, depot to depot. Raises ValueError if a customer is not
        served exactly once or a route exceeds the capacity (original integer demands)."""
        solution = np.asarray(solution, dtype=np.int64)
        served = np.bincount(solution, minlength=len(self.coords))[1:]
        if (served != 1).any():
            raise ValueError(f"{self.name}: customers {np.flatnonzero(served != 1)[:5] + 1} are not served exactly once")
        route = np.cumsum(solution == 0)
        loads = np.bincount(route, weights=self.demand[solution])
        if (loads > self.capacity).any():
            raise ValueError(f"{self.name}: a route carries {loads.max():g} > capacity {self.capacity}")
        path = np.concatenate([[0], solution, [0]])
        step = self.coords[path[1:]] - self.coords[path[:-1]]
        return int(np.floor(np.sqrt((step.astype(np.float64) ** 2).sum(1)) + 0.5).sum())


def load_cvrplib(names=None, max_n: int | None = None, folder=None) -> list[CVRPLIBInstance]:
    """The instances of `folder` (default data/cvrplib/) listed in its best_known.csv, by size, each
    checked (one depot, node 0; positive demands within the capacity; finite coordinates)."""
    import vrplib

    folder = Path(folder or cvrplib_dir())
    known = read_best_known(folder, ".vrp")
    rows = known if names is None else known[known.name.isin(list(names))]
    if names is not None and len(rows) != len(set(names)):
        raise ValueError(f"unknown CVRPLIB instances {sorted(set(names) - set(known.name))}")
    out = []
    for name, best in zip(rows.name, rows.best_known, strict=True):
        path = folder / f"{name}.vrp"
        try:
            data = vrplib.read_instance(str(path))
            coords = np.asarray(data["node_coord"], dtype=np.float64)
            demand = np.asarray(data["demand"], dtype=np.int64)
            capacity, depot = int(data["capacity"]), list(np.atleast_1d(data["depot"]))
        except Exception as error:
            raise ValueError(f"{path} could not be read as a CVRPLIB file ({type(error).__name__}: {error}); "
                             f"restore it from data/cvrplib/README.md's source") from error
        if coords.ndim != 2 or coords.shape[1] != 2 or demand.shape != (len(coords),) \
                or int(data.get("dimension", len(coords))) != len(coords):
            raise ValueError(f"{path}: DIMENSION {data.get('dimension')}, {len(coords)} coordinates of shape "
                             f"{coords.shape[1:]} and {len(demand)} demands do not agree")
        if depot != [0] or demand[0] != 0 or not np.isfinite(coords).all() or (demand[1:] <= 0).any() \
                or (demand > capacity).any() or not float(best) > 0:
            raise ValueError(f"{path}: expected one depot (node 1 of the file), positive demands within the "
                             f"capacity {capacity}, finite coordinates and a positive best-known cost")
        if max_n is None or len(coords) - 1 <= max_n:
            out.append(CVRPLIBInstance(name, coords, demand, capacity, int(best)))
    return sorted(out, key=lambda instance: (instance.n, instance.name))
