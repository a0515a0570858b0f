"""The last policy of each cpu_long_v2 checkpoint against its rollout baseline's policy, at N = 20.

A checkpoint holds both: the policy after the last epoch, and the rollout baseline (the last policy
the paired test on fresh held-out instances found better than its predecessor). This decoded both
greedily on the study's fixed test set at n = 20 (`eie.evaluation.fixed_test_set`: 512 instances
for TSP and CVRP, the preset's 128 for bin packing), to decide which one a finished model keeps
(`TrainConfig.final_policy`; README "Which policy a finished model keeps"). Reads every checkpoint in
results/cpu_long_v2/checkpoints/ (exports hold only one policy), writes kept_vs_last.csv and prints
it: the mean objective of each (tour length, route length, or minus the load rate in %), the
relative difference of the baseline's to the last one's (%; negative = the baseline's is better),
and for bin packing the best sort-then-place heuristic's load rate on the same instances.
Run from the repository root (seconds per TSP or CVRP model, about a minute per bin-packing one):
  .venv/bin/python scripts/diagnostics/kept_vs_last.py
"""

import argparse
from pathlib import Path

import pandas as pd
import torch

from eie import experiments
from eie.checkpoints import checkpoint_epochs, read_checkpoint
from eie.evaluation import fixed_test_set, greedy_costs
from eie.training import load_trained

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()

RUN = Path("results/cpu_long_v2")


def both_policies(path: Path):
    """(last policy, baseline policy, epoch the baseline was taken) of the checkpoint at `path`."""
    payload = read_checkpoint(path)
    last, baseline = load_trained(path), load_trained(path)
    last.load_state_dict(payload["model"])
    baseline.load_state_dict(payload["baseline"])
    updates = [row["epoch"] for row in payload["log"] if row["baseline_updated"]]
    return last, baseline, (updates[-1] if updates else 0)


def main():
    torch.set_num_threads(1)
    bpp = experiments.load("05_train_bpp", f"presets/{RUN.name}.yaml")
    rows = []
    for path in sorted((RUN / "checkpoints").glob("*_n20_seed*.pt")):
        last, baseline, baseline_epoch = both_policies(path)
        problem = last.problem
        bin_packing = path.name.startswith("bpp")
        size = bpp["test_size"] if bin_packing else 512
        chunk = bpp["eval_chunk"] if bin_packing else 256
        instance = fixed_test_set(problem, 20, size)
        costs = {name: greedy_costs(model, instance, chunk=chunk).mean().item()
                 for name, model in (("last", last), ("baseline", baseline))}
        row = {"model": path.stem, "epochs": checkpoint_epochs(path), "baseline_epoch": baseline_epoch,
               "last": costs["last"], "baseline": costs["baseline"],
               "baseline_vs_last_pct": 100 * (costs["baseline"] / costs["last"] - 1) * (-1 if bin_packing else 1)}
        if bin_packing:
            row["heuristic"] = problem.reference_costs(instance).mean().item()
        rows.append(row)
    if not rows:
        raise SystemExit(f"no checkpoints in {RUN}/checkpoints (exports hold one policy only): train the models first")
    table = pd.DataFrame(rows).round(4)
    table.to_csv(RUN / "kept_vs_last.csv", index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
