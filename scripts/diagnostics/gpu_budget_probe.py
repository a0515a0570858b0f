"""Is the TSP20 model's 1.7 % floor a floor of the model or of the training budget?
Trains the cpu_long_v2 1/sqrt(d) TSP20 model (seed 0, the preset's model and training loop,
`eie.training.train`) from scratch on a GPU for a wall-clock budget, at batch 512 and a constant
learning rate (no plateau rule), and keeps its log and exported policy. A GPU machine gives a
few minutes; this CPU's one thread gives 1.3 M training instances in about an hour.

On the GPU machine (the policy and log are written to --out):
  PYTHONPATH=lib python3 scripts/diagnostics/gpu_budget_probe.py train --seconds 420 --out $OUT
Here, the gap at N of the policy it wrote (greedy on the study's 512 test instances at n = 20 against
LKH, as `gap_at_N.py`), beside the CPU-trained model's:
  .venv/bin/python scripts/diagnostics/gpu_budget_probe.py gap --policy <folder>/gpu_policy.pt
and both at 20 -> 320 with 1/sqrt(d), EIE and log_N (the study's 512 test instances per n):
  .venv/bin/python scripts/diagnostics/gpu_budget_probe.py extrapolate --policy <folder>/gpu_policy.pt
and their training curves against the training instances seen (figures/cpu_long_v2_gpu_budget_probe.png):
  .venv/bin/python scripts/diagnostics/gpu_budget_probe.py figure --policy <folder>/gpu_policy.pt
"""

import argparse
import dataclasses
import shutil
import tempfile
import time
from pathlib import Path

import torch

from eie import checkpoints, experiments, extrapolation, study, training

NAME = "tsp_inv_sqrt_d_n20_seed0"


def train(args):
    params = experiments.load("08_rivals", "presets/cpu_long_v2.yaml")
    setup = next(iter(study.training_setups("08_rivals", params)))
    config = dataclasses.replace(training.TrainConfig(rule="inv_sqrt_d", seed=0, **setup["config"]),
                                 batch_size=args.batch_size, lr=args.lr, plateau_window=0, lr_drops=0)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start, epochs = time.perf_counter(), 0
    with tempfile.TemporaryDirectory() as scratch:
        while time.perf_counter() - start < args.seconds:  # resumes from its checkpoint each round
            epochs += args.round_epochs
            result = training.train(dataclasses.replace(config, epochs=epochs), scratch, name=NAME,
                                    device=args.device, progress=False)
            log = result.log
            print(f"epoch {epochs}: {time.perf_counter() - start:.0f} s, held-out greedy (mean of the last "
                  f"{args.round_epochs}) {log.eval_cost.iloc[-args.round_epochs:].mean():.4f}", flush=True)
            checkpoints.export_policy(Path(scratch) / f"{NAME}.pt", out / "gpu_policy.pt")  # each round: a kill
            shutil.copy(Path(scratch) / f"{NAME}_log.csv", out / "gpu_log.csv")         # loses one round at most
    steps = epochs * config.steps_per_epoch
    print(f"{epochs} epochs, {steps} steps of batch {config.batch_size} ({steps * config.batch_size / 1e6:.2f} M "
          f"instances) in {time.perf_counter() - start:.0f} s on {args.device}")


def gap(args):
    from gap_at_N import tsp_gaps  # the run's progress check, beside this script

    torch.set_num_threads(1)
    table = tsp_gaps(512, [Path("results/cpu_long_v2/models") / f"{NAME}.pt", Path(args.policy)])
    table.insert(0, "trained", ["CPU, plateau recipe", "GPU budget probe"])
    print(table.round(4).to_string(index=False))


def extrapolate(args):
    torch.set_num_threads(1)
    models = {("inv_sqrt_d", 0): training.load_trained(Path("results/cpu_long_v2/models") / f"{NAME}.pt"),
              ("inv_sqrt_d", 1): training.load_trained(args.policy)}  # "seed" 1 here: the GPU-trained model
    net, table = study.ensure_scales(16, 20, 320, run="cpu_long_v2")
    methods = extrapolation.bind_methods(["inv_sqrt_d", "eie", "log_N"], d=16, N=20, net=net, table=table)
    results, _, _ = extrapolation.evaluate(models, methods, 20, 320, test_size=512, reference_size=0, chunk=128,
                                   device="cpu", progress=True)
    results["model"] = results.seed.map({0: "CPU, plateau recipe", 1: "GPU budget probe"})
    table = results[results.method != "reference"].pivot_table(index=["model", "method"], columns="n",
                                                                values="objective")
    print(table.round(3).to_string())
    print("relative to 1/sqrt(d) of the same model, %:")
    print((100 * (table / table.xs("inv_sqrt_d", level="method") - 1)).round(2).to_string())
    if args.csv:
        results.to_csv(args.csv, index=False)


def figure(args):
    import matplotlib.pyplot as plt

    from eie.plotting import apply_style, save_figure

    apply_style()
    fig, ax = plt.subplots(figsize=(7, 3.8))
    for label, path in [("CPU, batch 128, lr 1e-4 with two drops (the run's recipe)",
                         Path("results/cpu_long_v2/models") / f"{NAME}.pt"),
                        ("GPU probe, batch 512, lr 1e-4", Path(args.policy))]:
        config = torch.load(path, weights_only=False)["config"]
        log = checkpoints.checkpoint_log(path)
        millions = log.epoch * config["steps_per_epoch"] * config["batch_size"] / 1e6
        ax.plot(millions, log.eval_cost.rolling(20, min_periods=1).mean(), label=label)
    ax.set_xlabel("training instances seen (millions)")
    ax.set_ylabel("held-out greedy tour length\n(1024 instances, mean of 20 epochs)")
    ax.set_ylim(7.7, 8.3)
    ax.set_title("TSP20, 1/\u221ad, seed 0: the same model with four times the data")
    ax.legend(fontsize=9)
    print(save_figure(fig, "cpu_long_v2_gpu_budget_probe"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("train")
    run.add_argument("--seconds", type=float, required=True, help="wall-clock budget (checked between rounds)")
    run.add_argument("--out", required=True)
    run.add_argument("--batch-size", type=int, default=512)
    run.add_argument("--lr", type=float, default=1e-4)
    run.add_argument("--round-epochs", type=int, default=100)
    run.add_argument("--device", default="cuda")
    check = sub.add_parser("gap")
    check.add_argument("--policy", required=True)
    wide = sub.add_parser("extrapolate")
    wide.add_argument("--policy", required=True)
    wide.add_argument("--csv", help="write the long table here")
    drawn = sub.add_parser("figure")
    drawn.add_argument("--policy", required=True)
    args = parser.parse_args()
    {"train": train, "gap": gap, "extrapolate": extrapolate, "figure": figure}[args.command](args)


if __name__ == "__main__":
    main()
