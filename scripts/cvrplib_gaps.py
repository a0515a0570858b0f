"""The CVRP models of a run on the 70 CVRPLIB X instances (100-1000 customers): greedy and the best of
the 8 symmetric copies (augment8), every solution checked against the original demands and capacity
and scored with the set's rounded EUC_2D metric; the gap to the best-known cost per instance, by size
band, and each method against 1/sqrt(d) seed by seed, per mode.

    python scripts/cvrplib_gaps.py presets/cpu_paper.yaml [--setting C10] [--methods inv_sqrt_d eie log_N] [--max-n 1000]
        [--modes greedy augment8]

Writes results/<run>/cvrplib.csv (one row per instance, setting, mode, method and seed) and
results/<run>/cvrplib_table.md. The csv is rewritten after each (setting, seed), and a (setting, seed,
mode) it already holds in full (every method and instance asked for) is read back, not decoded again:
an interrupted run resumes, and a new seed or mode costs only its own decoding (delete the csv to
decode every model again, e.g. after retraining one). A csv written before the symmetry mode existed
has no mode column; its rows are greedy. The EIE net and the lambda* table are fitted up to the longest
instance where the run's own stop short of it (results/<run>/eie_nets/).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, extrapolation, study  # noqa: E402
from eie.comparison import markdown_table  # noqa: E402
from eie.cvrplib import BANDS, load_cvrplib  # noqa: E402
from eie.decoding import SYMMETRIES, symmetric  # noqa: E402
from eie.evaluation import greedy_solutions  # noqa: E402
from eie.methods import label  # noqa: E402
from eie.seed_level import describe, summarise_effects  # noqa: E402


def solve(model, instance, method, mode: str):
    """The instance's solution (node indices) in `mode`: greedy, or the best in the instance's own units
    of the greedy solutions of its 8 symmetric copies (the customers keep their indices; only the
    coordinates the model sees move)."""
    model_input = instance.for_model()
    copies = [model_input] if mode == "greedy" else [symmetric(model_input, *s) for s in SYMMETRIES]
    with torch.no_grad():
        solutions = [greedy_solutions(model, copy, method)[0].numpy() for copy in copies]
    costs = [instance.cost(solution) for solution in solutions]
    return solutions[int(np.argmin(costs))], min(costs)


def _held(done: pd.DataFrame, setting: str, seed: int, method_keys, modes, instances) -> pd.DataFrame | None:
    """The rows of `done` for (setting, seed) if they cover every method, mode and instance, else None."""
    if done.empty:
        return None
    part = done[(done.setting == setting) & (done.seed == seed) & done.method.isin(method_keys) & done["mode"].isin(modes)
                & done.name.isin([instance.name for instance in instances])]
    return part if len(part) == len(method_keys) * len(modes) * len(instances) else None


def read_done(out: Path | None) -> pd.DataFrame:
    """The rows `out` holds (empty without it); a csv without a mode column holds greedy rows only."""
    if out is None or not out.is_file():
        return pd.DataFrame()
    done = pd.read_csv(out, dtype={"setting": str})
    if "mode" not in done.columns:
        done.insert(done.columns.get_loc("setting") + 1, "mode", "greedy")
    return done


def evaluate(params: dict, settings, method_keys, max_n, modes=("greedy",), out: Path | None = None) -> pd.DataFrame:
    """Every (setting, seed, method, mode, instance) as a row; with `out`, the csv is read first (a
    (setting, seed, mode) it holds in full is not decoded again) and rewritten after each (setting, seed)."""
    instances = load_cvrplib(max_n=max_n)
    done = read_done(out)
    n_train, run = params["n_train"], params["run"]
    n_max = max(params["n_max"], max(instance.n for instance in instances) + 1)
    net, table = study.ensure_scales(16, n_train, n_max, run=run)
    methods = extrapolation.bind_methods(method_keys, 16, n_train, net, table)
    rows = []
    setups = [s for s in study.training_setups("04_train_cvrp", params) if not settings or s["setting"] in settings]
    for setup in setups:
        for seed in params["seeds"]:
            names = {m.model_key: study.model_name("cvrp", m.model_key, n_train, seed, setup["tag"]) for m in methods}
            if not all((study.models_folder(run) / f"{name}.pt").is_file() for name in names.values()):
                print(f"{setup['setting']} seed {seed}: no exported policy in results/{run}/models/ yet; skipped")
                continue
            held = {mode: _held(done, setup["setting"], seed, [m.key for m in methods], [mode], instances)
                    for mode in modes}
            for part in held.values():
                rows += [] if part is None else part.to_dict("records")
            missing = [mode for mode, part in held.items() if part is None]
            if len(missing) < len(modes):
                print(f"{setup['setting']} seed {seed}: {', '.join(m for m in modes if m not in missing)} "
                      f"read back from {out.name}")
            if not missing:
                continue
            models = study.load_policies(sorted(set(names.values())), run=run)
            for method in tqdm(methods, desc=f"{setup['setting']} seed {seed} ({', '.join(missing)})", mininterval=2.0):
                model = models[names[method.model_key]]
                for instance in instances:
                    for mode in missing:
                        _, cost = solve(model, instance, method, mode)
                        rows.append({"setting": setup["setting"], "mode": mode, "method": method.key, "seed": seed,
                                     "name": instance.name, "n": instance.n, "band": instance.band, "cost": cost,
                                     "best_known": instance.best_known, "gap_pct": 100 * (cost / instance.best_known - 1)})
            if out is not None:  # what the csv held (other methods and modes too), with this seed's rows over it
                _write(pd.concat([done, pd.DataFrame(rows)]).drop_duplicates(
                    ["setting", "mode", "method", "seed", "name"], keep="last"), out)
    return pd.DataFrame(rows)


def _write(frame: pd.DataFrame, out: Path) -> None:
    partial = out.with_name(out.name + ".partial")
    frame.to_csv(partial, index=False, float_format="%.4f")
    partial.replace(out)


def report(frame: pd.DataFrame, source: str) -> str:
    lines = [f"# CVRPLIB X: gaps to the best-known cost ({source})", "",
             f"{frame.name.nunique()} instances ({frame.n.min()}-{frame.n.max()} customers), "
             f"{frame.seed.nunique()} seeds; every solution checked against the original demands and capacity "
             "and scored in the set's rounded EUC_2D units. Modes: greedy; augment8, the best of the greedy "
             "solutions of the 8 symmetric copies of the instance.", ""]
    order = [label for _, label in BANDS]
    for (setting, mode), part in frame.groupby(["setting", "mode"], sort=False):
        by_seed = part.groupby(["method", "seed", "band"]).gap_pct.mean().unstack("band").reindex(columns=order)
        by_seed["all"] = part.groupby(["method", "seed"]).gap_pct.mean()
        mean, spread = by_seed.groupby("method").mean(), by_seed.groupby("method").std()
        cells = mean.round(1).astype(str) + " (" + spread.round(1).astype(str) + ")"
        lines += [f"## {setting}, {mode}", "", "Gap to the best-known cost (%), mean over the band's instances; "
                  "mean (std) over seeds:", "", markdown_table(cells.rename(index=label), "method"), ""]
        base = part[part.method == "inv_sqrt_d"].groupby("seed").cost.sum()
        for method in [m for m in dict.fromkeys(part.method) if m != "inv_sqrt_d"]:
            effects = 100 * (part[part.method == method].groupby("seed").cost.sum() / base - 1)
            summary = summarise_effects(effects.to_numpy())
            lines.append(f"- {label(method)} against 1/√d ({mode}), total cost over the instances, per seed "
                         f"{', '.join(f'{v:+.2f}' for v in effects)} %: {describe(summary)}.")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("--setting", nargs="*", default=None, help="settings to run (e.g. C10); default: all")
    parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie", "log_N"])
    parser.add_argument("--max-n", type=int, default=None, help="only instances with at most this many customers")
    parser.add_argument("--modes", nargs="+", default=["greedy", "augment8"], choices=["greedy", "augment8"],
                        help="greedy; augment8: the best of the greedy solutions of the 8 symmetric copies")
    args = parser.parse_args()
    params = experiments.load("04_train_cvrp", args.preset)
    out = study.results_dir(params["run"], create=False)
    frame = evaluate(params, args.setting, args.methods, args.max_n, args.modes, out=out / "cvrplib.csv")
    text = report(frame, f"results/{params['run']}, N = {params['n_train']}")
    (out / "cvrplib_table.md").write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
