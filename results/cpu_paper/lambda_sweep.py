"""Which attention scale does a trained 1/sqrt(d) model (one seed) want at a longer n? A constant
lambda = f / sqrt(d) at every n, applied where EIE applies its lambda(n) (the encoder's
self-attention and the decoder's glimpse), swept over f on the first `--instances` instances of the
run's Table 2 (TSP), Table 3 (CVRP) or Table 1 (bin packing) test set, at n = 4N and 8N unless
`--lengths` says otherwise;
beside the factors that EIE (lambda(n) sqrt(d)) and log_N(n)/sqrt(d) (ln n / ln N) use at the same
n. A diagnostic for why EIE loses to 1/sqrt(d) at N = 100 (README.md): if the best f lies well below
EIE's, EIE sharpens the attention further than the trained model can use.
Run from the repository root; by default on the models of presets/cpu_paper.yaml (TSP100, CVRP100 at C_v = 10):
  .venv/bin/python results/cpu_paper/lambda_sweep.py [--instances 256] [--problem cvrp --seed 1]
Writes results/cpu_paper/lambda_sweep.csv and figures/cpu_paper_lambda_sweep.png for the TSP model
of seed 0, otherwise lambda_sweep_<problem>_seed<seed>.csv and cpu_paper_lambda_sweep_<problem>_seed<seed>.png
(`--plot-only`: redraw the figure from the csv). Another run's TSP model: `--preset` and
`--notebook` (the notebook whose models it is), e.g. the well-trained TSP20 model of cpu_long_v2:
  .venv/bin/python results/cpu_paper/lambda_sweep.py --preset presets/cpu_long_v2.yaml --notebook 08_rivals \
      --instances 512 --lengths 80 160 320 --factors 0.75 1 1.25 1.5 1.75 2 2.5 3 4
which writes results/cpu_long_v2/lambda_sweep.csv and figures/cpu_long_v2_lambda_sweep.png. CVRP models
are named by their capacity (`--capacity`, default 10, cpu_paper's); the well-trained C_v = 2 model of seed 1:
  .venv/bin/python results/cpu_paper/lambda_sweep.py --problem cvrp --capacity 2 --seed 1 \
      --preset presets/cpu_long_v2.yaml --instances 512 --lengths 80 160 320 --factors 0.75 1 1.25 1.5 1.75 2 2.5 3 4
(files lambda_sweep_cvrp_C2_seed1.csv and cpu_long_v2_lambda_sweep_cvrp_C2_seed1.png; C_v = 10 keeps the names without _C10).
Bin packing (`--problem bpp`, the bin by `--bin`, default 120x100; the csv holds the load rate, higher is
better), the well-trained 20-box model of seed 0 on the 128 test instances of its Table 1:
  .venv/bin/python results/cpu_paper/lambda_sweep.py --problem bpp --seed 0 --preset presets/cpu_long_v2.yaml \
      --instances 128 --lengths 80 160 320 --factors 0.25 0.5 0.75 1 1.5 2 3 4
(files lambda_sweep_bpp_120x100_seed0.csv and cpu_long_v2_lambda_sweep_bpp_120x100_seed0.png).
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
from eie.problems import PROBLEMS
from eie.scaling import ScalingRule


parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--problem", choices=sorted(PROBLEMS), default="tsp")
parser.add_argument("--preset", default="presets/cpu_paper.yaml", help="the run whose exported models are swept")
parser.add_argument("--notebook", default=None, help="the preset's notebook that trained the model "
                    "(default: 03_train_tsp or 04_train_cvrp)")
parser.add_argument("--capacity", type=int, default=10, help="CVRP: the vehicle capacity of the model "
                    "(its name's tag _C<capacity>; default 10, the capacity of presets/cpu_paper.yaml)")
parser.add_argument("--seed", type=int, default=0, help="which exported 1/sqrt(d) model (results/<run>/models/)")
parser.add_argument("--bin", default="120x100", help="bin packing: the bin L x W of the model (default 120x100)")
parser.add_argument("--instances", type=int, default=256)
parser.add_argument("--lengths", type=int, nargs="+", default=None, help="test lengths (default: 4N and 8N)")
parser.add_argument("--plot-only", action="store_true", help="redraw the figure from the existing csv")
parser.add_argument("--factors", type=float, nargs="+", default=[0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0])
args = parser.parse_args()
PRESET = worker.preset_parameters(args.preset, args.notebook or PROBLEMS[args.problem].notebook)
RUN = PRESET["run"]
args.lengths = args.lengths or [4 * PRESET["n_train"], 8 * PRESET["n_train"]]
N, N_MAX = PRESET["n_train"], PRESET["n_max"]  # the EIE net and the lambda* table are fitted to [N, N_MAX]
TAG = {"cvrp": f"_C{args.capacity}", "bpp": f"_{args.bin}"}.get(args.problem, "")
MODEL = study.model_name(args.problem, "inv_sqrt_d", N, args.seed, tag=TAG)
if args.instances < 2 or any(not N < n <= N_MAX for n in args.lengths) or any(f <= 0 for f in args.factors):
    parser.error(f"need --instances >= 2, every length in ({N}, {N_MAX}] and every factor > 0")

SUFFIX = ("" if (args.problem, args.seed) == ("tsp", 0) else
          f"_{args.problem}{'' if TAG == '_C10' else TAG}_seed{args.seed}")  # C_v = 10: the names from before --capacity
CSV = f"results/{RUN}/lambda_sweep{SUFFIX}.csv"
COST = PROBLEMS[args.problem].objective_name.removesuffix(" (%)")  # tour length, total distance, load rate
COLUMN = COST.replace(" ", "_")  # the csv's column of mean objectives
SIGN = -1 if PROBLEMS[args.problem].maximise else 1  # the reported objective: bin packing's load rate is minus its cost


def sweep() -> pd.DataFrame:
    """The mean costs of every factor and of EIE and log_N at every length, as a table."""
    torch.set_grad_enabled(False)
    folder = study.results_dir(RUN, create=False) / "models"  # study.models_folder, without creating the run
    if not (folder / f"{MODEL}.pt").is_file():
        parser.error(f"no exported policy {MODEL} in {folder}: run notebook "
                     f"{args.notebook or PROBLEMS[args.problem].notebook} with {args.preset}, or export it "
                     f"(python -m eie.worker {args.preset} <notebook> --save-carry)")
    model = study.load_policies([MODEL], run=RUN)[MODEL]
    d = model.config.head_dim
    net, table = study.ensure_scales(d, N, N_MAX, run=RUN)  # the run's own, as in Table 2
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
                costs = SIGN * greedy_costs(model, instances, method, chunk=64)
                rows.append({"n": n, "method": name, "factor": factor, "instances": args.instances,
                             COLUMN: float(costs.mean()),
                             "sem": float(costs.std() / math.sqrt(args.instances))})
                bar.update()
    frame = pd.DataFrame(rows)
    plain_cost = frame[frame.method == "f = 1"].set_index("n")[COLUMN]
    frame["vs_inv_sqrt_d_pct"] = 100 * (frame[COLUMN] / frame.n.map(plain_cost) - 1)
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
    ax.set(title=f"n = {n}", xlabel="f: lambda = f / sqrt(d) at every site")
    ax.legend(fontsize=8)
axes[0][0].set_ylabel(f"{COST} vs 1/sqrt(d) (%)")
better = "higher" if SIGN < 0 else "lower"
fig.suptitle(f"{args.problem.upper()}{TAG.replace('_', ' ')}, seed {args.seed}, trained at N = {N} "
             f"({COST}: {better} is better)", y=1.02)
print(plotting.save_figure(fig, f"{RUN}_lambda_sweep{SUFFIX}"))
