"""Which of bin packing's two decisions costs the sampled policy its load.

Each step of a bin-packing policy takes two decisions (`eie.problems.bpp`): the sequence policy
points to the next box, the placement head picks its orientation and position. This decodes each
checkpoint's current policy (its last epoch's weights, not a kept baseline) on the same held-out
instances four times, with each decision greedy or sampled, and reports the load rate of each
combination beside each head's mean negative log-likelihood per box of its sampled decisions (how
much of the policy's randomness each head holds). Where sampling only the placement loses what
sampling both loses, the placement head is the decision that REINFORCE's samples explore badly.
A box order drawn uniformly has ln(n!) / n nats per box (3.637 at 100 boxes).

It first prints, per checkpoint, how far apart the encoder keeps the boxes (`encoding_spread`): the
standard deviation across boxes of the encoder's output, against its norm. `--spread-only` prints
that alone (a second, no decoding).

    .venv/bin/python scripts/diagnostics/bpp_decisions.py CHECKPOINT [CHECKPOINT ...] [--instances 256] [--seed 0]
        [--spread-only]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lib"))
from eie.checkpoints import read_checkpoint  # noqa: E402
from eie.training import load_trained  # noqa: E402

MODES = ("greedy", "sample")
# the held-out instances' generator: apart from any training stream (those are seeded seed * 7919 + 1, + 2)
INSTANCE_SEED = 2_000_003


class ForcedPlacement(nn.Module):
    """The placement head decoding as `decode` says whatever the sequence policy does, summing the
    log-probabilities of its decisions."""

    def __init__(self, head: nn.Module, decode: str):
        super().__init__()
        self.head, self.decode, self.log_likelihood = head, decode, 0.0

    def forward(self, state, nodes, box, decode, generator=None):
        action, log_p = self.head(state, nodes, box, self.decode, generator)
        self.log_likelihood = self.log_likelihood + log_p
        return action, log_p


def decision_loads(model, instances: dict, seed: int = 0) -> dict:
    """{(box decision, placement decision): mean load rate (%)} for the four combinations of greedy
    and sampled decisions, and "nll_sequence", "nll_placement": each head's mean negative
    log-likelihood per box (nats) of the fully sampled decisions. Sampling draws from a generator
    seeded `seed` afresh for each combination."""
    head, n = model.action_head, instances["dims"].shape[1]
    found = {}
    try:
        for box in MODES:
            for placement in MODES:
                model.action_head = forced = ForcedPlacement(head, placement)
                with torch.no_grad():
                    solution, log_likelihood = model.rollout(instances, box, torch.Generator().manual_seed(seed))
                found[(box, placement)] = -float(model.problem.cost(instances, solution).mean())
                if (box, placement) == ("sample", "sample"):
                    found["nll_placement"] = -float(forced.log_likelihood.mean()) / n
                    found["nll_sequence"] = -float((log_likelihood - forced.log_likelihood).mean()) / n
    finally:
        model.action_head = head
    return found


def encoding_spread(model, instances: dict) -> tuple[float, float]:
    """(standard deviation across an instance's boxes of the encoder's output, averaged over
    features and instances; the mean norm of a box's encoding). A spread far below the norm means
    the encoder gives every box nearly the same vector, and the pointer cannot tell boxes apart."""
    with torch.no_grad():
        nodes = model.encode(instances)
    return float(nodes.std(dim=1).mean()), float(nodes.norm(dim=-1).mean())


def current_policy(checkpoint: Path):
    """(the checkpoint's last-epoch policy, its epoch, its training length)."""
    payload = read_checkpoint(checkpoint)
    model = load_trained(checkpoint)
    model.load_state_dict(payload["model"])  # the last epoch's weights, whichever policy the run keeps
    return model.eval(), int(payload["epoch"]), int(payload["config"]["n_train"])


def held_out_policies(checkpoints, instances: int):
    """For each bin-packing checkpoint: (its label "run, epoch E", its current policy, `instances`
    held-out instances at its training length, drawn from `INSTANCE_SEED`)."""
    for checkpoint in checkpoints:
        model, epoch, n_train = current_policy(checkpoint)
        if model.problem.name != "bpp":
            raise SystemExit(f"{checkpoint} holds a {model.problem.name} policy; this diagnostic reads bin packing's")
        held_out = model.problem.generate(instances, n_train, torch.Generator().manual_seed(INSTANCE_SEED))
        yield f"{run_label(checkpoint)}, epoch {epoch}", model, held_out


def run_label(checkpoint: Path) -> str:
    """The run a checkpoint belongs to: results/<run>/{checkpoints,carry,models}/..."""
    folder = checkpoint.parent
    return folder.parent.name if folder.name in ("carry", "checkpoints", "models") else folder.name


def table(rows: list[tuple[str, dict]]) -> str:
    lines = ["| policy | greedy both | sampled box, greedy placement | greedy box, sampled placement | sampled both "
             "| nats per box: box | placement |", "|---|---|---|---|---|---|---|"]
    for label, found in rows:
        loads = " | ".join(f"{found[(box, placement)]:.2f} %" for box, placement in
                           (("greedy", "greedy"), ("sample", "greedy"), ("greedy", "sample"), ("sample", "sample")))
        lines.append(f"| {label} | {loads} | {found['nll_sequence']:.3f} | {found['nll_placement']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--instances", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0, help="the sampling generator's seed")
    parser.add_argument("--spread-only", action="store_true", help="print the encodings' spread, decode nothing")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for label, model, instances in held_out_policies(args.checkpoints, args.instances):
        spread, norm = encoding_spread(model, instances)
        print(f"{label}: box encodings' spread across boxes {spread:.2g} (norm {norm:.3g})", flush=True)
        if args.spread_only:
            continue
        rows.append((label, decision_loads(model, instances, args.seed)))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    if rows:
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
