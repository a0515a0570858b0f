"""Is the box order or the placement what keeps a bin-packing policy below the sort-then-place heuristics?

A packing is a box order and a placement per box. This crosses the two on the same held-out
instances: the order from the policy's greedy pointer or from a heuristic's sort (longest edge,
volume, as generated), each placed by the policy's greedy placement head or by the heuristics' rule (where the
box's top ends lowest, least trapped space on ties: `bpp_heuristics.lowest_top_action`), and reports
the mean load rate of each pair. Where the policy's order placed by the rule comes near the heuristics,
the order is good and the placement head is what falls short.

It reports how far the policy's greedy order packs the largest boxes first (a rank correlation with
volume), and measures the head against the rule box by box on the policy's own greedy packing: how often its
choice ends the box's top as low as the rule's lowest, and by how many cells higher on average, split
into the steps where that raises the packing's height and those where it does not.

    .venv/bin/python scripts/diagnostics/bpp_placement.py CHECKPOINT [CHECKPOINT ...] [--instances 256]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lib"))
sys.path.insert(0, str(ROOT / "scripts" / "diagnostics"))
from bpp_decisions import held_out_policies  # noqa: E402

from eie.problems.bpp_heuristics import box_order, lowest_top_action, pack_in_order  # noqa: E402

ORDERS = ("policy", "longest_edge", "volume", "as_generated")
PLACEMENTS = ("policy", "rule")


class RulePlacement(nn.Module):
    """An action head that places each box by the heuristics' rule (log-probability 0)."""

    def forward(self, state, nodes, box, decode, generator=None):
        return lowest_top_action(state, box), torch.zeros(box.shape[0], device=box.device)


class ComparedPlacement(nn.Module):
    """The policy's placement head, with each of its choices compared to the rule's for the same box:
    counts of steps, of steps whose top ends as low as the rule's, the summed excess (cells), and the
    same excess split by whether the head's choice raised the packing's height above the rule's."""

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head
        self.steps = self.as_low = 0
        self.excess = self.excess_raising = 0.0
        self.raising = 0

    def forward(self, state, nodes, box, decode, generator=None):
        action, log_p = self.head(state, nodes, box, decode, generator)
        extents, low, _, _ = state.placement_options(box)  # the head's candidates: (B, 6, 3), (B, 6, L)
        tops = low + extents[..., 2, None].to(low.dtype)  # the rule's lowest top is the lowest of these
        rows = torch.arange(box.shape[0], device=box.device)
        top, lowest = tops[rows, action[:, 1], action[:, 2]], tops.flatten(1).amin(1)
        height = state.heights.flatten(1).amax(1).to(top.dtype)
        raises = torch.maximum(top, height) > torch.maximum(lowest, height)
        self.steps += box.shape[0]
        self.as_low += int((top <= lowest).sum())
        self.excess += float((top - lowest).sum())
        self.raising += int(raises.sum())
        self.excess_raising += float((torch.maximum(top, height) - torch.maximum(lowest, height)).sum())
        return action, log_p


def largest_first(order: torch.Tensor, dims: torch.Tensor) -> float:
    """The mean over instances of the Spearman rank correlation between the step at which each box is
    packed (`order` (B, n): box indices by step) and its volume's rank from the largest: 1 when the
    order is largest first, about 0 when it ignores the volume."""
    step = torch.empty_like(order)
    step.scatter_(1, order, torch.arange(order.shape[1], device=order.device).expand_as(order))
    volume = dims.prod(-1)
    return float(np.mean([spearmanr(step[b].numpy(), -volume[b].numpy()).statistic for b in range(order.shape[0])]))


def policy_placement_in_order(model, instances: dict, order: torch.Tensor) -> torch.Tensor:
    """The (B, n, 7) packing of boxes taken in `order`, each placed by the policy's greedy placement head."""
    problem = model.problem
    with torch.no_grad():
        nodes = model.encode(instances)
        state = problem.initial_state(instances)
        for step in range(order.shape[1]):
            action, _ = model.action_head(state, nodes, order[:, step], "greedy")
            state = state.update(action)
    return state.solution()


def crossed_loads(model, instances: dict) -> dict:
    """{(order, placement): mean load (%)} over `ORDERS` x `PLACEMENTS`, and the head-against-rule
    counts of the policy's greedy packing: "as_low" (share of boxes), "excess" (mean cells),
    "raising" (share of boxes whose choice ends the packing higher than the rule's would),
    "excess_raising" (mean cells the packing's height grows beyond the rule's, over all boxes), and
    "largest_first": how far the policy's greedy order packs the largest boxes first (`largest_first`)."""
    problem, head = model.problem, model.action_head
    found = {}
    try:
        model.action_head = compared = ComparedPlacement(head)
        with torch.no_grad():
            solution, _ = model.rollout(instances, "greedy")
        problem.check(instances, solution)
        found[("policy", "policy")] = -float(problem.cost(instances, solution).mean())
        found["largest_first"] = largest_first(solution[..., 0], instances["dims"])
        model.action_head = RulePlacement()
        with torch.no_grad():
            packed, _ = model.rollout(instances, "greedy")
        problem.check(instances, packed)
        found[("policy", "rule")] = -float(problem.cost(instances, packed).mean())
    finally:
        model.action_head = head
    for key in ORDERS[1:]:
        sorted_order = box_order(instances, key)
        for placement in PLACEMENTS:
            if placement == "policy":
                packed = policy_placement_in_order(model, instances, sorted_order)
            else:
                packed = pack_in_order(problem, instances, sorted_order)
            problem.check(instances, packed)
            found[(key, placement)] = -float(problem.cost(instances, packed).mean())
    found["as_low"] = compared.as_low / compared.steps
    found["excess"] = compared.excess / compared.steps
    found["raising"] = compared.raising / compared.steps
    found["excess_raising"] = compared.excess_raising / compared.steps
    return found


def table(rows: list[tuple[str, dict]]) -> str:
    pairs = [(order, placement) for order in ORDERS for placement in PLACEMENTS]
    names = {"policy": "policy", "rule": "rule", "longest_edge": "longest edge", "volume": "volume",
             "as_generated": "generated"}
    header = " | ".join(f"{names[order]} order, {names[placement]} placement" for order, placement in pairs)
    lines = [f"| policy | {header} | head as low as rule | excess top (cells) | boxes raising the height "
             f"| order's rank correlation with largest first |", "|---" * (len(pairs) + 5) + "|"]
    for label, found in rows:
        loads = " | ".join(f"{found[pair]:.2f} %" for pair in pairs)
        lines.append(f"| {label} | {loads} | {100 * found['as_low']:.1f} % | {found['excess']:.2f} "
                     f"| {100 * found['raising']:.1f} % | {found['largest_first']:.3f} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", type=Path)
    parser.add_argument("--instances", type=int, default=256)
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for label, model, instances in held_out_policies(args.checkpoints, args.instances):
        rows.append((label, crossed_loads(model, instances)))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
