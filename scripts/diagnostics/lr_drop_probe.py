"""Would a smaller learning rate or a larger batch after a plateau train the TSP20 model further?
Continues the cpu_long_v2 1/sqrt(d) TSP20 model (seed 0), stopped by the plateau rule, for a few
more epochs at a given learning rate, in a scratch folder: the same training loop
(`eie.training.train`), the checkpoint's optimiser, baseline, held-out set and generators, only the
learning rate changed (in the copied checkpoint, so that it resumes), and with --batch-size the
number of training instances per step. The control is --lr at the rate the checkpoint was last
trained with (1e-4 for the logged probe from epoch 529; 6.25e-6 after the third plateau). It
continues whatever the checkpoint holds: the logged probe (2026-11-25) started from epoch 529,
where the plain plateau rule had stopped the model; since the preset's `lr_drops` the checkpoint
has trained on past it (the batch probe started from epoch 1017, the third plateau), so a rerun
starts later.
Run from the repository root:
  .venv/bin/python scripts/diagnostics/lr_drop_probe.py --lr 2.5e-5 --epochs 150
  .venv/bin/python scripts/diagnostics/lr_drop_probe.py --lr 2.5e-5 --batch-size 512 --epochs 100
  .venv/bin/python scripts/diagnostics/lr_drop_probe.py --notebook 05_train_bpp --lr 1e-3 --epochs 40
  .venv/bin/python scripts/diagnostics/lr_drop_probe.py --notebook 05_train_bpp --lr 1e-3 --epochs 40 --exponential-baseline
(the last: the bin-packing model of the same rule and seed, 120 x 100, from wherever its checkpoint is).
Writes results/cpu_long_v2/lr_drop_probe_[<problem and setting>_]lr<lr>[_batch<B>][_expbaseline]_from<epoch>.csv
(the epochs after the start; the problem only where it is not TSP, the batch only where it differs
from the preset's; the bin-packing probes of the README were then moved to bpp_lr_probe/).
"""

import argparse
import dataclasses
import tempfile
from pathlib import Path

import torch

from eie import experiments, study, training
from eie.files import save_atomic

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--lr", type=float, required=True, help="learning rate after the stop")
parser.add_argument("--epochs", type=int, default=150, help="epochs to add (default 150)")
parser.add_argument("--batch-size", type=int, default=None, help="training instances per step after the stop "
                    "(default: the preset's)")
parser.add_argument("--seed", type=int, default=0)
parser.add_argument("--rule", default="inv_sqrt_d")
parser.add_argument("--exponential-baseline", action="store_true", help="the probe's epochs with Kool et al.'s "
                    "exponential baseline (`TrainConfig.warmup_epochs`) instead of the greedy rollout")
parser.add_argument("--notebook", default="08_rivals", help="whose model: 08_rivals (TSP, default), "
                    "04_train_cvrp or 05_train_bpp (their first setting: C_v = 10, the 120 x 100 bin)")
args = parser.parse_args()
torch.set_num_threads(1)

params = experiments.load(args.notebook, "presets/cpu_long_v2.yaml")
setup = next(iter(study.training_setups(args.notebook, params)))
problem = setup["config"]["problem"]
name = f"{problem}{setup['tag']}_{args.rule}_n{params['n_train']}_seed{args.seed}"
source = Path("results/cpu_long_v2/checkpoints") / f"{name}.pt"
if not source.is_file():
    raise SystemExit(f"no checkpoint at {source}: train it first (results/cpu_long_v2/README.md)")
state = torch.load(source, weights_only=False)
stopped = state["epoch"]
base = training.TrainConfig(rule=args.rule, seed=args.seed, **setup["config"])
if state["config"] != base.resume_key():
    raise SystemExit(f"{source} was not trained with the settings this probe assumes; see its config")
batch_size = args.batch_size or base.batch_size
config = dataclasses.replace(base, lr=args.lr, batch_size=batch_size, epochs=stopped + args.epochs, plateau_window=0,
                             lr_drops=0, warmup_epochs=stopped + args.epochs if args.exponential_baseline else 0)
state["config"] = config.resume_key()
for group in state["optimiser"]["param_groups"]:
    group["lr"] = args.lr
with tempfile.TemporaryDirectory() as scratch:
    save_atomic(state, Path(scratch) / f"{name}.pt")
    result = training.train(config, scratch, name=name, device="cpu", progress=True)
log = result.log[result.log.epoch > stopped]
batch_tag = ("" if batch_size == base.batch_size else f"_batch{batch_size}") + \
    ("_expbaseline" if args.exponential_baseline else "")
model_tag = "" if problem == "tsp" else f"{problem}{setup['tag']}_"
out = Path("results/cpu_long_v2") / f"lr_drop_probe_{model_tag}lr{args.lr:g}{batch_tag}_from{stopped}.csv"
log.to_csv(out, index=False)
print(f"stopped at epoch {stopped}; mean held-out greedy cost of the {args.epochs} epochs after it at lr "
      f"{args.lr:g}, batch {batch_size}: {log.eval_cost.mean():.4f} (last 50: {log.eval_cost.iloc[-50:].mean():.4f}); "
      f"{out}")
