"""The problem interface: everything the model, the training loop, the evaluation, the probes and
the result files rely on, declared in one place (`Problem`, `State`).

A problem is a small stateless object. Instances are dicts of batched tensors whose axis 1 runs over
the nodes; decoding state is a problem-specific object updated functionally (`State`):

    instance = problem.generate(batch, n, generator)      # seeded
    state = problem.initial_state(instance)
    while not state.done:
        mask = state.mask()                                 # (B, n_choices) True = not allowed now
        state = state.update(action)                         # action: (B,) long (or (B, k) with a second decision)
    cost = problem.cost(instance, state.solution())         # (B,), lower is better
    problem.check(instance, state.solution())                # raises InfeasibleSolution

What differs between problems and what the rest of the study asks of them:
- model pieces: `make_node_embedding(dim)`, `make_step_context(dim)` (a `StepContext`), and optionally
  `make_action_head(dim, step_context)` (a second decision per step after the pointer, e.g. bin
  packing's placement; None: there is none);
- `size(instance)`: the n the scaling rules see; `positions(instance)`: node coordinates for
  position-aware attention (None: the nodes have none); `permute(instance, generator)`: the
  instance with its interchangeable nodes reordered (Theorem 1 checks);
- reporting: `maximise` (the reported objective is -cost and higher is better), `setting` (the
  label of this instance of the problem in tables and checkpoint names: "" or "C10" or "120x100"),
  `reference_name` and `reference_costs(instance, **options)` (the classical solver every gap is
  measured against), `result_files` (the table and per-instance files a run writes).

A problem knows the problem only; which of its settings a study trains, with which learning rate,
is the experiment's (`eie.experiments`). A fourth problem is one module subclassing `Problem`, one
line in `eie.problems.PROBLEMS`, and its training experiment.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import nn


class State(Protocol):
    """A batched decoding state."""

    @property
    def done(self) -> bool: ...

    def mask(self) -> torch.Tensor:
        """(B, n_choices) bool, True where the next action is not allowed."""
        ...

    def retired(self) -> torch.Tensor:
        """Optional. (B, n_choices) bool, True for choices that can never be allowed again in this
        episode (visited cities, served destinations, packed boxes): a long greedy decoding drops
        them from its key cache (`AttentionModel.rollout`). A subset of `mask()`."""
        ...

    def update(self, action: torch.Tensor) -> "State": ...

    def solution(self) -> torch.Tensor: ...


class StepContext(nn.Module):
    """The decoder's per-step context (what the query adds to the graph embedding), in two parts so
    that a whole solution's steps can be replayed at once (`AttentionModel.sample_with_gradients`):

    - `inputs(state)`: what it reads from a decoding state, a dict of tensors with the batch first
      (indices, remaining capacity, height maps; no gradient flows into them);
    - `embed(inputs, nodes)`: (B, T, D) from those inputs stacked over T steps (B, T, ...) and the
      node embeddings (B, n, D).

    Calling it on a state is one step: (B, D)."""

    def inputs(self, state) -> dict:
        raise NotImplementedError

    def embed(self, inputs: dict, nodes: torch.Tensor | None) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, state, nodes: torch.Tensor | None = None) -> torch.Tensor:
        return self.embed({key: value[:, None] for key, value in self.inputs(state).items()}, nodes)[:, 0]


class InfeasibleSolution(ValueError):
    """A finished solution that breaks the problem's constraints."""


class CheckedInstance(dict):
    """A batch known to be valid: made by a problem's own `generate`, or returned by
    `Problem.check_instance`. The decoding loop and the chunks of an evaluation skip the check on it
    (a check reads values back from the device); the public entry points (`greedy_costs`, the
    reference solvers, the decoding modes) check whatever they are given once."""


def first_bad(ok: torch.Tensor) -> tuple[int, ...] | None:
    """The index of the first False entry of `ok`, or None when all are True."""
    if bool(ok.all()):
        return None
    return tuple(int(i) for i in (~ok).nonzero()[0])


