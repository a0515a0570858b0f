"""Real instances: the 48 symmetric EUC_2D instances of TSPLIB in `data/tsplib/` (51-2392 cities).

Read with the maintained `vrplib` reader; the model sees the coordinates mapped to [-1, 1]^2 with one
scale for both axes (the aspect ratio kept, centred in the square); a tour is checked like every
TSP tour of the study and scored in the original units with TSPLIB's EUC_2D metric (each edge's
Euclidean length rounded to the nearest integer), so its gap to the published optimum is exact.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from .best_known import read_best_known
from .evaluation import greedy_solutions
from .evaluation_store import EvaluationStore, function_fingerprint, model_description, rule_fingerprint
from .paths import repo_root
from .seed_level import summarise_effects

BANDS = ((200, "n <= 200"), (1000, "200 < n <= 1000"), (float("inf"), "n > 1000"))


def tsplib_dir() -> Path:
    return repo_root() / "data" / "tsplib"


@dataclass(frozen=True)
class TSPLIBInstance:
    name: str
    coords: np.ndarray  # (n, 2) in the file's units
    best_known: int  # optimal tour length (EUC_2D), from best_known.csv

    @property
    def n(self) -> int:
        return len(self.coords)

    @property
    def band(self) -> str:
        return next(label for limit, label in BANDS if self.n <= limit)

    def for_model(self, device="cpu") -> dict:
        """A batch of one TSP instance with coordinates in [-1, 1]^2 (one scale for both axes)."""
        low, high = self.coords.min(0), self.coords.max(0)
        half = max(float((high - low).max()) / 2, 1e-12)
        unit = (self.coords - (low + high) / 2) / half
        return {"coords": torch.tensor(unit, dtype=torch.float32, device=device)[None]}


def euc_2d_length(coords: np.ndarray, tour) -> int:
    """TSPLIB's EUC_2D length of the closed `tour` (city indices): sum of nint(Euclidean distance)."""
    tour = np.asarray(tour)
    step = coords[np.roll(tour, -1)] - coords[tour]
    return int(np.floor(np.sqrt((step ** 2).sum(1)) + 0.5).sum())


def load_tsplib(names=None, max_n: int | None = None, folder=None) -> list[TSPLIBInstance]:
    """The TSPLIB instances of `folder` (default data/tsplib/) listed in its best_known.csv, smallest
    first; only `names` when given, only those with at most `max_n` cities when given."""
    import vrplib

    folder = Path(folder) if folder is not None else tsplib_dir()
    table = read_best_known(folder, ".tsp", integer_columns=("n", "best_known"))
    if names is not None:
        unknown = sorted(set(names) - set(table.name))
        if unknown:
            raise ValueError(f"TSPLIB instances {unknown} are not in {folder / 'best_known.csv'}; "
                             f"choose from {', '.join(table.name)}")
        table = table[table.name.isin(names)]
    if max_n is not None:
        table = table[table.n <= max_n]
    instances = []
    for row in table.sort_values(["n", "name"]).itertuples():
        path = folder / f"{row.name}.tsp"
        try:
            data = vrplib.read_instance(str(path), compute_edge_weights=False)
            coords = np.asarray(data["node_coord"], dtype=np.float64)
            kind = data.get("edge_weight_type")
            dimension = data.get("dimension")
        except Exception as error:
            raise ValueError(f"{path} could not be read as a TSPLIB file ({error}); restore it from "
                             f"data/tsplib/README.md's source") from error
        if kind != "EUC_2D":
            raise ValueError(f"{path}: EDGE_WEIGHT_TYPE is {kind!r}; only EUC_2D instances are scored here")
        if coords.ndim != 2 or coords.shape[1] != 2:
            raise ValueError(f"{path}: coordinates of shape {coords.shape}; EUC_2D needs two per city")
        if dimension is not None and int(dimension) != len(coords):
            raise ValueError(f"{path}: DIMENSION is {dimension} but the file lists {len(coords)} coordinates")
        if len(coords) != row.n:
            raise ValueError(f"{path}: {len(coords)} coordinates, best_known.csv says n = {row.n}")
        if not np.isfinite(coords).all():
            bad = int(np.flatnonzero(~np.isfinite(coords).all(1))[0]) + 1
            raise ValueError(f"{path}: city {bad} has a coordinate that is not finite ({coords[bad - 1]})")
        instances.append(TSPLIBInstance(row.name, coords, int(row.best_known)))
    return instances


