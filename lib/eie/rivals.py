"""Measurements the rival methods call for beyond the extrapolation table (notebook 08).

- `rescaling_sweep`: PENS rescales coordinates by a factor chosen per n; here every fixed factor of a
  list at every n, on the study's fixed test sets, for each model it is asked for (the density-
  preserving factor sqrt(n/N) is the registered method `rescale`).
- `permutation_spread`: how much a model's greedy tour length changes when the same instances are
  listed in other orders. Theorem 1: not at all for the Attention Model (float rounding aside); the
  Pointer Network's LSTM reads the cities in order, so its tours may change.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from .evaluation import extrapolation_lengths, fixed_test_set, greedy_costs
from .evaluation_store import EvaluationStore
from .extrapolation import evaluate
from .methods import BoundMethod, Method


def fixed_factor(model_key: str, factor: float, rule) -> BoundMethod:
    """A test-time method (not registered) that shows the model trained with `model_key` its own
    scale `rule` and the coordinates times `factor`, whatever n is."""
    method = Method(f"{model_key}@x{factor:g}", f"x{factor:g}", f"x{factor:g}", "#000000", lambda d, **_: rule,
                    applied_to=model_key, coordinate_scale=lambda n, N: factor)
    return BoundMethod(method, rule, N=1)


def rescaling_sweep(models: dict, model_keys, factors, n_train: int, n_max: int, test_size: int,
                    test_seed: int = 1234, chunk: int = 256, device: str = "auto", progress: bool = True,
                    store: EvaluationStore | None = None) -> pd.DataFrame:
    """Mean greedy tour length (original coordinates) of each trained model `model_keys` (every seed
    it has in `models`, {(key, seed): model}) with the coordinates times each factor, at each n = N * 2^k.
    Each (model, factor, seed, n) is one piece of `eie.extrapolation.evaluate`, kept in `store` when one is
    given (the run's store: an interrupted sweep resumes, a rerun reads it back). A piece names its
    factor through the method key `<model>@x<factor:g>` (six significant digits), and this module is
    not among the store's method sources: after an edit of `fixed_factor`, delete the sweep's pieces.
    Columns: model, seed, n, factor, objective."""
    seeds = {key: sorted(seed for model_key, seed in models if model_key == key) for key in model_keys}
    if not all(seeds.values()):
        raise ValueError(f"no trained model for {[key for key in model_keys if not seeds[key]]}: models has {sorted(models)}")
    parts = []
    for key in model_keys:
        own = {(key, seed): models[(key, seed)] for seed in seeds[key]}
        rule = next(iter(own.values())).attention.rule
        swept = [fixed_factor(key, factor, rule) for factor in factors]
        factor_of = {method.key: factor for method, factor in zip(swept, factors, strict=True)}
        result, _, _ = evaluate(own, swept, n_train, n_max, test_size, test_seed=test_seed, reference_size=0,
                                chunk=chunk, device=device, progress=progress, store=store)
        result = result[result.method != "reference"]
        parts.append(pd.DataFrame({"model": key, "seed": result.seed, "n": result.n,
                                   "factor": result.method.map(factor_of), "objective": result.objective}))
    sweep = pd.concat(parts, ignore_index=True)
    order = {key: i for i, key in enumerate(model_keys)}
    return sweep.iloc[np.lexsort((sweep.factor, sweep.seed, sweep.model.map(order), sweep.n))].reset_index(drop=True)


def best_factors(sweep: pd.DataFrame) -> pd.DataFrame:
    """Per model and n: the factor with the shortest mean tour (seeds averaged), that tour length, the
    tour length at factor 1 and the density-preserving factor sqrt(n/N) (N: the sweep's smallest n)."""
    mean = sweep.groupby(["model", "n", "factor"]).objective.mean().reset_index()
    best = mean.loc[mean.groupby(["model", "n"]).objective.idxmin()].set_index(["model", "n"])
    out = best.rename(columns={"factor": "best_factor", "objective": "objective_at_best"})
    out["objective_at_1"] = mean[mean.factor == 1].set_index(["model", "n"]).objective.reindex(out.index)
    out["sqrt_n_over_N"] = [(n / sweep.n.min()) ** 0.5 for _, n in out.index]
    return out


@torch.no_grad()
def permutation_spread(models: dict, n_train: int, n_max: int, test_size: int, orderings: int = 4,
                       test_seed: int = 1234, seed: int = 0, chunk: int = 256) -> pd.DataFrame:
    """For each model ({(key, seed): model}) and n: greedy tour lengths of the same `test_size`
    instances under `orderings` random orders of their cities (the problem's own `permute`).
    Columns: model, seed, n, mean_abs_change_pct (mean over instances of |L(pi) - L| / L, averaged
    over orderings), max_abs_change_pct, instances_changed (share with any change above 1e-4 %)."""
    rows = []
    for n in extrapolation_lengths(n_train, n_max):
        for (key, model_seed), model in models.items():
            instances = fixed_test_set(model.problem, n, test_size, test_seed)
            base = greedy_costs(model, instances, chunk=chunk).double()
            generator = torch.Generator().manual_seed(seed * 7 + n)
            changes = []
            for _ in range(orderings):
                permuted, _ = model.problem.permute(instances, generator)
                changes.append(((greedy_costs(model, permuted, chunk=chunk).double() - base).abs() / base).cpu().numpy())
            changes = 100 * np.stack(changes)  # (orderings, instances), %
            rows.append({"model": key, "seed": model_seed, "n": n, "mean_abs_change_pct": float(changes.mean()),
                         "max_abs_change_pct": float(changes.max()),
                         "instances_changed": float((changes.max(0) > 1e-4).mean())})
    return pd.DataFrame(rows)
