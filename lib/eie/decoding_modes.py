"""Does a method's effect depend on how the model decodes? Each method under each decoding mode of
`eie.decoding` (greedy; best of K seeded samples; greedy over the 8 symmetries of the square),
against the 1/sqrt(d) model under the same mode, seed by seed.

`measure` decodes a run's exported 1/sqrt(d) models and appends one row per (problem, setting,
seed, n, mode, method) to a csv as each (setting, seed, n, mode) ends, with the per-instance
objectives beside it (`costs_path`), so an interrupted measurement resumes where it stopped;
`read_modes` and `read_costs` read them back; `modes_markdown` gives the mean objective per mode, each
mode's gap to the reference solver on the instances it solved, and the seed-level effect of each
method against 1/sqrt(d) per mode and n. The figure is `eie.plotting.decoding_modes_figure`.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from . import extrapolation, study
from .decoding import constant_factor, constant_key, method_label, mode_costs
from .evaluation import fixed_test_set
from .files import savez_atomic
from .problems import PROBLEMS, make_problem
from .seed_level import describe, summarise_effects

COLUMNS = ["problem", "setting", "seed", "n", "mode", "method", "instances", "mean", "sem", "seconds"]
BASE = "inv_sqrt_d"


def costs_path(csv) -> Path:
    """Where the per-instance objectives of a decoding-modes csv are kept: <stem>_costs.npz beside it."""
    csv = Path(csv)
    return csv.with_name(f"{csv.stem}_costs.npz")


def _cost_key(problem: str, setting: str, seed: int, n: int, mode: str, method: str) -> str:
    return f"{problem}/{setting}/{seed}/{n}/{mode}/{method}"


def store_costs(costs: dict, path) -> dict:
    """Write `costs` ({key of `read_costs`: objectives}) to `path` atomically, together with the groups
    the file already holds that `costs` lacks (two runs of the script on one run folder, TSP and CVRP
    say, each keep their own groups; where both hold a group, `costs`' values win). Returns what was
    written."""
    merged = {**read_costs(path), **costs}
    savez_atomic({_cost_key(*key): value for key, value in merged.items()}, path)
    return merged


def read_costs(path) -> dict:
    """{(problem, setting, seed, n, mode, method): per-instance objectives} from `costs_path(csv)`
    ({} where there is no such file)."""
    path = Path(path)
    if not path.is_file():
        return {}
    with np.load(path) as data:
        out = {}
        for key in data.files:
            problem, setting, seed, n, mode, method = key.split("/")
            out[(problem, setting, int(seed), int(n), mode, method)] = data[key]
        return out


def read_modes(path) -> pd.DataFrame:
    """A decoding-modes csv (columns `COLUMNS`; a problem without settings, TSP, has the setting "")."""
    frame = pd.read_csv(path, dtype={"problem": str, "setting": str}, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame]
    if missing:
        raise ValueError(f"{path}: not a decoding-modes table (columns {missing} missing; expected {COLUMNS})")
    return frame


def measure(params: dict, notebook: str, seeds, lengths, modes, method_keys, factors=(), instances: int = 256,
            out: Path | None = None, progress: bool = True, device: str = "cpu") -> Path:
    """Decode the first `instances` of the run's test set at each n in `lengths` with each method of
    `method_keys` (which must include 1/sqrt(d)) and each constant factor of `factors`, under each
    mode of `modes`, on the exported 1/sqrt(d) model of each seed of `notebook`'s settings (a seed
    whose model is not exported yet is skipped). Sampling is seeded by (seed, n), so reruns
    reproduce. Rows go to `out` (default results/<run>/decoding_modes.csv), the per-instance
    objectives to `costs_path(out)`. A (problem, setting, seed, n, mode) already in both is skipped;
    one in the csv without its per-instance objectives is decoded again, and its means must agree
    with the csv's (a check that the measurement reproduces). `progress` shows a bar with one step
    per (setting, seed, n, mode, method) and the group being decoded. `device`: where the models
    decode; sampled draws come from a generator on that device, so a group sampled on a GPU is
    reproduced there, not on a CPU. Returns the csv's path."""
    if BASE not in method_keys:
        raise ValueError(f"method_keys must include {BASE!r} (every effect is against it); got {list(method_keys)}")
    out = out or study.results_dir(params["run"], create=False) / "decoding_modes.csv"
    done = read_modes(out) if out.is_file() else pd.DataFrame(columns=COLUMNS)
    costs = read_costs(costs_path(out))
    n_train, run_name = params["n_train"], params["run"]
    net, table = study.ensure_scales(16, n_train, params["n_max"], run=run_name)
    bound = extrapolation.bind_methods(method_keys, 16, n_train, net, table)
    plain = next(m for m in bound if m.key == BASE)
    methods = [(m.key, m) for m in bound] + [(constant_key(f), constant_factor(plain, f)) for f in factors]
    setups = study.training_setups(notebook, params)
    bar = tqdm(total=len(setups) * len(seeds) * len(lengths) * len(modes) * len(methods), desc="decoding modes",
               unit="decode", disable=not progress, mininterval=2.0)
    for setup in setups:
        problem = make_problem(setup["config"]["problem"], **setup["config"].get("problem_options", {}))
        sign = -1.0 if problem.maximise else 1.0
        setting = setup["setting"]
        for seed in seeds:
            name = study.model_name(problem.name, BASE, n_train, seed, setup["tag"])
            if not (study.models_folder(run_name) / f"{name}.pt").is_file():
                bar.write(f"{name}: no exported policy yet; skipped")
                bar.update(len(lengths) * len(modes) * len(methods))
                continue
            model = study.load_policies([name], run=run_name, device=device)[name]
            for n in lengths:
                test = fixed_test_set(problem, n, params["test_size"], params["test_seed"])
                test = {key: value[:instances] for key, value in test.items()}
                for mode in modes:
                    here = (done.problem == problem.name) & (done.setting == setting) & (done.seed == seed) & (
                        done.n == n) & (done["mode"] == mode)
                    stored = done[here].set_index("method")["mean"]
                    keys = {key: (problem.name, setting, seed, n, mode, key) for key, _ in methods}
                    # finished when every asked method the group holds has its objectives (a stored method
                    # not asked for this time is left as it is)
                    if len(stored) and all(keys[key] in costs for key in stored.index if key in keys):
                        bar.update(len(methods))
                        continue
                    rows = []
                    for key, method in methods:
                        if len(stored) and key not in stored.index:
                            bar.update(1)
                            continue  # a method the stored rows do not have: not added to a finished group
                        bar.set_postfix_str(f"{setting or problem.name} seed {seed} n={n} {mode} {key}")
                        started = time.perf_counter()
                        values = sign * mode_costs(model, test, method, mode, seed=1000 * seed + n).cpu().numpy()
                        costs[keys[key]] = values
                        rows.append({"problem": problem.name, "setting": setting, "seed": seed, "n": n, "mode": mode,
                                     "method": key, "instances": len(values), "mean": float(values.mean()),
                                     "sem": float(values.std(ddof=1) / np.sqrt(len(values))),
                                     "seconds": time.perf_counter() - started})
                        bar.update(1)
                    if len(stored):
                        _check_reproduced(stored, rows, keys)
                    else:
                        pd.DataFrame(rows, columns=COLUMNS).to_csv(out, mode="a", header=not out.is_file(), index=False,
                                                                   float_format="%.6g")
                    costs = store_costs(costs, costs_path(out))
                    bar.write(f"{setting or problem.name} seed {seed} n = {n} {mode}: " + ", ".join(
                        f"{r['method']} {r['mean']:.3f}" for r in rows) + f" ({sum(r['seconds'] for r in rows):.0f} s)"
                        + (" (decoded again: means as stored)" if len(stored) else ""))
    bar.close()
    return out


