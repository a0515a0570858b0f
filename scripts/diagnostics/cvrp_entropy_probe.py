"""Why does EIE hurt the cpu_paper CVRP100 models at 16N, and one seed far more than the other?
Notebook 07's probe (`eie.probes.measured_entropy`) on the exported CVRP100 policies (C_v = 10,
1/sqrt(d)) of results/cpu_paper/models/: the mean attention-row entropy of each encoder layer under
1/sqrt(d), EIE and log_N(n)/sqrt(d) at n = 100 ... 1600, beside what Eq. 6 predicts, on a few
instances of the fixed test sets; with each seed's greedy cost at n = 1600 from cvrp.csv.
Run from the repository root: .venv/bin/python scripts/diagnostics/cvrp_entropy_probe.py [--instances 4]
Writes results/cpu_paper/cvrp_entropy.csv (one row per seed, method, n and layer).
"""

import argparse

import pandas as pd
import torch

from eie import experiments, extrapolation, probes, study
from eie.paths import results_dir

parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
parser.add_argument("--instances", type=int, default=4, help="test instances per n (default 4)")
args = parser.parse_args()

torch.set_grad_enabled(False)
preset = experiments.load("04_train_cvrp", "presets/cpu_paper.yaml")
run, n_train, n_max = preset["run"], preset["n_train"], preset["n_max"]
out = results_dir(run, create=False)
folder = out / "models"
names = {seed: study.model_name("cvrp", "inv_sqrt_d", n_train, seed, tag="_C10") for seed in preset["seeds"]}
names = {seed: name for seed, name in names.items() if (folder / f"{name}.pt").is_file()}
if not names:
    raise SystemExit(f"no exported CVRP policy in {folder}: run notebook 04 with presets/cpu_paper.yaml first")
policies = study.load_policies(names.values(), run=run)
d = next(iter(policies.values())).config.head_dim
keys = ["inv_sqrt_d", "eie", "log_N"]
net, table = study.ensure_scales(d, n_train, n_max, run=run)
methods = extrapolation.bind_methods(keys, d, n_train, net, table)

frames = []
for seed, name in names.items():
    print(f"probing {name} ...", flush=True)
    part = probes.measured_entropy({"inv_sqrt_d": policies[name]}, methods, n_train, n_max, args.instances)
    frames.append(part.assign(seed=seed))
entropy = pd.concat(frames, ignore_index=True)
entropy.to_csv(out / "cvrp_entropy.csv", index=False, float_format="%.6g")

costs = pd.read_csv(out / "cvrp.csv")
costs = costs[(costs.n == n_max) & costs.method.isin(keys)].pivot(index="seed", columns="method", values="objective")
print(f"\nGreedy cost at n = {n_max} (cvrp.csv, 1024 instances):")
print(costs.reindex(columns=keys).round(2).to_string())
print(f"\nMeasured mean row entropy (nats) of each encoder layer, {args.instances} instances per n:")
pivot = entropy.pivot_table(index=["seed", "layer", "method"], columns="n", values="measured", sort=False)
print(pivot.round(2).to_string())
print("\nEq. 6 for the same lambda(n):")
print(entropy.drop_duplicates(["method", "n"]).pivot(index="method", columns="n", values="eq6").loc[keys].round(2).to_string())
