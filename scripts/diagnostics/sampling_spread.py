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
Writes results/cpu_paper/sampling_spread.csv (one row per seed, n and method), prints the table of
effects against 1/sqrt(d) per seed and draws figures/sampling_spread_cpu_paper.png (each seed's
mean-sample effect against its best-of-16 effect, and the spread against the entropy per step);
--from-csv draws the table and figure again from the csv without decoding.
"""

import argparse

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from eie import experiments, extrapolation, methods, study
from eie.decoding import constant_factor, constant_key, method_label, sampled_costs
from eie.evaluation import fixed_test_set, greedy_costs
from eie.paths import results_dir
from eie.plotting import apply_style, save_figure

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lengths", type=int, nargs="+", default=[200, 400])
parser.add_argument("--instances", type=int, default=64)
parser.add_argument("--k", type=int, default=16)
parser.add_argument("--seeds", type=int, nargs="+", default=None)
parser.add_argument("--factor", type=float, default=1.25, help="the constant f of f/sqrt(d) (the TSP sweep's best)")
parser.add_argument("--from-csv", action="store_true", help="read sampling_spread.csv instead of decoding")
args = parser.parse_args()
if args.k < 2 or args.instances < 1:
    parser.error(f"--k must be at least 2 (a spread needs two samples) and --instances at least 1; got {args.k}, {args.instances}")

preset = experiments.load("03_train_tsp", "presets/cpu_paper.yaml")
run, n_train = preset["run"], preset["n_train"]
out = results_dir(run, create=False)


def measure() -> pd.DataFrame:
    seeds = args.seeds if args.seeds is not None else preset["seeds"]
    names = {seed: study.model_name("tsp", "inv_sqrt_d", n_train, seed) for seed in seeds}
    names = {seed: name for seed, name in names.items() if (out / "models" / f"{name}.pt").is_file()}
    if not names:
        raise SystemExit(f"no exported TSP policy in {out / 'models'}: run notebook 03 with presets/cpu_paper.yaml first")
    policies = study.load_policies(names.values(), run=run)
    d = next(iter(policies.values())).config.head_dim
    net, table = study.ensure_scales(d, n_train, preset["n_max"], run=run)
    bound = extrapolation.bind_methods(["inv_sqrt_d", "eie", "log_N"], d, n_train, net, table)
    scales = [(m.key, m) for m in bound] + [(constant_key(args.factor), constant_factor(bound[0], args.factor))]

    rows = []
    for seed, name in names.items():
        model = policies[name]
        for n in args.lengths:
            test = fixed_test_set(model.problem, n, preset["test_size"], preset["test_seed"])
            test = {key: value[:args.instances] for key, value in test.items()}
            for key, method in scales:
                costs, log_likelihood = sampled_costs(model, test, method, args.k, seed=1000 * seed + n)
                greedy = greedy_costs(model, test, method)
                rows.append({"seed": seed, "n": n, "method": key, "instances": len(test["coords"]), "k": args.k,
                             "greedy": float(greedy.mean()), "sample_mean": float(costs.mean()),
                             "sample_std": float(costs.std(0).mean()), "best_of_k": float(costs.min(0).values.mean()),
                             "entropy_per_step": float(-log_likelihood.mean() / n)})
            print(f"seed {seed} n = {n}: " + ", ".join(f"{r['method']} {r['best_of_k']:.3f}" for r in rows[-len(scales):]),
                  flush=True)
    frame = pd.DataFrame(rows)
    csv = out / "sampling_spread.csv"
    if csv.is_file():  # the rows of other seeds and lengths stay; those measured again are replaced
        frame = pd.concat([pd.read_csv(csv), frame]).drop_duplicates(["seed", "n", "method"], keep="last")
    frame.sort_values(["seed", "n"], kind="stable").to_csv(csv, index=False, float_format="%.6g")
    return frame


frame = pd.read_csv(out / "sampling_spread.csv") if args.from_csv else measure()
k = int(frame.k.iloc[0])
base = frame[frame.method == "inv_sqrt_d"].set_index(["seed", "n"])
effects = []
for key in [m for m in dict.fromkeys(frame.method) if m != "inv_sqrt_d"]:
    part = frame[frame.method == key].set_index(["seed", "n"])
    effects.append(pd.DataFrame({
        "method": key,
        "greedy %": 100 * (part.greedy / base.greedy - 1),
        "sample mean %": 100 * (part.sample_mean / base.sample_mean - 1),
        "sample std %": 100 * (part.sample_std / base.sample_std - 1),
        f"best of {k} %": 100 * (part.best_of_k / base.best_of_k - 1),
        "entropy/step (nats)": part.entropy_per_step - base.entropy_per_step}))
effects = pd.concat(effects).reset_index()
modes = pd.read_csv(out / "decoding_modes.csv")
modes = modes[(modes.problem == "tsp") & (modes["mode"] == "sample16")].pivot_table(
    index=["seed", "n"], columns="method", values="mean")
effects["best of 16, 256 inst. %"] = [
    100 * (modes.loc[(s, n), m] / modes.loc[(s, n), "inv_sqrt_d"] - 1) if (s, n) in modes.index and m in modes else np.nan
    for s, n, m in zip(effects.seed, effects.n, effects.method, strict=True)]
print(f"\nAgainst 1/sqrt(d) on the same seed, {frame.instances.iloc[0]} instances, K = {k}:")
print(effects.sort_values(["n", "method", "seed"]).round(3).to_string(index=False))
print("\nBase 1/sqrt(d): entropy per step (nats) and sample std by (seed, n):")
print(base[["entropy_per_step", "sample_std", "sample_mean", "greedy"]].round(3).to_string())

apply_style()
fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4), gridspec_kw={"wspace": 0.3})
for key, part in effects.groupby("method", sort=False):
    style = {"color": "0.35"} if key.startswith("const_") else methods.style(key)
    colour = style.get("color")
    left.scatter(part["sample mean %"], part["best of 16, 256 inst. %"], color=colour, label=method_label(key))
    right.scatter(part["entropy/step (nats)"], part["sample std %"], color=colour, label=method_label(key))
    for _, row in part.iterrows():
        left.annotate(f"{row.seed}", (row["sample mean %"], row["best of 16, 256 inst. %"]), fontsize=8,
                      xytext=(3, 3), textcoords="offset points")
for ax in (left, right):
    ax.axhline(0, color="black", lw=0.8)
    ax.axvline(0, color="black", lw=0.8)
n_shown = ", ".join(str(n) for n in sorted(effects.n.unique()))
left.set(xlabel=f"mean of the {k} sampled lengths vs 1/sqrt(d) (%)", ylabel="best of 16 vs 1/sqrt(d), 256 instances (%)",
         title=f"TSP100, n = {n_shown}: one point per seed (label) and scale")
right.set(xlabel="entropy per step vs 1/sqrt(d) (nats)", ylabel=f"std of the {k} sampled lengths vs 1/sqrt(d) (%)",
          title="spread of the sampled lengths against the entropy per step")
left.legend(fontsize=8)
print(f"figure: {save_figure(fig, 'sampling_spread', run)}")