def _check_reproduced(stored: pd.Series, rows: list[dict], keys: dict) -> None:
    """Raise if a group decoded again does not give the means the csv holds."""
    for row in rows:
        before = float(stored[row["method"]])
        if not np.isclose(row["mean"], before, rtol=1e-5, atol=0):  # the csv keeps 6 significant digits
            raise RuntimeError(f"{keys[row['method']]}: decoded again, the mean is {row['mean']:.6g}, the csv holds "
                               f"{before:.6g}; the measurement does not reproduce on this machine (its per-instance "
                               "objectives were not kept)")


def mode_gaps(frame: pd.DataFrame, costs: dict, references: dict) -> pd.DataFrame:
    """Each (problem, setting, seed, n, mode, method)'s gap to the reference solver (%), on the first
    instances the reference solved: 100 (mean objective / mean reference objective - 1), sign-corrected
    for a maximised objective (a positive gap is worse). `references` is {(problem, setting):
    {n: reference objectives}}; rows without per-instance objectives or a reference are left out."""
    rows = []
    for row in frame.itertuples(index=False):
        key = (row.problem, row.setting, int(row.seed), int(row.n), row.mode, row.method)
        reference = references.get((row.problem, row.setting), {}).get(int(row.n))
        if key not in costs or reference is None:
            continue
        k = min(len(reference), len(costs[key]))
        ratio = float(np.mean(costs[key][:k])) / float(np.mean(reference[:k]))
        gap = 100 * (1 - ratio) if PROBLEMS[row.problem].maximise else 100 * (ratio - 1)
        rows.append({"problem": row.problem, "setting": row.setting, "seed": int(row.seed), "n": int(row.n),
                     "mode": row.mode, "method": row.method, "instances": k, "gap_pct": gap})
    return pd.DataFrame(rows, columns=["problem", "setting", "seed", "n", "mode", "method", "instances", "gap_pct"])