@torch.no_grad()
def evaluate_tsplib(models: dict, methods, instances, device=None, progress: bool = True,
                    store: EvaluationStore | None = None) -> pd.DataFrame:
    """Every method (bound, `eie.methods.BoundMethod`) on every seed of its model, on every instance,
    greedy. models: {(trained method key, seed): model} (keys may have different seeds); device:
    where to decode (None: where the models are). With a `store` (`eie.evaluation_store`, kind
    "tsplib") each tour's length is kept as it is found, and a rerun reads it back: an interrupted
    evaluation resumes, and adding a model decodes only its tours. Returns one row per (instance,
    method, seed): name, n, band, method, seed, length (EUC_2D, original units), best_known, gap_pct."""
    seeds = sorted({seed for _, seed in models})
    missing = [method.key for method in methods if not any((method.model_key, seed) in models for seed in seeds)]
    if missing:
        raise ValueError(f"no trained model for {missing}: models has {sorted(models)}")
    runs = [(seed, method) for seed in seeds for method in methods if (method.model_key, seed) in models]
    if len(runs) < len(seeds) * len(methods):  # models with other seeds: method by method, so tables keep their order
        position = {id(method): i for i, method in enumerate(methods)}
        runs.sort(key=lambda run: position[id(run[1])])
    if device is None:
        device = next(next(iter(models.values())).parameters()).device
    device = torch.device(device)
    store = store or EvaluationStore(None)
    described = {key: model_description(model) for key, model in models.items()}
    code = function_fingerprint(evaluate_tsplib)
    rows = []
    bar = tqdm(total=len(instances) * len(runs), desc="TSPLIB", disable=not progress, mininterval=1.0)
    for instance in instances:
        batch = instance.for_model(device)
        coords = hashlib.sha256(np.ascontiguousarray(instance.coords, dtype=np.float64).tobytes()).hexdigest()[:16]
        for seed, method in runs:
            model_key = (method.model_key, seed)

            def tour_length(model=models[model_key], method=method, batch=batch, instance=instance):
                solution = greedy_solutions(model.to(device), batch, method)
                return np.array([euc_2d_length(instance.coords, solution[0].cpu().numpy())])

            key = {"kind": "tsplib", "problem": "tsp", "instance": instance.name, "coords": coords, "code": code,
                   "method": method.key, "model": described[model_key], "N": method.N,
                   "lambdas": rule_fingerprint(method.rule, instance.n), "device": device.type}
            length = float(store.get_or_compute(key, tour_length)[0])
            if length < instance.best_known:
                raise ValueError(f"{instance.name}: a checked tour of length {length:g} is shorter than the "
                                 f"optimum {instance.best_known} in best_known.csv; the table is wrong for it")
            rows.append({"name": instance.name, "n": instance.n, "band": instance.band, "method": method.key,
                         "seed": seed, "length": length, "best_known": instance.best_known,
                         "gap_pct": 100 * (length / instance.best_known - 1)})
            bar.update()
    bar.close()
    return pd.DataFrame(rows)


def tsplib_tables(results: pd.DataFrame, digits: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(gap per instance: rows name (n), columns methods, mean over seeds; mean gap per size band:
    rows methods, columns bands and 'all'), in %."""
    per_seed = results.groupby(["name", "n", "band", "method"], sort=False).gap_pct.mean().reset_index()
    order = list(dict.fromkeys(results.method))
    per_instance = per_seed.pivot_table(index=["n", "name"], columns="method", values="gap_pct")[order]
    per_instance.index = [f"{name} ({n})" for n, name in per_instance.index]
    bands = [label for _, label in BANDS if label in set(results.band)]
    by_band = per_seed.pivot_table(index="method", columns="band", values="gap_pct", aggfunc="mean")[bands]
    by_band["all"] = per_seed.groupby("method").gap_pct.mean()
    return per_instance.round(digits), by_band.loc[order].round(digits)



def seed_level_by_band(results: pd.DataFrame, base: str = "inv_sqrt_d") -> pd.DataFrame:
    """Each method against `base` per size band and over all instances, seed by seed. A seed's effect
    is the mean over the band's instances of the per-instance change of the tour length (%), so that
    every instance weighs the same whatever its size. One row per (band, method): `per_seed` (the
    effects in seed order) and the columns of `seed_level.summarise_effects`."""
    ratio = results.pivot_table(index=["name", "band", "seed"], columns="method", values="length")
    change = 100 * (ratio.div(ratio[base], axis=0) - 1)
    bands = [label for _, label in BANDS if label in set(results.band)]
    rows = []
    for band in bands + ["all"]:
        part = change if band == "all" else change.xs(band, level="band", drop_level=False)
        by_seed = part.groupby(level="seed").mean()
        for method in [m for m in dict.fromkeys(results.method) if m != base]:
            effects = by_seed[method].to_numpy()
            rows.append({"band": band, "method": method, "per_seed": effects, **summarise_effects(effects)})
    return pd.DataFrame(rows)
