"""Why the bin-packing pointer stopped learning, and which clip of its logits lets it learn (2026-11-26).

The pointer's logits are C tanh(u) (C = 10) of its compatibilities u, one per box. This probe reads,
at the first decoding step of 128 fresh 20-box instances (bin 120 x 100, seed 123):
  spread_embeddings  the standard deviation of the encoder's box embeddings across the boxes of an instance,
  u_mean, u_spread   the mean of u, and its standard deviation across the boxes,
  entropy            the entropy of the first choice (nats; uniform over 20 boxes: ln 20 = 2.996),
  greedy_load        the greedy load rate (%) on those instances,
  order_volume       the correlation of a box's place in the greedy packing order with its volume
                     (-1: largest first, as the sort-then-place heuristics do).

  --checkpoint PATH ...   these for trained checkpoints, e.g. the plain-clip run's
                          (`git show 0483d4f:results/cpu_long_v2/carry/bpp_120x100_inv_sqrt_d_n20_seed0.pt`, epoch 57).
  --train [VARIANT ...]   fresh models (seed 0) trained as `presets/cpu_long_v2.yaml` trains bin packing
                          (lr 1e-3, batch 64, the exponential baseline of its warm-up, gradient norm 1: the
                          step of `eie.training`'s loop in its warm-up epochs, written out here so that the
                          pointer is read every 20 steps and no rollout baseline is decoded; own data seeds) for
                          --steps steps, read every 20 steps (with the sampled load on the training batches,
                          mean of the last 20 steps), with the pointer's clip: plain C tanh(u), centred
                          C tanh(u - mean of the allowed u) (`ModelConfig.pointer_clip`), or none (u itself;
                          a probe-only variant). Writes results/cpu_long_v2/bpp_pointer_probe/variants.csv.

Run from the repository root (one thread; the three variants of 200 steps take about 12 minutes):
  .venv/bin/python scripts/diagnostics/bpp_pointer_probe.py --train plain centred none --steps 200
"""

import argparse
from pathlib import Path

import pandas as pd
import torch

from eie import checkpoints, experiments, study, training
from eie import model as model_module
from eie.model import ModelConfig
from eie.threads import use_threads  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--checkpoint", nargs="*", default=[], help="trained checkpoints to read")
parser.add_argument("--train", nargs="*", default=[], choices=["plain", "centred", "none"],
                    help="clips to train fresh models with")
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()
use_threads(1)

clip = model_module.clipped_logits
recorded = []


def recording(u, blocked, config, variant="library"):
    """The pointer's clip (the library's, or none), keeping u and the logits of each call."""
    logits = u.masked_fill(blocked, float("-inf")) if variant == "none" else clip(u, blocked, config)
    recorded.append((u.detach(), logits.detach()))
    return logits


def read(model, instances) -> dict:
    """The pointer's numbers at the first step, and the greedy packing's, for `instances`."""
    model.eval()
    recorded.clear()
    with torch.no_grad():
        solution, _ = model.rollout(instances, "greedy")
        embeddings = model.encode(instances)
    u, logits = recorded[0][0][:, 0], recorded[0][1][:, 0]
    p = torch.softmax(logits, dim=-1)
    volumes = torch.gather(instances["dims"], 1, solution[..., :1].expand(-1, -1, 3)).prod(-1).float()
    order = torch.arange(volumes.shape[1], dtype=torch.float32).repeat(volumes.shape[0])
    return {"spread_embeddings": float(embeddings.std(1).mean()), "u_mean": float(u.mean()),
            "u_spread": float(u.std(-1).mean()), "entropy": float(-(p * p.clamp_min(1e-30).log()).sum(-1).mean()),
            "greedy_load": float(-model.problem.cost(instances, solution).mean()),
            "order_volume": float(torch.corrcoef(torch.stack([order, volumes.flatten()]))[0, 1])}


params = experiments.load("05_train_bpp", "presets/cpu_long_v2.yaml")
setup = study.training_setups("05_train_bpp", params)[0]
model_module.clipped_logits = recording
instances = None

for path in args.checkpoint:
    model = training.load_trained(path)
    if instances is None:
        instances = model.problem.generate(128, 20, torch.Generator().manual_seed(123))
    epoch = len(checkpoints.checkpoint_log(path))
    print(path, f"epoch {epoch}:", {key: round(value, 4) for key, value in read(model, instances).items()})

rows = []
for variant in args.train:
    config = training.TrainConfig(rule="inv_sqrt_d", seed=0, **dict(
        setup["config"], model=ModelConfig(pointer_clip="plain" if variant == "none" else variant)))
    model_module.clipped_logits = lambda u, blocked, config, v=variant: recording(u, blocked, config, v)
    torch.manual_seed(0)
    model = training.build_model(config, "cpu")
    if instances is None:
        instances = model.problem.generate(128, 20, torch.Generator().manual_seed(123))
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    data, draws = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    baseline, sampled = None, []
    for step in range(args.steps + 1):
        if step % 20 == 0:
            row = {"variant": variant, "step": step,
                   "sampled_load": sum(sampled[-20:]) / len(sampled[-20:]) if sampled else float("nan"),
                   **read(model, instances)}
            rows.append(row)
            print({key: round(value, 3) if isinstance(value, float) else value for key, value in row.items()}, flush=True)
        if step == args.steps:
            break
        model.train()
        batch = model.problem.generate(config.batch_size, config.n_train, data)
        solution, log_likelihood = model.sample_with_gradients(batch, draws)
        cost = model.problem.cost(batch, solution)
        sampled.append(-float(cost.mean()))
        mean = float(cost.mean())
        baseline = mean if baseline is None else training.WARMUP_BETA * baseline + (1 - training.WARMUP_BETA) * mean
        loss = ((cost - baseline) * log_likelihood).mean()
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
        optimiser.step()
if rows:
    out = Path("results/cpu_long_v2/bpp_pointer_probe/variants.csv")
    out.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(out, index=False, float_format="%.4f")
    print("wrote", out)
