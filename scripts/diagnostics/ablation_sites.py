"""Where EIE's lambda(n) is applied, on the cpu_paper TSP100 model (seed 0), at n = 800 on the
first `--instances` instances of the Table 2 test set: the encoder's self-attention and the decoder's
glimpse (the study's default, `sites`), the encoder only, the glimpse only; and the n the rule sees
("instance" or "unmasked"). A diagnostic for why EIE loses to 1/sqrt(d) at N = 100 (README.md).
Run from the repository root: .venv/bin/python scripts/diagnostics/ablation_sites.py [--instances 1024]
"""

import argparse

import pandas as pd
import torch

from eie import experiments, extrapolation, study
from eie.evaluation import fixed_test_set, greedy_costs

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--instances", type=int, default=1024)
parser.add_argument("--n", type=int, default=800)
args = parser.parse_args()

torch.set_grad_enabled(False)
preset = experiments.load("03_train_tsp", "presets/cpu_paper.yaml")
name = f"tsp_inv_sqrt_d_n{preset['n_train']}_seed0"
model = study.load_policies([name], run=preset["run"])[name]
d = model.config.head_dim
net, table = study.ensure_scales(d, preset["n_train"], preset["n_max"], run=preset["run"])  # the run's own
plain, eie = extrapolation.bind_methods(["inv_sqrt_d", "eie"], d, preset["n_train"], net, table)
instances = fixed_test_set(model.problem, args.n, args.instances, seed=1234)  # the notebooks' test_seed
rows = []
for method, sites, n_mode in [(plain, ("encoder", "glimpse"), "instance"), (eie, ("encoder", "glimpse"), "instance"),
                              (eie, ("encoder",), "instance"), (eie, ("glimpse",), "instance"),
                              (eie, ("encoder", "glimpse"), "unmasked")]:
    model.attention.sites, model.attention.n_mode = sites, n_mode
    costs = greedy_costs(model, instances, method, chunk=64)
    rows.append({"method": method.key, "sites": "+".join(sites), "n_mode": n_mode, "n": args.n,
                 "instances": args.instances, "tour_length": float(costs.mean())})
    print(rows[-1], flush=True)
frame = pd.DataFrame(rows)
base = frame.tour_length.iloc[0]
frame["vs_inv_sqrt_d_pct"] = 100 * (frame.tour_length / base - 1)
frame.to_csv("results/cpu_paper/ablation_sites.csv", index=False, float_format="%.4f")
print(frame.round(3).to_string(index=False))
