"""Does EIE's sign depend on how the model decodes? Every method under every decoding mode, against
1/sqrt(d) under the same mode, on a run's exported models.

    python scripts/decoding_modes.py presets/cpu_paper.yaml 03_train_tsp [--seeds 0 1 2] [--lengths 200 400 800]
        [--modes greedy sample16 augment8] [--methods inv_sqrt_d eie log_N] [--factors 1.75] [--instances 256]

Modes (`eie.decoding`): greedy; best of K sampled solutions (seeded, so reruns reproduce); greedy
over the 8 symmetries of the square. `--factors` adds a constant lambda = f/sqrt(d) (the lambda
sweep's best factor, say). The test instances are the first `--instances` of the run's own test set
at each n. Each finished (setting, seed, n, mode) is appended to results/<run>/decoding_modes.csv as
it ends, so an interrupted run resumes where it stopped; then the seed-level table of each method
against 1/sqrt(d) per mode and n is written to results/<run>/decoding_modes.md, and its figure to
figures/decoding_modes_<run>.png (`eie.plotting.decoding_modes_figure`).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, extrapolation, plotting, study  # noqa: E402
from eie.decoding import constant_factor, mode_costs, parse_mode  # noqa: E402
from eie.evaluation import fixed_test_set  # noqa: E402
from eie.methods import label  # noqa: E402
from eie.problems import make_problem  # noqa: E402
from eie.seed_level import describe, summarise_effects  # noqa: E402

COLUMNS = ["setting", "seed", "n", "mode", "method", "instances", "mean", "sem", "seconds"]


def run(params, notebook, seeds, lengths, modes, method_keys, factors, instances) -> Path:
    out = study.results_dir(params["run"], create=False) / "decoding_modes.csv"
    done = pd.read_csv(out, dtype={"setting": str}, keep_default_na=False) if out.is_file() else pd.DataFrame(columns=COLUMNS)
    finished = set(zip(done.setting, done.seed, done.n, done["mode"], strict=True))
    n_train, run_name = params["n_train"], params["run"]
    net, table = study.ensure_scales(16, n_train, params["n_max"], run=run_name)
    bound = extrapolation.bind_methods(method_keys, 16, n_train, net, table)
    plain = next(m for m in bound if m.key == "inv_sqrt_d")
    methods = [(m.key, m) for m in bound] + [(f"const_{f:g}", constant_factor(plain, f)) for f in factors]
    for setup in study.training_setups(notebook, params):
        problem = make_problem(setup["config"]["problem"], **setup["config"].get("problem_options", {}))
        sign = -1.0 if problem.maximise else 1.0
        for seed in seeds:
            name = study.model_name(problem.name, "inv_sqrt_d", n_train, seed, setup["tag"])
            if not (study.models_folder(run_name) / f"{name}.pt").is_file():
                print(f"{name}: no exported policy yet; skipped", flush=True)
                continue
            model = study.load_policies([name], run=run_name)[name]
            for n in lengths:
                test = fixed_test_set(problem, n, params["test_size"], params["test_seed"])
                test = {key: value[:instances] for key, value in test.items()}
                for mode in modes:
                    if (setup["setting"], seed, n, mode) in finished:
                        continue
                    rows = []
                    for key, method in methods:
                        started = time.perf_counter()
                        costs = sign * mode_costs(model, test, method, mode, seed=1000 * seed + n).cpu().numpy()
                        rows.append({"setting": setup["setting"], "seed": seed, "n": n, "mode": mode, "method": key,
                                     "instances": len(costs), "mean": float(costs.mean()),
                                     "sem": float(costs.std(ddof=1) / np.sqrt(len(costs))),
                                     "seconds": time.perf_counter() - started})
                    frame = pd.DataFrame(rows, columns=COLUMNS)
                    frame.to_csv(out, mode="a", header=not out.is_file(), index=False, float_format="%.6g")
                    print(f"{setup['setting'] or problem.name} seed {seed} n = {n} {mode}: " + ", ".join(
                        f"{r['method']} {r['mean']:.3f}" for r in rows) + f" ({sum(r['seconds'] for r in rows):.0f} s)",
                          flush=True)
    return out


def report(csv: Path, maximise: bool) -> str:
    frame = pd.read_csv(csv, dtype={"setting": str}, keep_default_na=False)
    lines = ["# Decoding modes: each method against 1/√d under the same mode", "",
             f"From `{csv.name}` (`scripts/decoding_modes.py`). Effect: change of the mean objective against the "
             "1/√d model of the same seed, same mode, same instances (%); mean [95 % t interval over seeds].", ""]
    for setting, part in frame.groupby("setting", sort=False):
        base = part[part.method == "inv_sqrt_d"].set_index(["seed", "n", "mode"])["mean"]
        rows = []
        for (method, n, mode), group in part[part.method != "inv_sqrt_d"].groupby(["method", "n", "mode"], sort=False):
            effects = 100 * (group.set_index(["seed", "n", "mode"])["mean"] / base.reindex(
                group.set_index(["seed", "n", "mode"]).index) - 1)
            summary = summarise_effects(effects.dropna().to_numpy(), maximise=maximise)
            rows.append({"method": label(method) if not method.startswith("const_") else f"λ = {method[6:]}/√d",
                         "n": n, "mode": mode, "per seed": ", ".join(f"{v:+.2f}" for v in effects.dropna()),
                         "effect": describe(summary)})
        if setting:
            lines += [f"## {setting}", ""]
        levels = part.groupby(["method", "n", "mode"], sort=False)["mean"].mean().unstack("mode")
        lines += ["Mean objective by mode (mean over the seeds done): does the mode itself help?", "",
                  "| method | n | " + " | ".join(levels.columns) + " |", "|---|---|" + "---|" * len(levels.columns)]
        lines += [f"| {label(m) if not m.startswith('const_') else 'λ = ' + m[6:] + '/√d'} | {n} | "
                  + " | ".join(f"{v:.3f}" for v in row) + " |" for (m, n), row in levels.iterrows()]
        lines.append("")
        lines += ["| method | n | mode | per seed (%) | seed level |", "|---|---|---|---|---|"]
        lines += [f"| {r['method']} | {r['n']} | {r['mode']} | {r['per seed']} | {r['effect']} |" for r in rows]
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("notebook")
    parser.add_argument("--seeds", type=int, nargs="+", default=None)
    parser.add_argument("--lengths", type=int, nargs="+", default=None, help="default: 2N, 4N, 8N")
    parser.add_argument("--modes", nargs="+", default=["greedy", "sample16", "augment8"])
    parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie", "log_N"])
    parser.add_argument("--factors", type=float, nargs="*", default=[])
    parser.add_argument("--instances", type=int, default=256)
    args = parser.parse_args()
    for mode in args.modes:
        parse_mode(mode)
    params = experiments.load(args.notebook, args.preset)
    if "inv_sqrt_d" not in args.methods:
        parser.error("--methods must include inv_sqrt_d (every effect is against it)")
    seeds = args.seeds if args.seeds is not None else params["seeds"]
    lengths = args.lengths or [2 * params["n_train"], 4 * params["n_train"], 8 * params["n_train"]]
    csv = run(params, args.notebook, seeds, lengths, args.modes, args.methods, args.factors, args.instances)
    problem = study.training_setups(args.notebook, params)[0]["config"]["problem"]
    text = report(csv, make_problem(problem).maximise)
    csv.with_suffix(".md").write_text(text + "\n")
    plotting.apply_style()
    frame = pd.read_csv(csv, dtype={"setting": str}, keep_default_na=False)
    figure = plotting.decoding_modes_figure(frame, maximise=make_problem(problem).maximise)
    print(f"figure: {plotting.save_figure(figure, 'decoding_modes', params['run'])}")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
