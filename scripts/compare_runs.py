"""The same methods in two runs of one training notebook (two training recipes, say), compared
instance by instance on the same test sets.

    python scripts/compare_runs.py FIRST_RUN SECOND_RUN PROBLEM [--methods eie log_N] [--alpha 0.05]

FIRST_RUN and SECOND_RUN name folders of results/ (or give paths); prints one row per setting,
method and n: each run's mean objective and gap (seeds averaged, with their spread over seeds) and
the paired difference first - second with its 95 % interval, Wilcoxon p-value, Holm over all rows
and the verdict for the first run. These are instance-level tests for the given models; with few
seeds, read the spread over seeds first.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie.comparison import (  # noqa: E402
    RESULT_FILES,
    RESULT_NOTEBOOKS,
    holm,
    load_problem_results,
    paired_comparison,
)
from eie.problems import PROBLEMS, make_problem  # noqa: E402


def compare_runs(first, second, problem: str, methods=None, alpha: float = 0.05) -> pd.DataFrame:
    """The same methods in two runs of one training notebook (say, two training recipes), instance by
    instance on the same test sets: for each setting, method and n, the mean objective and mean gap
    to the reference in each run (seeds averaged; `objective_std` / `gap_std`: spread over seeds),
    and the paired difference first - second with its 95 % interval, Wilcoxon p-value, Holm over
    all rows, and the verdict for the first run. `first`, `second`: results folders."""
    loaded = []
    for folder in (first, second):
        found = load_problem_results(folder, problem)
        if found is None:
            raise FileNotFoundError(f"{folder} holds no {RESULT_FILES[problem][0]}: run notebooks/"
                                    f"{RESULT_NOTEBOOKS[problem]}.ipynb for it first")
        loaded.append(found)
    (results_a, objectives_a), (results_b, objectives_b) = loaded
    if methods is None:
        methods = [m for m in dict.fromkeys(results_a.method) if m != "reference" and m in set(results_b.method)]
    maximise = make_problem(problem).maximise
    rows = []
    for method in methods:
        merged = {(s, "first", seed, n): v for (s, m, seed, n), v in objectives_a.items() if m == method}
        merged.update({(s, "second", seed, n): v for (s, m, seed, n), v in objectives_b.items() if m == method})
        if not merged:
            raise ValueError(f"method {method!r} is in neither run")
        paired = paired_comparison(merged, "first", maximise=maximise, alpha=alpha).drop(columns="other")
        for tag, results in (("first", results_a), ("second", results_b)):
            summary = results[results.method == method].groupby(["setting", "n"]).agg(
                objective=("objective", "mean"), objective_std=("objective", "std"), gap=("gap_pct", "mean"),
                gap_std=("gap_pct", "std"))
            paired = paired.join(summary.add_suffix(f"_{tag}"), on=["setting", "n"])
        rows.append(paired.assign(method=method))
    frame = pd.concat(rows, ignore_index=True)
    frame["p_holm"] = holm(frame.p)
    better = frame["diff"] > 0 if maximise else frame["diff"] < 0
    frame["verdict"] = np.where(frame.p_holm >= alpha, "n.s.", np.where(better, "better", "worse"))
    front = ["setting", "method", "n", "instances"]
    return frame[front + [c for c in frame.columns if c not in front]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("problem", choices=sorted(PROBLEMS))
    parser.add_argument("--methods", nargs="*", default=None)
    parser.add_argument("--alpha", type=float, default=0.05)
    args = parser.parse_args()
    folders = [Path(f) if Path(f).is_dir() else ROOT / "results" / f for f in (args.first, args.second)]
    frame = compare_runs(*folders, args.problem, methods=args.methods, alpha=args.alpha)
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(frame.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