class Problem:
    """Base class of the study's problems; subclasses fill in the methods that raise."""

    name: str = ""
    has_coordinates: bool = True  # its nodes have positions in the plane (what a distance bias or rescaling uses)
    objective_name: str = "cost"  # what the tables report, e.g. "tour length"
    maximise: bool = False
    reference_name: str = "reference"

    @property
    def setting(self) -> str:
        """This problem's settings as a label ("" when it has none worth naming)."""
        return ""

    @property
    def result_files(self) -> tuple[str, str]:
        """(results table, per-instance objectives) a run writes to results/<run>/."""
        return f"{self.name}.csv", f"{self.name}_instance_costs.npz"

    def generate(self, batch: int, n: int, generator: torch.Generator | None = None, device="cpu") -> dict:
        raise NotImplementedError

    # field -> (trailing size or None, "float" or "integer"): what `check_instance` requires of each tensor
    instance_fields: dict = {}

    def check_instance(self, instance: dict) -> dict:
        """Raise ValueError, naming the instance index, the field and the bad value, unless `instance`
        is a batch this problem can decode and cost: a dict of tensors with the fields of
        `instance_fields`, of the right dtype and shape, the same batch and node counts, finite
        values, and the ranges of `check_values`. Returns it as a `CheckedInstance` (checked again
        if it was one: a generated batch may have been changed in place since)."""
        if not isinstance(instance, dict):
            raise ValueError(f"a {self.name} instance is a dict of tensors with keys {sorted(self.instance_fields)}, "
                             f"got {type(instance).__name__}")
        missing = [key for key in self.instance_fields if key not in instance]
        if missing:
            raise ValueError(f"a {self.name} instance needs the fields {sorted(self.instance_fields)}; "
                             f"missing {missing} (got {sorted(instance)})")
        shape = None
        for key, (trailing, kind) in self.instance_fields.items():
            value = instance[key]
            if not torch.is_tensor(value):
                raise ValueError(f"{self.name} field {key!r} must be a torch tensor, got {type(value).__name__}")
            want = 2 if trailing is None else 3
            if value.dim() != want or (trailing is not None and value.shape[-1] != trailing):
                expected = "(batch, nodes)" if trailing is None else f"(batch, nodes, {trailing})"
                raise ValueError(f"{self.name} field {key!r} must have shape {expected}, got {tuple(value.shape)}")
            if kind == "float" and value.dtype != torch.float32:
                raise ValueError(f"{self.name} field {key!r} must be float32, got {value.dtype} "
                                 f"(convert with .float())")
            if kind == "integer" and (value.dtype.is_floating_point or value.dtype == torch.bool or value.is_complex()):
                raise ValueError(f"{self.name} field {key!r} must hold integers (e.g. torch.long), got {value.dtype}")
            if shape is not None and tuple(value.shape[:2]) != shape:
                raise ValueError(f"{self.name} fields disagree on (batch, nodes): {shape} and {key!r} "
                                 f"{tuple(value.shape[:2])}")
            shape = tuple(value.shape[:2])
            if shape[0] < 1:
                raise ValueError(f"{self.name} instance batch is empty (field {key!r} has shape {tuple(value.shape)})")
            if kind == "float":
                bad = first_bad(torch.isfinite(value))
                if bad is not None:
                    raise ValueError(f"{self.name} instance {bad[0]}, field {key!r} at {bad[1:]}: "
                                     f"{value[bad].item()} is not finite")
        self.check_values(instance)
        return CheckedInstance(instance)

    def check_values(self, instance: dict) -> None:
        """Problem-specific ranges (shapes, dtypes and finiteness are checked before): raise
        ValueError naming the instance, field and value. Default: none."""

    def max_steps(self, instance: dict) -> int:
        """The most decoding steps a feasible solution of `instance` can take: a decoding loop that
        goes past it stops with an error instead of running on. Default: one step per node."""
        return next(iter(instance.values())).shape[1]

    def size(self, instance: dict) -> int:
        """The problem size n the scaling rules see for this instance."""
        raise NotImplementedError

    def positions(self, instance: dict) -> torch.Tensor | None:
        """(B, nodes, 2) coordinates of the encoded nodes, or None."""
        return None

    def scale_coordinates(self, instance: dict, factor: float) -> dict:
        """The instance with its node coordinates ("coords", in [-1, 1]^2) multiplied by `factor`
        about the square's centre: what a model sees under test-time coordinate rescaling."""
        if "coords" not in instance:
            raise ValueError(f"{self.name} instances have no coordinates to rescale (keys: {sorted(instance)})")
        return {**instance, "coords": instance["coords"] * factor}

    def permute(self, instance: dict, generator: torch.Generator) -> tuple[dict, torch.Tensor]:
        """The instance with its interchangeable nodes in a random order, and `order` such that node
        i of the permuted instance is node order[i] of the original (over the encoded nodes, so
        encode(permuted) == encode(instance)[:, order] for an equivariant model; Theorem 1).
        Default: every node is interchangeable."""
        order = torch.randperm(self.size(instance), generator=generator, device="cpu")
        return reorder(instance, order), order

    def initial_state(self, instance: dict) -> State:
        raise NotImplementedError

    def cost(self, instance: dict, solution: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def check(self, instance: dict, solution: torch.Tensor) -> None:
        raise NotImplementedError

    def reference_costs(self, instance: dict, **options) -> np.ndarray:
        """Costs (same sign as `cost`) of the classical reference solver on every instance."""
        raise NotImplementedError(f"no reference solver for {self.name!r}")

    def make_node_embedding(self, dim: int) -> nn.Module:
        raise NotImplementedError

    def make_step_context(self, dim: int) -> StepContext:
        raise NotImplementedError

    def make_action_head(self, dim: int, step_context: StepContext | None = None) -> nn.Module | None:
        """A second decision per step after the pointer, or None. `step_context`: the model's own (from
        `make_step_context`), for a head that shares work with it."""
        return None


def reorder(instance: dict, order: torch.Tensor) -> dict:
    """Every tensor of a batched instance with its node axis (axis 1) taken in `order`."""
    return {key: value[:, order.to(value.device)] for key, value in instance.items()}


def take(instance: dict, index: torch.Tensor | slice) -> dict:
    """Rows `index` of every tensor in a batched instance."""
    return {key: value[index] for key, value in instance.items()}
