"""Does the bin-packing policy hold packings as good as the best sort-then-place heuristic, which its
greedy decoding does not find? Best-of-k sampling at N = 20 against greedy and the heuristic.

Where the greedy policy stalls just below the heuristic (`cpu_long_v2`), this tells two causes
apart: if the best of a few samples beats the heuristic on most instances, the policy ranks good
packings high but its argmax is not yet sharp (a training-budget limit); if even the best of many
samples stays below, the policy does not represent what the heuristic does (a model limit).

For one model (a checkpoint in results/cpu_long_v2/checkpoints/, else its export in models/): the
preset's 128 test instances at 20 boxes (`eie.evaluation.fixed_test_set`), the best heuristic's load
rate on each (`BPP.reference_costs`), the greedy load, and k sampled rollouts per instance (one
seeded generator) of which the best of the first 1, 4, 16, ... is kept. Writes
results/cpu_long_v2/bpp_sampling_probe_<model>.csv (one row per k) and prints it.
Run from the repository root (about 1 s per 64 rollouts of 20 boxes, one thread):
  .venv/bin/python scripts/diagnostics/bpp_sampling_probe.py [--model bpp_120x100_inv_sqrt_d_n20_seed0] [--samples 64]
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from eie import experiments
from eie.checkpoints import checkpoint_epochs
from eie.evaluation import fixed_test_set, greedy_costs
from eie.training import load_trained

RUN = Path("results/cpu_long_v2")


def model_path(name: str) -> Path:
    for folder in ("checkpoints", "models"):
        path = RUN / folder / f"{name}.pt"
        if path.is_file():
            return path
    raise SystemExit(f"no model {name} in {RUN}/checkpoints or {RUN}/models: train it first ({RUN}/README.md)")


@torch.no_grad()
def sampled_loads(model, instance: dict, samples: int, chunk: int, seed: int = 0) -> np.ndarray:
    """(instances, samples) load rates (%) of sampled rollouts, each checked by the problem."""
    generator = torch.Generator().manual_seed(seed)
    dims = instance["dims"].repeat_interleave(samples, 0)  # each instance `samples` times in a row
    loads = []
    for start in range(0, dims.shape[0], chunk):
        part = {"dims": dims[start:start + chunk]}
        solution, _ = model.rollout(part, "sample", generator)
        model.problem.check(part, solution)
        loads.append(model.problem.load_rate(part, solution))
    return torch.cat(loads).view(-1, samples).numpy()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="bpp_120x100_inv_sqrt_d_n20_seed0", help="file name without .pt")
    parser.add_argument("--samples", type=int, default=64, help="sampled rollouts per instance (default 64)")
    args = parser.parse_args()
    if args.samples < 1:
        raise SystemExit(f"--samples must be at least 1, got {args.samples}")
    torch.set_num_threads(1)
    params = experiments.load("05_train_bpp", f"presets/{RUN.name}.yaml")
    path = model_path(args.model)
    model = load_trained(path).eval()
    instance = fixed_test_set(model.problem, params["n_train"], params["test_size"])
    heuristic = -model.problem.reference_costs(instance)  # load rates (%), one per instance
    greedy = -greedy_costs(model, instance, chunk=params["eval_chunk"]).numpy()
    loads = sampled_loads(model, instance, args.samples, params["eval_chunk"])
    rows = [{"decoding": "greedy", "k": 1, "load": greedy.mean(), "load_median": np.median(greedy),
             "gap_pct": 100 * (1 - greedy / heuristic).mean(), "at_least_heuristic": (greedy >= heuristic).mean()}]
    k = 1
    while k <= args.samples:
        best = loads[:, :k].max(1)
        rows.append({"decoding": "best of k sampled", "k": k, "load": best.mean(), "load_median": np.median(best),
                     "gap_pct": 100 * (1 - best / heuristic).mean(), "at_least_heuristic": (best >= heuristic).mean()})
        k *= 4
    table = pd.DataFrame(rows).round(4)
    table.insert(0, "epochs", checkpoint_epochs(path))
    table["heuristic_load"] = round(float(heuristic.mean()), 4)
    table.to_csv(RUN / f"bpp_sampling_probe_{args.model}.csv", index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    main()
