"""The problem interface that the model, the training loop and the evaluation rely on.

A problem is a small stateless object. Instances are dicts of batched tensors; decoding state is a
problem-specific dataclass updated functionally (`state.update(action)` returns a new state).

    instance = problem.generate(batch, n, generator)      # seeded
    state = problem.initial_state(instance)
    while not state.done:
        mask = state.mask()                                 # (B, n_choices) True = not allowed now
        state = state.update(action)                         # action: (B,) long
    cost = problem.cost(instance, state.solution())         # (B,), lower is better
    problem.check(instance, state.solution())                # raises InfeasibleSolution

The model asks the problem for the two pieces that differ between problems:
`problem.make_node_embedding(dim)` (input features -> node embeddings) and
`problem.make_step_context(dim)` (decoding state -> the step part of the decoder's query).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import nn


class InfeasibleSolution(ValueError):
    """A finished solution that breaks the problem's constraints."""


class Problem(Protocol):
    name: str

    def generate(self, batch: int, n: int, generator: torch.Generator | None = None, device="cpu") -> dict: ...

    def size(self, instance: dict) -> int:
        """The problem size n the scaling rules see for this instance."""
        ...

    def positions(self, instance: dict) -> torch.Tensor | None:
        """(B, nodes, 2) coordinates of the encoded nodes, or None (what position-aware attention sees)."""
        ...

    def permute(self, instance: dict, generator: torch.Generator) -> tuple[dict, torch.Tensor]:
        """The instance with its interchangeable nodes in a random order, and `order` such that node
        i of the permuted instance is node order[i] of the original (over the encoded nodes, so
        encode(permuted) == encode(instance)[:, order] for an equivariant model; Theorem 1)."""
        ...

    def initial_state(self, instance: dict): ...

    def cost(self, instance: dict, solution: torch.Tensor) -> torch.Tensor: ...

    def check(self, instance: dict, solution: torch.Tensor) -> None: ...

    def make_node_embedding(self, dim: int) -> nn.Module: ...

    def make_step_context(self, dim: int) -> nn.Module: ...


def reorder(instance: dict, order: torch.Tensor) -> dict:
    """Every tensor of a batched instance with its node axis (axis 1) taken in `order`."""
    return {key: value[:, order.to(value.device)] for key, value in instance.items()}


def take(instance: dict, index: torch.Tensor | slice) -> dict:
    """Rows `index` of every tensor in a batched instance."""
    return {key: value[index] for key, value in instance.items()}
