"""Which attention scale does a trained 1/sqrt(d) model want at a longer n?

A constant lambda = f / sqrt(d) at every n, applied where EIE applies its lambda(n) (the sites the
model was trained with), swept over factors f on the first instances of the run's fixed test set,
beside the factors EIE (lambda(n) sqrt(d)) and log_N (ln n / ln N) use at the same n. If the best f
lies well below EIE's, EIE sharpens the attention further than the trained model can use.

`sweep` measures one model; `best_factors` reads one sweep per seed into the optimum per seed (the
best f on the grid and the factors whose mean cost is within two standard errors of it) beside EIE's
and log_N's; `optimum_over_seeds` gives the mean best f with its t-interval over seeds; `sweep_figure`
draws one sweep. `sweep_name` is the one name of a sweep's csv and figure.
"""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import plotting
from .decoding import constant_factor
from .evaluation import fixed_test_set, greedy_costs
from .methods import BoundMethod, label
from .seed_level import summarise_effects

FACTORS = (0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0)


def factor_name(factor: float) -> str:
    """A constant factor's method name in a sweep's rows, e.g. 'f = 1.25'."""
    return f"f = {factor:g}"


def sweep_name(problem: str, tag: str, seed: int) -> str:
    """The stem of a sweep's csv (results/<run>/) and, after the run's name, of its figure (figures/):
    lambda_sweep_<problem><tag>_seed<seed>, e.g. lambda_sweep_cvrp_C10_seed1."""
    return f"lambda_sweep_{problem}{tag}_seed{seed}"


@torch.no_grad()
def sweep(model, plain: BoundMethod, rules: list[BoundMethod], lengths, factors=FACTORS, instances: int = 256,
          test_seed: int = 1234, chunk: int = 64, progress: bool = True) -> pd.DataFrame:
    """Mean objective of `model` with lambda = f x (plain's 1/sqrt(d)) for each factor f, and with each
    of `rules` (bound methods such as EIE and log_N), on the first `instances` of the fixed test set
    at each n of `lengths`. Returns one row per (n, method): n, method ('f = <f>' or the rule's key),
    factor (the rule's lambda(n) sqrt(d)), instances, objective (mean; bin packing: the load rate,
    higher is better), sem, vs_inv_sqrt_d_pct (against f = 1 at the same n, in %)."""
    if instances < 2 or not factors or any(f <= 0 for f in factors) or 1.0 not in factors:
        raise ValueError(f"a sweep needs instances >= 2 (got {instances}) and positive factors including 1 "
                         f"(got {list(factors)})")
    sign = -1.0 if model.problem.maximise else 1.0
    d = plain.rule.d
    rows = []
    with tqdm(total=len(lengths) * (len(factors) + len(rules)), desc="lambda sweep", disable=not progress,
              mininterval=1.0) as bar:
        for n in lengths:
            test = fixed_test_set(model.problem, n, instances, seed=test_seed)
            runs = [(factor_name(f), f, constant_factor(plain, f)) for f in factors]
            runs += [(rule.key, float(rule.rule(n)) * math.sqrt(d), rule) for rule in rules]
            for name, factor, method in runs:
                costs = sign * greedy_costs(model, test, method, chunk=chunk)
                rows.append({"n": n, "method": name, "factor": factor, "instances": instances,
                             "objective": float(costs.mean()), "sem": float(costs.std() / math.sqrt(instances))})
                bar.update()
    frame = pd.DataFrame(rows)
    plain_cost = frame[frame.method == factor_name(1.0)].set_index("n").objective
    frame["vs_inv_sqrt_d_pct"] = 100 * (frame.objective / frame.n.map(plain_cost) - 1)
    return frame


def read_sweep(path) -> pd.DataFrame:
    """A sweep's csv; the objective column, named after the problem's objective in older files
    (tour_length, total_distance, load_rate), is read as `objective`."""
    frame = pd.read_csv(path)
    named = [c for c in frame.columns if c not in ("n", "method", "factor", "instances", "sem", "vs_inv_sqrt_d_pct")]
    if "objective" not in frame.columns:
        if len(named) != 1:
            raise ValueError(f"{path}: cannot tell the objective column among {named}")
        frame = frame.rename(columns={named[0]: "objective"})
    return frame


def holds(frame: pd.DataFrame, n: int, methods: set[str], instances: int) -> bool:
    """Whether a sweep `frame` already has every one of `methods` at length n on `instances` instances
    (a sweep is deterministic given these, so such rows need not be recomputed)."""
    rows = frame[(frame.n == n) & (frame.instances == instances)]
    return methods <= set(rows.method)


