"""Which attention scale does the cpu_paper TSP100 model (seed 0) want at a longer n? A constant
lambda = f / sqrt(d) at every n, applied where EIE applies its lambda(n) (the encoder's
self-attention and the decoder's glimpse), swept over f on the first `--instances` instances of the
Table 2 test set, at n = 400 and 800; beside the factors that EIE (lambda(n) sqrt(d)) and
log_N(n)/sqrt(d) (ln n / ln N) use at the same n. A diagnostic for why EIE loses to 1/sqrt(d) at
N = 100 (README.md): if the best f lies well below EIE's, EIE sharpens the attention further than
the trained model can use.
Run from the repository root: .venv/bin/python results/cpu_paper/lambda_sweep.py [--instances 256]
Writes results/cpu_paper/lambda_sweep.csv and figures/cpu_paper_lambda_sweep.png (`--plot-only`:
redraw the figure from the csv).
"""

import argparse
import dataclasses
import math

import matplotlib.pyplot as plt
import pandas as pd
import torch
from tqdm import tqdm

from eie import plotting, study, worker
from eie.evaluation import fixed_test_set, greedy_costs
from eie.methods import label
from eie.scaling import ScalingRule

PRESET = worker.preset_parameters("presets/cpu_paper.yaml", "03_train_tsp")
N, N_MAX = PRESET["n_train"], PRESET["n_max"]  # the EIE net and the lambda* table are fitted to [N, N_MAX]
MODEL = f"tsp_inv_sqrt_d_n{N}_seed0"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--instances", type=int, default=256)
parser.add_argument("--lengths", type=int, nargs="+", default=[400, 800])
parser.add_argument("--plot-only", action="store_true", help="redraw the figure from the existing csv")
parser.add_argument("--factors", type=float, nargs="+", default=[0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0])
args = parser.parse_args()
if args.instances < 2 or any(not N < n <= N_MAX for n in args.lengths) or any(f <= 0 for f in args.factors):
    parser.error(f"need --instances >= 2, every length in ({N}, {N_MAX}] and every factor > 0")

CSV = "results/cpu_paper/lambda_sweep.csv"


def sweep() -> pd.DataFrame:
    """The tour lengths of every factor and of EIE and log_N at every length, as a table."""
    torch.set_grad_enabled(False)
    model = study.load_policies([MODEL], run=PRESET["run"])[MODEL]
    d = model.config.head_dim
    net, table = study.ensure_scales(d, N, N_MAX, run=PRESET["run"])  # the run's own, as in Table 2
    plain, eie, log_n = study.bind_methods(["inv_sqrt_d", "eie", "log_N"], d, N, net, table)

    def constant_factor(f: float):
        """1/sqrt(d) times f at every n, bound like the plain model's method."""
        rule = ScalingRule(f"x{f:g}", d, lambda n, f=f: plain.rule(n) * f)
        return dataclasses.replace(plain, rule=rule)

    rows = []
    with tqdm(total=len(args.lengths) * (len(args.factors) + 2), desc="lambda sweep") as bar:
        for n in args.lengths:
            instances = fixed_test_set(model.problem, n, args.instances, seed=1234)  # the notebooks' test_seed
            runs = [(f"f = {f:g}", f, constant_factor(f)) for f in args.factors]
            runs += [(method.key, float(method.rule(n)) * math.sqrt(d), method) for method in (eie, log_n)]
            for name, factor, method in runs:
                costs = greedy_costs(model, instances, method, chunk=64)
                rows.append({"n": n, "method": name, "factor": factor, "instances": args.instances,
                             "tour_length": float(costs.mean()),
                             "sem": float(costs.std() / math.sqrt(args.instances))})
                bar.update()
    frame = pd.DataFrame(rows)
    plain_length = frame[frame.method == "f = 1"].set_index("n").tour_length
    frame["vs_inv_sqrt_d_pct"] = 100 * (frame.tour_length / frame.n.map(plain_length) - 1)
    frame.to_csv(CSV, index=False, float_format="%.4f")
    return frame


if args.plot_only:
    try:
        frame = pd.read_csv(CSV)
    except FileNotFoundError:
        parser.error(f"--plot-only needs {CSV}: run the sweep without it first")
else:
    frame = sweep()
print(frame.round(3).to_string(index=False))

plotting.apply_style()
lengths = sorted(frame.n.unique())
fig, axes = plt.subplots(1, len(lengths), figsize=(4.5 * len(lengths), 3.6), squeeze=False)
for ax, (n, part) in zip(axes[0], frame.groupby("n")):
    constant = part[part.method.str.startswith("f = ")]
    ax.plot(constant.factor, constant.vs_inv_sqrt_d_pct, "o-", color="0.3", label="constant f / sqrt(d)")
    for key in ("eie", "log_N"):
        row = part[part.method == key].iloc[0]
        ax.plot(row.factor, row.vs_inv_sqrt_d_pct, "D", markersize=8, label=f"{label(key)} (f = {row.factor:.2f})",
                color=plotting.rule_kwargs(key).get("color"))
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set(title=f"n = {n} (model trained at N = {N})", xlabel="f: lambda = f / sqrt(d) at every site",
           ylabel="tour length vs 1/sqrt(d) (%)")
    ax.legend(fontsize=8)
print(plotting.save_figure(fig, "cpu_paper_lambda_sweep"))
