"""Why does best-of-K sampling change EIE's sign on some TSP100 seeds? The hypothesis to test: a
sharper scale hurts the single most likely tour but spreads the samples better. For each exported
1/sqrt(d) TSP policy of results/cpu_paper/models/ and each scale (1/sqrt(d), EIE, log_N, a constant
f/sqrt(d)), K tours are sampled on the first instances of the run's test set at each n
(`eie.decoding.sampled_costs`, seeded by (seed, n)) and their spread is measured: the mean sampled
length, the mean over instances of the standard deviation of the K lengths, the best of K, the
greedy length, and the entropy per step of the policy's tours (the mean of -log p(tour) / n).
Each is set against 1/sqrt(d)'s on the same seed, and beside it the seed's best-of-16 effect on 256
instances from decoding_modes.csv.

Run from the repository root:
    .venv/bin/python scripts/diagnostics/sampling_spread.py [--lengths 200 400] [--instances 64] [--k 16]
        [--seeds 0 1 2 3 4] [--factor 1.25]
Writes results/cpu_paper/sampling_spread.csv (one row per seed, n and method) and prints the table
of effects against 1/sqrt(d) per seed.
"""

import argparse

import numpy as np
import pandas as pd

from eie import experiments, extrapolation, study
from eie.decoding import constant_factor, constant_key, sampled_costs
from eie.evaluation import fixed_test_set, greedy_costs
from eie.paths import results_dir

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lengths", type=int, nargs="+", default=[200, 400])
parser.add_argument("--instances", type=int, default=64)
parser.add_argument("--k", type=int, default=16)
parser.add_argument("--seeds", type=int, nargs="+", default=None)
parser.add_argument("--factor", type=float, default=1.25, help="the constant f of f/sqrt(d) (the TSP sweep's best)")
args = parser.parse_args()

preset = experiments.load("03_train_tsp", "presets/cpu_paper.yaml")
run, n_train = preset["run"], preset["n_train"]
out = results_dir(run, create=False)
seeds = args.seeds if args.seeds is not None else preset["seeds"]
names = {seed: study.model_name("tsp", "inv_sqrt_d", n_train, seed) for seed in seeds}
names = {seed: name for seed, name in names.items() if (out / "models" / f"{name}.pt").is_file()}
if not names:
    raise SystemExit(f"no exported TSP policy in {out / 'models'}: run notebook 03 with presets/cpu_paper.yaml first")
policies = study.load_policies(names.values(), run=run)
d = next(iter(policies.values())).config.head_dim
net, table = study.ensure_scales(d, n_train, preset["n_max"], run=run)
bound = extrapolation.bind_methods(["inv_sqrt_d", "eie", "log_N"], d, n_train, net, table)
methods = [(m.key, m) for m in bound] + [(constant_key(args.factor), constant_factor(bound[0], args.factor))]

rows = []
for seed, name in names.items():
    model = policies[name]
    for n in args.lengths:
        test = fixed_test_set(model.problem, n, preset["test_size"], preset["test_seed"])
        test = {key: value[:args.instances] for key, value in test.items()}
        for key, method in methods:
            costs, log_likelihood = sampled_costs(model, test, method, args.k, seed=1000 * seed + n)
            greedy = greedy_costs(model, test, method)
            rows.append({"seed": seed, "n": n, "method": key, "instances": args.instances, "k": args.k,
                         "greedy": float(greedy.mean()), "sample_mean": float(costs.mean()),
                         "sample_std": float(costs.std(0).mean()), "best_of_k": float(costs.min(0).values.mean()),
                         "entropy_per_step": float(-log_likelihood.mean() / n)})
        print(f"seed {seed} n = {n}: " + ", ".join(f"{r['method']} {r['best_of_k']:.3f}" for r in rows[-len(methods):]),
              flush=True)
frame = pd.DataFrame(rows)
frame.to_csv(out / "sampling_spread.csv", index=False, float_format="%.6g")

base = frame[frame.method == "inv_sqrt_d"].set_index(["seed", "n"])
effects = []
for key, _ in methods[1:]:
    part = frame[frame.method == key].set_index(["seed", "n"])
    effects.append(pd.DataFrame({
        "method": key,
        "greedy %": 100 * (part.greedy / base.greedy - 1),
        "sample mean %": 100 * (part.sample_mean / base.sample_mean - 1),
        "sample std %": 100 * (part.sample_std / base.sample_std - 1),
        f"best of {args.k} %": 100 * (part.best_of_k / base.best_of_k - 1),
        "entropy/step (nats)": part.entropy_per_step - base.entropy_per_step}))
effects = pd.concat(effects).reset_index()
modes = pd.read_csv(out / "decoding_modes.csv")
modes = modes[(modes.problem == "tsp") & (modes["mode"] == "sample16")].pivot_table(
    index=["seed", "n"], columns="method", values="mean")
effects["best of 16, 256 inst. %"] = [
    100 * (modes.loc[(s, n), m] / modes.loc[(s, n), "inv_sqrt_d"] - 1) if (s, n) in modes.index and m in modes else np.nan
    for s, n, m in zip(effects.seed, effects.n, effects.method, strict=True)]
print(f"\nAgainst 1/sqrt(d) on the same seed, {args.instances} instances, K = {args.k}:")
print(effects.sort_values(["n", "method", "seed"]).round(3).to_string(index=False))
print("\nBase 1/sqrt(d): entropy per step (nats) and sample std by (seed, n):")
print(base[["entropy_per_step", "sample_std", "sample_mean", "greedy"]].round(3).to_string())
