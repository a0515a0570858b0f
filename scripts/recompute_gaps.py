"""Recompute a finished run's gaps against its reference solver solved again, without decoding again.

    python scripts/recompute_gaps.py PRESET NOTEBOOK [--set name=value ...]

For a run whose reference solver changed after its models were evaluated (a longer HGS budget, a
fixed solver) and whose checkpoints may be gone: the reference is solved again on the same
instances (`eie.study.compute_references`), each method's gap recomputed from the stored
per-instance objectives, and results/<run>/<problem>.csv written back. Example (CVRP with 20 000
HGS iterations): python scripts/recompute_gaps.py presets/cpu_long_v2.yaml 04_train_cvrp --set hgs_iterations=20000
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, study  # noqa: E402
from eie.comparison import RESULT_FILES, load_problem_results  # noqa: E402


def recompute_gaps(notebook: str, params: dict) -> pd.DataFrame:
    """A finished run's gaps against a reference computed again (`compute_references`), without
    decoding again: for a run whose reference solver changed after its models were evaluated (a
    longer budget, a fixed solver) and whose checkpoints may be gone. Reads the results table and
    per-instance objectives that `evaluate_problem` wrote to results/<run>/, replaces each reference
    row's objective and each method's `gap_pct` (the formula of `evaluate`: the method's mean over
    the reference's instances against the reference's mean; positive = worse), and writes the
    table back. The methods' objectives are unchanged. Returns the new table."""
    problem_class = study.problem_for(notebook)
    out = study.results_dir(params["run"])
    found = load_problem_results(out, problem_class.name)
    if found is None:
        raise FileNotFoundError(f"no {RESULT_FILES[problem_class.name][0]} in {out}: recompute_gaps needs a finished "
                                f"evaluation of {notebook} there (run the notebook with this run first)")
    results, objectives = found
    references = study.compute_references(notebook, params)
    sign = -1.0 if problem_class.maximise else 1.0
    for i, row in results.iterrows():
        reference = references[row.setting][int(row.n)]
        if row.method == "reference":
            results.loc[i, "objective"] = float(reference.mean()) if len(reference) else float("nan")
        elif len(reference):
            objective = objectives[(row.setting, row.method, int(row.seed), int(row.n))][:len(reference)]
            results.loc[i, "gap_pct"] = float(100 * sign * (objective.mean() / reference.mean() - 1))
    results.to_csv(out / RESULT_FILES[problem_class.name][0], index=False, float_format="%.4f")
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("notebook", choices=experiments.training_notebooks())
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=VALUE",
                        help="settings over the preset's, e.g. hgs_iterations=20000 (values read as YAML)")
    args = parser.parse_args()
    overrides = {}
    for item in args.set:
        name, _, value = item.partition("=")
        overrides[name] = yaml.safe_load(value)
    params = experiments.load(args.notebook, args.preset, **overrides)
    table = recompute_gaps(args.notebook, params)
    print(table[table.method == "reference"].to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