def modes_markdown(frame: pd.DataFrame, source: str = "decoding_modes.csv", gaps: pd.DataFrame | None = None) -> str:
    """Per problem and setting: the mean objective of each method and n under each mode (mean over the
    seeds done); with `gaps` (`mode_gaps`), each mode's gap to the problem's reference solver (mean
    over the seeds that have one); and each method's seed-level effect against 1/sqrt(d) under the same mode
    (per-seed effects, mean with its t interval, seeds better and worse, TOST within +-1 %)."""
    lines = ["# Decoding modes: each method against 1/√d under the same mode", "",
             f"From `{source}` (`scripts/decoding_modes.py`). Effect: change of the mean objective against the "
             "1/√d model of the same seed, same mode, same instances (%); mean [95 % t interval over seeds].", ""]
    for (problem, setting), part in frame.groupby(["problem", "setting"], sort=False):
        maximise = PROBLEMS[problem].maximise
        base = part[part.method == BASE].set_index(["seed", "n", "mode"])["mean"]
        rows = []
        for (method, n, mode), group in part[part.method != BASE].groupby(["method", "n", "mode"], sort=False):
            keyed = group.set_index(["seed", "n", "mode"])["mean"]
            effects = (100 * (keyed / base.reindex(keyed.index) - 1)).dropna()
            summary = summarise_effects(effects.to_numpy(), maximise=maximise)
            rows.append({"method": method_label(method), "n": n, "mode": mode,
                         "per seed": ", ".join(f"{v:+.2f}" for v in effects), "effect": describe(summary)})
        lines += [f"## {problem.upper()}{' ' + setting if setting else ''}", ""]
        levels = part.groupby(["method", "n", "mode"], sort=False)["mean"].mean().unstack("mode")
        seeds = part.groupby(["n", "mode"], sort=False).seed.nunique()
        fewer = "; ".join(f"{mode} at n = {n} on {k} of {seeds.max()}" for (n, mode), k in seeds.items() if k < seeds.max())
        lines += ["Mean objective by mode (mean over the seeds done"
                  + (f"; fewer seeds: {fewer}" if fewer else "") + "): does the mode itself help?", "",
                  "| method | n | " + " | ".join(levels.columns) + " |", "|---|---|" + "---|" * len(levels.columns)]
        lines += [f"| {method_label(m)} | {n} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
                  for (m, n), row in levels.iterrows()]
        lines.append("")
        part_gaps = None if gaps is None else gaps[(gaps.problem == problem) & (gaps.setting == setting)]
        if part_gaps is not None and len(part_gaps):
            table = part_gaps.groupby(["method", "n", "mode"], sort=False).agg(
                gap=("gap_pct", "mean"), seeds=("seed", "nunique"), instances=("instances", "min")).reset_index()
            wide = table.pivot_table(index=["method", "n"], columns="mode", values="gap", sort=False)
            counts = table.groupby("n").agg(seeds=("seeds", "max"), instances=("instances", "min"))
            lines += [f"Gap to {PROBLEMS[problem].reference_name} (%) on the first instances it solved, by mode (mean over seeds; "
                      + "; ".join(f"n = {n}: {int(c.instances)} instances, {int(c.seeds)} seed(s)" for n, c in counts.iterrows())
                      + "):", "",
                      "| method | n | " + " | ".join(wide.columns) + " |", "|---|---|" + "---|" * len(wide.columns)]
            lines += [f"| {method_label(m)} | {n} | " + " | ".join(f"{v:.2f}" for v in row) + " |"
                      for (m, n), row in wide.iterrows()]
            lines.append("")
        lines += ["| method | n | mode | per seed (%) | seed level |", "|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['n']} | {r['mode']} | {r['per seed']} | {r['effect']} |" for r in rows]
        lines.append("")
    return "\n".join(lines)
