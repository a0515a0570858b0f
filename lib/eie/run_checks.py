"""What every correct run of a training notebook meets, on any machine.

Training follows a different floating-point path with another thread count or CPU family
(reductions are summed in another order), REINFORCE then samples other tours, and the trained
models, their costs and the tables differ in the last digits or more. The notebooks therefore show
those numbers in cells whose outputs nbval does not compare, and compare instead the output of these
checks: each asserts a property that holds on every machine for a correct run (and fails, with a
message, for a broken one) and reports it in words, with no measured number.

- `check_training_log`: one row per epoch for every (rule, seed) (fewer only where the plateau rule
  stopped it), finite costs, p-values in [0, 1];
- `check_extrapolation`: every (setting, method, seed) evaluated at every n with finite objectives;
  the training-free rules reproduce the 1/sqrt(d) model exactly at the training length (they equal
  1/sqrt(d) there, the same model decodes the same instances); and, when given, every model is within
  `max_gap_pct` of the reference at the training length (a bound trained models meet and untrained
  ones do not: the notebooks quote both).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from . import methods
from .study import seeds_per_rule
from .training import plateau_action


class RunCheckFailed(AssertionError):
    """A property every correct run has does not hold."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise RunCheckFailed(message)


def check_training_log(log: pd.DataFrame, rules, seeds, epochs: int, plateau_window: int = 0,
                       plateau_tolerance: float = 0.001, lr_drops: int = 0, lr_floor: float = 0.0) -> str:
    """Assert the training log is complete and sane; return one line that says what was checked.
    `seeds`: every rule's seeds, or {rule: its seeds} (`study.seeds_by_rule`). With a stopping rule
    on (the plateau rule, or `lr_floor`: `eie.training.plateau_action`), a model may stop before
    `epochs`, but only at the first epoch where the rules say stop (after its `lr_drops` drops of the
    learning rate)."""
    if isinstance(seeds, dict):
        _require(set(rules) <= set(seeds), f"training log check: no seeds given for {sorted(set(rules) - set(seeds))}")

    per_rule = seeds_per_rule(rules, seeds)
    stopped = 0
    for rule in rules:
        for seed in per_rule[rule]:
            part = log[(log.rule == rule) & (log.seed == seed)]
            ran = len(part)
            _require(list(part.epoch) == list(range(1, ran + 1)) and (ran == epochs or 1 <= ran < epochs and (plateau_window or lr_floor)),
                     f"training log of {rule}, seed {seed}: epochs {list(part.epoch)}, expected 1..{epochs}")
            _require("lr" in part or not (lr_drops or lr_floor),
                     "training log: no lr column, which lr_drops > 0 and lr_floor > 0 need")
            costs, lrs = list(part.eval_cost), list(part.lr) if "lr" in part else None
            first_plateau = next((k for k in range(1, ran + 1) if plateau_action(
                costs[:k], lrs and lrs[:k], plateau_window, plateau_tolerance, lr_drops, lr_floor) == "stop"), None)
            expected = (ran,) if ran < epochs else (None, epochs)  # stopped where the rule first held, or ran all
            _require(first_plateau in expected,
                     f"training log of {rule}, seed {seed}: {ran} of {epochs} epochs, but the stopping rules "
                     f"(plateau window {plateau_window}, tolerance {plateau_tolerance}, lr_floor {lr_floor}) first "
                     f"hold at epoch {first_plateau}; were plateau_window, plateau_tolerance, lr_drops or lr_floor "
                     "changed while the model trained? (a resumed run keeps training under the new values)")
            stopped += ran < epochs
    extra = sorted(set(zip(log.rule, log.seed, strict=True)) - {(rule, seed) for rule in rules for seed in per_rule[rule]})
    _require(not extra, f"training log: models {extra} were not asked for (rules {list(rules)}, seeds {per_rule})")
    costs = log[["train_cost", "baseline_cost", "eval_cost"]].to_numpy(dtype=float)
    _require(bool(np.isfinite(costs).all()), "training log: a cost is not finite (the run diverged)")
    _require(bool(log.p_value.between(0, 1).all()), "training log: a p-value lies outside [0, 1]")
    counts = {len(s) for s in per_rule.values()}
    models = (f"{len(rules)} rules x {counts.pop()} seeds" if len(counts) == 1 else
              " + ".join(f"{rule} x {len(per_rule[rule])} seed{'s' if len(per_rule[rule]) != 1 else ''}" for rule in rules))
    if lr_floor and not plateau_window:
        return (f"training log: {models}, each for {epochs} epochs or until an epoch trained at a learning rate "
                f"below {lr_floor:g} ({stopped} stopped before {epochs} epochs), every cost finite, every p-value in [0, 1]")
    if not plateau_window:
        return f"training log: {models} x {epochs} epochs, every cost finite, every p-value in [0, 1]"
    return (f"training log: {models}, each until its held-out cost stopped improving "
            f"(window {plateau_window}, {stopped} stopped before {epochs} epochs), every cost finite, every p-value in [0, 1]")


