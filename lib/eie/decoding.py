"""Decoding modes beyond greedy: best of K sampled solutions, and greedy over the 8 symmetries of the square.

Practitioners rarely decode greedily: they sample several solutions or decode transformed copies of
an instance and keep the best (Kool et al. 2019 sample 1280; POMO-style work augments by the 8
symmetries of the unit square). A scaling rule that sharpens attention may hurt the single most
likely solution yet spread the samples better, so each method is compared with 1/sqrt(d) under the
same mode.

- `mode_costs(model, instance, method, mode, seed)`: per-instance costs under `mode`, one of
  "greedy", "sample<K>" (best of K solutions drawn from the policy with a generator seeded by `seed`,
  so reruns with the same `chunk` reproduce: the draws depend on how instances are batched) and "augment8" (greedy on each of the 8 flips and rotations of the
  coordinates, best of 8; distances, hence costs, are unchanged by these maps). Every solution
  passes the problem's feasibility check.
- `sampled_costs(model, instance, method, k, seed)`: every one of the K sampled solutions' costs and
  log-likelihoods, not only the best (how far the samples spread).
- `constant_factor(method, f)`: a method's model with lambda = f / sqrt(d) at every n.
"""

from __future__ import annotations

import dataclasses
import re

import torch

from .evaluation import greedy_costs, method_applied
from .methods import BoundMethod, label
from .model import AttentionModel
from .problems.base import CheckedInstance
from .scaling import ScalingRule

# the 8 symmetries of [-1, 1]^2: (swap x and y?, sign of x, sign of y)
SYMMETRIES = tuple((swap, sx, sy) for swap in (False, True) for sx in (1.0, -1.0) for sy in (1.0, -1.0))


def parse_mode(mode: str) -> tuple[str, int]:
    """("greedy", 1), ("sample", K) or ("augment", 8); ValueError for anything else."""
    if mode == "greedy":
        return "greedy", 1
    if mode == "augment8":
        return "augment", 8
    found = re.fullmatch(r"sample(\d+)", mode)
    if found and int(found.group(1)) >= 1:
        return "sample", int(found.group(1))
    raise ValueError(f"decoding mode must be 'greedy', 'sample<K>' (K >= 1, e.g. sample16) or 'augment8', got {mode!r}")


def symmetric(instance: dict, swap: bool, sx: float, sy: float) -> dict:
    """The instance with its coordinates flipped and/or rotated (a symmetry of the square)."""
    coords = instance["coords"]
    x, y = coords[..., 0] * sx, coords[..., 1] * sy
    return {**instance, "coords": torch.stack((y, x) if swap else (x, y), dim=-1)}


def constant_factor(method: BoundMethod, f: float) -> BoundMethod:
    """`method`'s model with lambda = f times its 1/sqrt(d) at every n (the lambda sweep's rule)."""
    base = method.rule
    return dataclasses.replace(method, rule=ScalingRule(f"x{f:g}", base.d, lambda n: base(n) * f))


def constant_key(f: float) -> str:
    """The name a constant factor f (lambda = f/sqrt(d), `constant_factor`) goes by in result tables."""
    return f"const_{f:g}"


def method_label(key: str) -> str:
    """The label of a registered method, or of a constant factor's key (`constant_key`): λ = f/√d."""
    return f"λ = {key.removeprefix('const_')}/√d" if key.startswith("const_") else label(key)


@torch.no_grad()
def mode_costs(model: AttentionModel, instance: dict, method: BoundMethod | None, mode: str, seed: int = 0,
               chunk: int = 4096) -> torch.Tensor:
    """Per-instance costs (B,) of `model` with `method` applied, decoded in `mode` (`parse_mode`);
    `chunk` bounds the solutions decoded at once (instances x K)."""
    kind, k = parse_mode(mode)
    instance = model.problem.check_instance(instance)
    if kind == "greedy":
        return greedy_costs(model, instance, method, chunk=chunk)
    if kind == "augment":
        if "coords" not in instance:
            raise ValueError(f"{model.problem.name} instances have no coordinates to transform: use greedy or sample<K>")
        costs = torch.stack([greedy_costs(model, symmetric(instance, *s), method, chunk=chunk) for s in SYMMETRIES])
        return costs.min(0).values
    return _sampled(model, instance, method, k, seed, chunk)[0].min(0).values


@torch.no_grad()
def sampled_costs(model: AttentionModel, instance: dict, method: BoundMethod | None, k: int, seed: int = 0,
                  chunk: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    """The costs and summed log-likelihoods, both (K, B), of K solutions per instance drawn from
    `model` with `method` applied (the draws of `mode_costs`' "sample<K>" with the same seed and
    chunk; each instance encoded once). Every solution passes the problem's feasibility check. The
    mean of -log-likelihood / steps estimates the entropy per step of the policy's solutions."""
    return _sampled(model, model.problem.check_instance(instance), method, k, seed, chunk)


def _sampled(model: AttentionModel, instance: CheckedInstance, method: BoundMethod | None, k: int, seed: int,
             chunk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """`sampled_costs` on an instance already checked."""
    batch = next(iter(instance.values())).shape[0]
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    per_chunk = max(1, chunk // k)
    costs, log_likelihoods = [], []
    model.eval()
    with method_applied(model, method):
        for start in range(0, batch, per_chunk):
            part = CheckedInstance({key: value[start:start + per_chunk].to(device) for key, value in instance.items()})
            seen = part if method is None else method.seen_by_model(part, model.problem)
            solution, log_likelihood = model.rollout(seen, "sample", generator, copies=k)  # each instance encoded once
            repeated = CheckedInstance({key: value.repeat(k, *([1] * (value.dim() - 1))) for key, value in part.items()})
            model.problem.check(repeated, solution)
            costs.append(model.problem.cost(repeated, solution).view(k, -1))
            log_likelihoods.append(log_likelihood.view(k, -1))
    return torch.cat(costs, 1), torch.cat(log_likelihoods, 1)