def merged(held: pd.DataFrame | None, new: pd.DataFrame | None) -> pd.DataFrame:
    """A sweep holding the rows of `new` and those of `held` at lengths `new` does not cover, ordered by
    n (stable within a length); either may be None, not both."""
    if held is None and new is None:
        raise ValueError("nothing to merge: neither a held nor a new sweep")
    if held is None or new is None:
        return (new if held is None else held).reset_index(drop=True)
    kept = held[~held.n.isin(set(new.n))]
    return pd.concat([kept, new], ignore_index=True).sort_values("n", kind="stable").reset_index(drop=True)


def best_factors(sweeps: dict, maximise: bool = False) -> pd.DataFrame:
    """The optimum of each seed's sweep ({seed: frame}) at each n: best_f (the grid's best factor),
    its effect against 1/sqrt(d) in %, the factors within two standard errors of the best (f_low,
    f_high), and EIE's and log_N's factors and effects where the sweep has them."""
    rows = []
    for seed, frame in sorted(sweeps.items()):
        for n, part in frame.groupby("n"):
            grid = part[part.method.str.startswith("f = ")].sort_values("factor")
            best = grid.loc[grid.objective.idxmax() if maximise else grid.objective.idxmin()]
            margin = 2 * np.hypot(grid["sem"], best["sem"])
            close = grid[(grid.objective - best.objective).abs() <= margin]
            row = {"seed": seed, "n": n, "best_f": best.factor, "best_vs_inv_sqrt_d_pct": best.vs_inv_sqrt_d_pct,
                   "f_low": close.factor.min(), "f_high": close.factor.max()}
            for key in ("eie", "log_N"):
                rule = part[part.method == key]
                if len(rule):
                    row[f"{key}_f"] = float(rule.factor.iloc[0])
                    row[f"{key}_vs_inv_sqrt_d_pct"] = float(rule.vs_inv_sqrt_d_pct.iloc[0])
            rows.append(row)
    return pd.DataFrame(rows)


def optimum_over_seeds(best: pd.DataFrame, level: float = 0.95) -> pd.DataFrame:
    """Per n: the seeds, the mean best factor with its t-interval over seeds, and EIE's mean factor."""
    rows = []
    for n, part in best.groupby("n"):
        summary = summarise_effects(part.best_f.to_numpy(), alpha=1 - level)  # t-interval of the mean factor
        row = {"n": n, "seeds": len(part), "best_f_mean": summary["mean"], "best_f_low": summary["ci_low"],
               "best_f_high": summary["ci_high"]}
        if "eie_f" in part:
            row["eie_f_mean"] = part.eie_f.mean()
            row["seeds_with_eie_above_f_high"] = int((part.eie_f > part.f_high).sum())
        rows.append(row)
    return pd.DataFrame(rows)


def sweep_figure(frame: pd.DataFrame, title: str, objective: str, maximise: bool = False):
    """One panel per n: the constant factors' effect against 1/sqrt(d) (with +-2 standard errors), EIE's
    and log_N's factor and effect marked on top."""
    lengths = sorted(frame.n.unique())
    fig, axes = plt.subplots(1, len(lengths), figsize=(4.4 * len(lengths), 3.6), squeeze=False)
    for ax, (n, part) in zip(axes[0], frame.groupby("n"), strict=True):
        grid = part[part.method.str.startswith("f = ")].sort_values("factor")
        plain = float(grid[grid.factor == 1.0].objective.iloc[0])
        band = 200 * grid["sem"] / abs(plain)
        ax.fill_between(grid.factor, grid.vs_inv_sqrt_d_pct - band, grid.vs_inv_sqrt_d_pct + band, color="0.85")
        ax.plot(grid.factor, grid.vs_inv_sqrt_d_pct, "o-", color="0.3", label="constant f / √d (± 2 SE)")
        for key in ("log_N", "eie"):  # EIE last: drawn on top
            rule = part[part.method == key]
            if len(rule):
                style = plotting.rule_kwargs(key)
                ax.plot(rule.factor, rule.vs_inv_sqrt_d_pct, "D", markersize=9, zorder=5, color=style.get("color"),
                        label=f"{label(key)} (f = {float(rule.factor.iloc[0]):.2f})")
        ax.axhline(0, color="0.6", lw=0.8)
        ax.set(title=f"n = {n}", xlabel="f, where λ = f / √d at every site")
        ax.legend(fontsize=8)
    better = "higher" if maximise else "lower"
    axes[0][0].set_ylabel(f"{objective} vs 1/√d (%)")
    fig.suptitle(f"{title} ({better} is better)", y=1.02)
    fig.tight_layout()
    return fig
