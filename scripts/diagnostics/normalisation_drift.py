"""Why does EIE hurt a BatchNorm model far more than a LayerNorm one? The hypothesis to test: at test
time BatchNorm divides by the running statistics it gathered at n = N under 1/sqrt(d), so when a
sharper scale at long n changes the size of what enters a normalisation, nothing undoes it, and the
change compounds through the layers; LayerNorm rescales every node by its own statistics.

For each encoder normalisation (norm1, norm2 of each layer) this measures the root mean square of
the normalised input before the affine weights, over every node and feature of the first instances
of the run's test set: (x - running mean) / sqrt(running var + eps) for BatchNorm, per-node
standardisation for LayerNorm (1 by construction). At n = N under 1/sqrt(d) a BatchNorm model gives
about 1; a value far from 1 is a distribution its later layers never saw in training. Each model is
decoded greedily on the same instances too, so the drift sits beside the cost it comes with, and
the mean entropy of each layer's attention rows is recorded (`eie.probes.probe_encoder`): how much
sharper the scale makes each model's attention.

Run from the repository root:
    .venv/bin/python scripts/diagnostics/normalisation_drift.py [--lengths 100 400 1600] [--instances 32]
        [--runs sensitivity_batchnorm cpu_paper] [--seed 0]
Writes results/sensitivity_batchnorm/normalisation_drift.csv (one row per run, n, method and encoder
layer) and prints the table.
"""

import argparse

import pandas as pd
import torch

from eie import experiments, extrapolation, study
from eie.evaluation import fixed_test_set, greedy_costs
from eie.model import NodeBatchNorm
from eie.paths import results_dir
from eie.probes import probe_encoder

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lengths", type=int, nargs="+", default=[100, 400, 1600])
parser.add_argument("--instances", type=int, default=32)
parser.add_argument("--runs", nargs="+", default=["sensitivity_batchnorm", "cpu_paper"])
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie", "log_N"])
args = parser.parse_args()
if args.instances < 1:
    parser.error(f"--instances must be at least 1, got {args.instances}")


def normalised_rms(norm: torch.nn.Module, x: torch.Tensor) -> float:
    """RMS of the normalisation's input after centring and scaling, before its affine weights."""
    if isinstance(norm, NodeBatchNorm):
        z = (x - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
    else:
        z = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, unbiased=False, keepdim=True) + norm.eps)
    return float(z.pow(2).mean().sqrt())


rows = []
for run in args.runs:
    params = experiments.load("03_train_tsp", f"presets/{run}.yaml")
    n_train, n_max = params["n_train"], params["n_max"]
    net, table = study.ensure_scales(16, n_train, n_max, run=run)
    bound = extrapolation.bind_methods(args.methods, 16, n_train, net, table)
    name = study.model_name("tsp", "inv_sqrt_d", n_train, args.seed)
    model = study.load_policies([name], run=run)[name].eval()
    norms = {(i + 1, site): getattr(layer, site) for i, layer in enumerate(model.encoder) for site in ("norm1", "norm2")}
    for n in args.lengths:
        test = fixed_test_set(model.problem, n, params["test_size"], params["test_seed"])
        test = {key: value[:args.instances] for key, value in test.items()}
        for method in bound:
            seen = {}
            hooks = [norm.register_forward_pre_hook(lambda module, inputs, site=site, seen=seen: seen.__setitem__(
                site, normalised_rms(module, inputs[0]))) for site, norm in norms.items()]
            try:  # the hooks read each normalisation's input while the probe runs the encoder
                with torch.no_grad():
                    entropies = probe_encoder(model, method.seen_by_model(test, model.problem), method).entropies
            finally:
                for hook in hooks:
                    hook.remove()
            cost = float(greedy_costs(model, test, method).mean())
            for layer, entropy in enumerate(entropies, start=1):
                rows.append({"run": run, "normalization": model.config.normalization, "seed": args.seed, "n": n,
                             "method": method.key, "layer": layer, "norm1_rms": seen[(layer, "norm1")],
                             "norm2_rms": seen[(layer, "norm2")], "attention_entropy": float(entropy.mean()),
                             "greedy_length": cost})
        print(f"{run} n = {n} done", flush=True)

frame = pd.DataFrame(rows)
out = results_dir("sensitivity_batchnorm") / "normalisation_drift.csv"
frame.to_csv(out, index=False, float_format="%.5g")
wide = frame.pivot_table(index=["run", "n", "method"], columns="layer", sort=False,
                         values=["norm1_rms", "norm2_rms", "attention_entropy"])
wide[("greedy length", "")] = frame.groupby(["run", "n", "method"], sort=False).greedy_length.first()
print(wide.round(3).to_string())
print(f"wrote {out}")
