"""How far is each trained TSP20 model of cpu_long_v2 from LKH at its own training length?
A progress check while the run trains (the run's evaluation, notebook 08, gives the tables): the
greedy cost of each model on the study's fixed test set at n = 20 (`eie.evaluation.fixed_test_set`,
512 instances, the preset's test size) against LKH (`eie.solvers.lkh_tsp_costs`, one run) on the
same instances. Reads the checkpoints in results/cpu_long_v2/checkpoints/ (whatever epoch they hold;
the `epochs` column says which), and the finished policies exported to results/cpu_long_v2/models/
where this machine has no checkpoint; writes results/cpu_long_v2/gap_at_N.csv.
Run from the repository root (about 5 s per model, one thread):
  .venv/bin/python results/cpu_long_v2/gap_at_N.py
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from eie.evaluation import fixed_test_set, greedy_costs
from eie.problems import make_problem
from eie.solvers import lkh_tsp_costs
from eie.training import checkpoint_epochs, load_trained

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--size", type=int, default=512, help="test instances (default 512, the preset's test_size)")
args = parser.parse_args()
torch.set_num_threads(1)

run = Path("results/cpu_long_v2")
found = {path.name: path for folder in ("models", "checkpoints") for path in (run / folder).glob("tsp_*_n20_seed*.pt")}
paths = [found[name] for name in sorted(found)]  # a checkpoint here before an export of the same model
if not paths:
    raise SystemExit(f"no TSP20 models in {run}/checkpoints or {run}/models: train them first ({run}/README.md)")
instance = fixed_test_set(make_problem("tsp"), 20, args.size)
reference = lkh_tsp_costs(instance["coords"])
rows = []
for path in paths:
    costs = greedy_costs(load_trained(path), instance).cpu().numpy()
    gaps = 100 * (costs / reference - 1)
    rows.append({"model": path.stem, "epochs": checkpoint_epochs(path), "greedy": costs.mean(),
                 "lkh": reference.mean(), "gap_pct": gaps.mean(), "gap_pct_median": np.median(gaps)})
table = pd.DataFrame(rows).round(4)
table.to_csv(run / "gap_at_N.csv", index=False)
print(table.to_string(index=False))
