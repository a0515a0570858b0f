"""Seed-level statistics: the trained model, not the test instance, is the unit of replication.

A method applied to the 1/sqrt(d) model of seed s is compared with that same model at the same test
length: its effect on seed s is 100 (objective of the method / objective of 1/sqrt(d) - 1), in % (a
retrained rule's model of seed s is compared with the 1/sqrt(d) model of seed s: same data stream,
same initial seed). Over the seeds:

- `seed_effects`: the per-seed effects at one n;
- `summarise_effects`: their mean, the t interval over seeds (`scipy.stats.ttest_1samp(...)
  .confidence_interval()`), the two-sided p of "no effect", how many seeds are better and worse, the
  two one-sided tests (TOST) of equivalence within +-`margin` %, and the one-sample test against an
  effect the paper reports;
- `seed_level_table`: one row per setting and method at the longest n, with the paper's effect beside.

With three seeds the interval is wide (t with 2 degrees of freedom: 4.30 standard errors): a
"no difference" claim is made only where TOST rejects both one-sided nulls at `alpha`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from .paper import paper_rows

EQUIVALENCE_MARGIN = 1.0  # % of the 1/sqrt(d) model's objective within which two methods count as equivalent


def seed_effects(results: pd.DataFrame, method: str, n: int, setting: str = "", base: str = "inv_sqrt_d") -> pd.Series:
    """Per-seed effect of `method` against `base` at test length `n` (%, indexed by seed; seeds where
    both were evaluated). `results` has the columns setting, method, seed, n, objective (a results
    table of the training notebooks). An empty setting read back by `pd.read_csv` as NaN counts as ""."""
    settings = results.setting.astype(object).where(results.setting.notna(), "").astype(str)
    part = results[(settings == setting) & (results.n == n) & (results.seed >= 0)]
    by_seed = part.pivot_table(index="seed", columns="method", values="objective")
    if method not in by_seed or base not in by_seed:
        return pd.Series(dtype=float, name=method)
    effect = 100 * (by_seed[method] / by_seed[base] - 1)
    return effect.dropna().rename(method)


def summarise_effects(effects, maximise: bool = False, margin: float = EQUIVALENCE_MARGIN,
                      paper_effect: float | None = None, alpha: float = 0.05) -> dict:
    """Seed-level summary of per-seed effects (%): seeds, mean, ci_low/ci_high (t interval at
    1 - alpha), p (two-sided, effect 0), better/worse (seeds on each side; `maximise`: a larger
    objective is better), p_equivalence (TOST: the larger of the two one-sided p-values against
    -margin and +margin; NaN with fewer than two seeds), equivalent (p_equivalence < alpha), and
    p_paper (two-sided, effect = `paper_effect`; NaN without one)."""
    x = np.asarray(effects, dtype=float)
    x = x[np.isfinite(x)]
    k = len(x)
    out = {"seeds": k, "mean": float(x.mean()) if k else math.nan, "ci_low": math.nan, "ci_high": math.nan,
           "p": math.nan, "better": int((x > 0).sum() if maximise else (x < 0).sum()),
           "worse": int((x < 0).sum() if maximise else (x > 0).sum()), "p_equivalence": math.nan,
           "equivalent": False, "p_paper": math.nan, "margin": margin}
    if k < 2:
        return out
    if np.ptp(x) == 0:  # every seed the same: no spread to test with
        out.update(ci_low=float(x[0]), ci_high=float(x[0]), p=0.0 if x[0] != 0 else 1.0)
        out["p_equivalence"] = 0.0 if abs(x[0]) < margin else 1.0
        out["equivalent"] = out["p_equivalence"] < alpha
        if paper_effect is not None:
            out["p_paper"] = 0.0 if x[0] != paper_effect else 1.0
        return out
    test = stats.ttest_1samp(x, 0.0)
    interval = test.confidence_interval(1 - alpha)
    lower = stats.ttest_1samp(x, -margin, alternative="greater").pvalue
    upper = stats.ttest_1samp(x, margin, alternative="less").pvalue
    out.update(ci_low=float(interval.low), ci_high=float(interval.high), p=float(test.pvalue),
               p_equivalence=float(max(lower, upper)))
    out["equivalent"] = out["p_equivalence"] < alpha
    if paper_effect is not None:
        out["p_paper"] = float(stats.ttest_1samp(x, paper_effect).pvalue)
    return out


def paper_effect(problem: str, setting: str, method: str, factor: int, base: str = "inv_sqrt_d") -> float | None:
    """The effect the paper's table reports for `method` against `base` at n = factor x N (%), or None."""
    rows = paper_rows(problem, setting)
    if rows is None or method not in rows or base not in rows:
        return None
    position = [i for i, n in enumerate(rows["n"]) if n == factor * rows["n"][0]]
    if not position:
        return None
    mean = rows[method][position[0]][0]
    reference = rows[base][position[0]][0]
    return 100 * (mean / reference - 1)


def seed_level_table(problem: str, results: pd.DataFrame, methods, maximise: bool = False,
                     base: str = "inv_sqrt_d", margin: float = EQUIVALENCE_MARGIN, n: int | None = None,
                     paper_setting=None) -> pd.DataFrame:
    """One row per setting and method at the longest test length (or `n`): the seed-level summary of
    `summarise_effects`, with the per-seed effects and the paper's effect at the same n/N.

    `paper_setting(setting)` maps a setting to the paper's (e.g. N = 20's scaled capacities have none;
    default: the same name)."""
    rows = []
    for setting in dict.fromkeys(results.setting):
        part = results[(results.setting == setting) & (results.method != "reference")]
        n_train = int(part.n.min())
        at = int(part.n.max()) if n is None else n
        for method in methods:
            effects = seed_effects(part, method, at, setting, base)
            if effects.empty:
                continue
            theirs = None
            mapped = setting if paper_setting is None else paper_setting(setting)
            if mapped is not None and n_train == 100:
                theirs = paper_effect(problem, mapped, method, at // n_train, base)
            summary = summarise_effects(effects, maximise, margin, theirs)
            rows.append({"problem": problem, "setting": setting, "method": method, "N": n_train, "n": at,
                         "per_seed": ", ".join(f"{v:+.2f}" for v in effects), **summary,
                         "paper": math.nan if theirs is None else theirs})
    return pd.DataFrame(rows)


def describe(row) -> str:
    """'+1.98 % [-1.9, +5.9]; worse on 3 of 3 seeds' (+ 'equivalent within +-1 %' where TOST says so)."""
    if row["seeds"] < 2:
        return f"{row['mean']:+.2f} % (one seed)"
    text = (f"{row['mean']:+.2f} % [{row['ci_low']:+.1f}, {row['ci_high']:+.1f}]; better on {row['better']}, "
            f"worse on {row['worse']} of {row['seeds']} seeds")
    if row["equivalent"]:
        text += f"; equivalent within ±{row['margin']:g} % (TOST p = {row['p_equivalence']:.2g})"
    return text
