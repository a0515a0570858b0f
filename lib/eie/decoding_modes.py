"""Does a method's effect depend on how the model decodes? Each method under each decoding mode of
`eie.decoding` (greedy; best of K seeded samples; greedy over the 8 symmetries of the square),
against the 1/sqrt(d) model under the same mode, seed by seed.

`measure` decodes a run's exported 1/sqrt(d) models and appends one row per (setting, seed, n, mode,
method) to a csv as each (setting, seed, n, mode) ends, so an interrupted measurement resumes where
it stopped; `read_modes` reads that csv; `modes_markdown` gives the mean objective per mode and the
seed-level effect of each method against 1/sqrt(d) per mode and n. The figure is
`eie.plotting.decoding_modes_figure`.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

from . import extrapolation, study
from .decoding import constant_factor, constant_key, method_label, mode_costs
from .evaluation import fixed_test_set
from .problems import PROBLEMS, make_problem
from .seed_level import describe, summarise_effects

COLUMNS = ["problem", "setting", "seed", "n", "mode", "method", "instances", "mean", "sem", "seconds"]
BASE = "inv_sqrt_d"


def read_modes(path) -> pd.DataFrame:
    """A decoding-modes csv (columns `COLUMNS`; a problem without settings, TSP, has the setting "")."""
    frame = pd.read_csv(path, dtype={"problem": str, "setting": str}, keep_default_na=False)
    missing = [c for c in COLUMNS if c not in frame]
    if missing:
        raise ValueError(f"{path}: not a decoding-modes table (columns {missing} missing; expected {COLUMNS})")
    return frame


def measure(params: dict, notebook: str, seeds, lengths, modes, method_keys, factors=(), instances: int = 256,
            out: Path | None = None) -> Path:
    """Decode the first `instances` of the run's test set at each n in `lengths` with each method of
    `method_keys` (which must include 1/sqrt(d)) and each constant factor of `factors`, under each
    mode of `modes`, on the exported 1/sqrt(d) model of each seed of `notebook`'s settings (a seed
    whose model is not exported yet is skipped). Sampling is seeded by (seed, n), so reruns
    reproduce. Rows go to `out` (default results/<run>/decoding_modes.csv); (setting, seed, n, mode)
    already there are skipped (keyed with the problem). Returns the csv's path."""
    if BASE not in method_keys:
        raise ValueError(f"method_keys must include {BASE!r} (every effect is against it); got {list(method_keys)}")
    out = out or study.results_dir(params["run"], create=False) / "decoding_modes.csv"
    done = read_modes(out) if out.is_file() else pd.DataFrame(columns=COLUMNS)
    finished = set(zip(done.problem, done.setting, done.seed, done.n, done["mode"], strict=True))
    n_train, run_name = params["n_train"], params["run"]
    net, table = study.ensure_scales(16, n_train, params["n_max"], run=run_name)
    bound = extrapolation.bind_methods(method_keys, 16, n_train, net, table)
    plain = next(m for m in bound if m.key == BASE)
    methods = [(m.key, m) for m in bound] + [(constant_key(f), constant_factor(plain, f)) for f in factors]
    for setup in study.training_setups(notebook, params):
        problem = make_problem(setup["config"]["problem"], **setup["config"].get("problem_options", {}))
        sign = -1.0 if problem.maximise else 1.0
        for seed in seeds:
            name = study.model_name(problem.name, BASE, n_train, seed, setup["tag"])
            if not (study.models_folder(run_name) / f"{name}.pt").is_file():
                print(f"{name}: no exported policy yet; skipped", flush=True)
                continue
            model = study.load_policies([name], run=run_name)[name]
            for n in lengths:
                test = fixed_test_set(problem, n, params["test_size"], params["test_seed"])
                test = {key: value[:instances] for key, value in test.items()}
                for mode in modes:
                    if (problem.name, setup["setting"], seed, n, mode) in finished:
                        continue
                    rows = []
                    for key, method in methods:
                        started = time.perf_counter()
                        costs = sign * mode_costs(model, test, method, mode, seed=1000 * seed + n).cpu().numpy()
                        rows.append({"problem": problem.name, "setting": setup["setting"], "seed": seed, "n": n, "mode": mode, "method": key,
                                     "instances": len(costs), "mean": float(costs.mean()),
                                     "sem": float(costs.std(ddof=1) / np.sqrt(len(costs))),
                                     "seconds": time.perf_counter() - started})
                    frame = pd.DataFrame(rows, columns=COLUMNS)
                    frame.to_csv(out, mode="a", header=not out.is_file(), index=False, float_format="%.6g")
                    print(f"{setup['setting'] or problem.name} seed {seed} n = {n} {mode}: " + ", ".join(
                        f"{r['method']} {r['mean']:.3f}" for r in rows) + f" ({sum(r['seconds'] for r in rows):.0f} s)",
                          flush=True)
    return out


def modes_markdown(frame: pd.DataFrame, source: str = "decoding_modes.csv") -> str:
    """Per problem and setting: the mean objective of each method and n under each mode (mean over the seeds
    done), and each method's seed-level effect against 1/sqrt(d) under the same mode (per-seed
    effects, mean with its t interval, seeds better and worse, TOST within +-1 %)."""
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
        lines += ["Mean objective by mode (mean over the seeds done): does the mode itself help?", "",
                  "| method | n | " + " | ".join(levels.columns) + " |", "|---|---|" + "---|" * len(levels.columns)]
        lines += [f"| {method_label(m)} | {n} | " + " | ".join(f"{v:.3f}" for v in row) + " |"
                  for (m, n), row in levels.iterrows()]
        lines.append("")
        lines += ["| method | n | mode | per seed (%) | seed level |", "|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['n']} | {r['mode']} | {r['per seed']} | {r['effect']} |" for r in rows]
        lines.append("")
    return "\n".join(lines)
