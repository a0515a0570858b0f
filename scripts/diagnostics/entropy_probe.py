"""Measured attention entropy of a run's trained layers, under 1/sqrt(d), EIE and log_N(n)/sqrt(d).
Notebook 07's probe (`eie.probes.measured_entropy`) on the finished 1/sqrt(d) models of a training
notebook under a preset: the mean attention-row entropy of each encoder layer at n = N ... n_max,
beside what Eq. 6 predicts for the same lambda(n), on a few instances per n; with each seed's greedy
objective at n_max from the run's results table, where the evaluation has written it. It asks why a
method helps or hurts at length: a method that holds the measured entropy of the layers where
the model's accuracy depends on it should help, and one that drives it below the trained value
over-sharpens.
Run from the repository root:
  .venv/bin/python scripts/diagnostics/entropy_probe.py [--preset presets/cpu_paper.yaml] [--notebook 04_train_cvrp] [--instances 4]
Writes results/<run>/<problem>_entropy.csv (one row per setting, seed, method, n and layer).
"""

import argparse

import pandas as pd
import torch

from eie import experiments, extrapolation, probes, study
from eie.paths import results_dir

parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
parser.add_argument("--preset", default="presets/cpu_paper.yaml", help="the run's preset (default presets/cpu_paper.yaml)")
parser.add_argument("--notebook", default="04_train_cvrp", help="its training notebook (default 04_train_cvrp)")
parser.add_argument("--instances", type=int, default=4, help="test instances per n (default 4)")
args = parser.parse_args()
if args.instances < 1:
    parser.error(f"--instances must be >= 1, got {args.instances}")

torch.set_grad_enabled(False)
params = experiments.load(args.notebook, args.preset)
run, n_train, n_max = params["run"], params["n_train"], params["n_max"]
problem = study.problem_for(args.notebook).name
models = study.finished_models(args.notebook, params)
models = {setting: {seed: model for (rule, seed), model in found.items() if rule == "inv_sqrt_d"}
          for setting, found in models.items()}
if not any(models.values()):
    raise SystemExit(f"no finished 1/sqrt(d) model of {args.notebook} under {args.preset} in "
                     f"{results_dir(run, create=False)}: train them first (python -m eie.worker {args.preset} {args.notebook})")
d = study.head_size(args.notebook, params)
keys = ["inv_sqrt_d", "eie", "log_N"]
net, table = study.ensure_scales(d, n_train, n_max, run=run)
methods = extrapolation.bind_methods(keys, d, n_train, net, table)

frames = []
for setting, by_seed in models.items():
    for seed, model in sorted(by_seed.items()):
        print(f"probing {problem} {setting} seed {seed} ...", flush=True)
        part = probes.measured_entropy({"inv_sqrt_d": model}, methods, n_train, n_max, args.instances)
        frames.append(part.assign(setting=setting, seed=seed))
entropy = pd.concat(frames, ignore_index=True)
out = results_dir(run, create=False)
path = out / f"{problem}_entropy.csv"
entropy.to_csv(path, index=False, float_format="%.6g")
print(f"wrote {path}")

table_path = out / f"{problem}.csv"
if table_path.is_file():
    objectives = pd.read_csv(table_path)
    objectives = objectives[(objectives.n == n_max) & objectives.method.isin(keys)]
    print(f"\nGreedy objective at n = {n_max} ({table_path.name}):")
    print(objectives.pivot_table(index=["setting", "seed"] if "setting" in objectives else "seed", columns="method",
                                 values="objective").reindex(columns=keys).round(3).to_string())
print(f"\nMeasured mean row entropy (nats) of each encoder layer, {args.instances} instances per n:")
pivot = entropy.pivot_table(index=["setting", "seed", "layer", "method"], columns="n", values="measured", sort=False)
print(pivot.round(2).to_string())
print("\nEq. 6 for the same lambda(n):")
print(entropy.drop_duplicates(["method", "n"]).pivot(index="method", columns="n", values="eq6").loc[keys].round(2).to_string())