def check_extrapolation(results: pd.DataFrame, n_train: int, reference: str = "the reference",
                        max_gap_pct: float | None = None) -> str:
    """Assert the properties above on a long result table (`extrapolation.evaluate`); return a report."""
    models = results[results.method != "reference"]
    lengths = sorted(int(n) for n in results.n.unique())
    _require(bool(lengths) and lengths[0] == n_train, f"results start at n = {lengths[:1]}, not at n_train = {n_train}")
    for (setting, method, seed), part in models.groupby(["setting", "method", "seed"], sort=False):
        _require(sorted(int(n) for n in part.n) == lengths, f"{setting or ''} {method} seed {seed}: evaluated at n = "
                                            f"{sorted(part.n)}, expected {lengths}")
    _require(bool(np.isfinite(models.objective.to_numpy(dtype=float)).all()), "an objective is not finite")
    fewest, most = models.groupby("method").seed.nunique().agg(["min", "max"])  # seeds_by_rule may differ
    lines = [f"{len(models.method.unique())} methods x {most if fewest == most else f'{fewest}-{most}'} seeds"
             f"{' x ' + str(len(models.setting.unique())) + ' settings' if models.setting.nunique() > 1 else ''}"
             f" evaluated at n = {lengths}; every objective finite"]
    at_train = models[models.n == n_train].set_index(["setting", "method", "seed"]).objective
    present = set(models.method)
    free = [m for m in present if m in methods.keys(trained=False) and methods.get(m).applied_to in present]
    for method in sorted(free, key=list(dict.fromkeys(models.method)).index):
        base_key = methods.get(method).applied_to
        base = at_train.xs(base_key, level="method")
        same = np.allclose(at_train.xs(method, level="method").loc[base.index], base, rtol=1e-6, atol=0)
        _require(same, f"{method} differs from the {base_key} model it is applied to at the training length "
                       f"n = {n_train}, where a test-time method must equal it: the method or the evaluation is broken")
    if free:
        bases = sorted({methods.get(m).applied_to for m in free})
        lines.append(f"{', '.join(sorted(free, key=list(dict.fromkeys(models.method)).index))} reproduce the "
                     f"{', '.join(methods.label(b) for b in bases)} model exactly at n = N = {n_train}")
    gaps = models[models.n == n_train].gap_pct.dropna()
    if max_gap_pct is not None and gaps.empty:
        lines.append(f"no instance solved by {reference}: the gap bound was not checked")
    elif max_gap_pct is not None:
        _require(bool((gaps < max_gap_pct).all()),
                 f"a model is {gaps.max():.1f} % worse than {reference} at its training length n = {n_train}, more "
                 f"than the {max_gap_pct:g} % every trained model of this notebook reaches: was it trained?")
        lines.append(f"every model is within {max_gap_pct:g} % of {reference} at n = N")
    return "\n".join(lines)


def check_permutation_invariance(spread: pd.DataFrame, model: str = "inv_sqrt_d", tolerance_pct: float = 0.01) -> str:
    """Theorem 1 on a trained Attention Model (`eie.rivals.permutation_spread`): its greedy tour
    lengths change under reordering of the cities by less than `tolerance_pct` % on average at every
    n (float rounding may flip a near-tie of a greedy choice, so not exactly 0)."""
    part = spread[spread.model == model]
    _require(len(part) > 0, f"no permutation measurements for the {model!r} model")
    worst = float(part.mean_abs_change_pct.max())
    _require(worst < tolerance_pct, f"the {model!r} model's tours change by {worst:.3g} % on average under "
             f"reordering; Theorem 1 allows only float rounding (a flipped near-tie)")
    return (f"{methods.label(model)} model: mean change of the tour length under reordering below {tolerance_pct:g} % "
            "at every n (Theorem 1; float rounding may flip a near-tie of a greedy choice)")
