"""The travelling salesman problem: n cities uniform in [-1, 1]^2 (as in the EIE paper); cost is the
length of the closed tour."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..solvers import lkh_tsp_tours
from .base import CheckedInstance, InfeasibleSolution, Problem, StepContext


@dataclass(frozen=True)
class TSPState:
    """Batched decoding state: the first and last city, the visited set, the tour so far."""

    first: torch.Tensor  # (B,) long, -1 before the first step
    last: torch.Tensor  # (B,) long
    visited: torch.Tensor  # (B, n) bool
    tour: torch.Tensor  # (B, step) long

    @property
    def step(self) -> int:
        return self.tour.shape[1]

    @property
    def done(self) -> bool:
        return self.step == self.visited.shape[1]

    def mask(self) -> torch.Tensor:
        return self.visited

    def retired(self) -> torch.Tensor:
        return self.visited

    def update(self, action: torch.Tensor) -> "TSPState":
        first = action if self.step == 0 else self.first
        visited = self.visited.scatter(1, action[:, None], True)
        return TSPState(first, action, visited, torch.cat([self.tour, action[:, None]], dim=1))

    def solution(self) -> torch.Tensor:
        return self.tour


class TSPStepContext(StepContext):
    """[first city, last city] embeddings; a learned placeholder before the first step (Kool et al.)."""

    def __init__(self, dim: int):
        super().__init__()
        self.placeholder = nn.Parameter(torch.empty(2 * dim).uniform_(-1, 1))
        self.project = nn.Linear(2 * dim, dim, bias=False)

    def inputs(self, state: TSPState) -> dict:
        return {"first": state.first, "last": state.last}

    def embed(self, inputs: dict, nodes: torch.Tensor) -> torch.Tensor:
        first, last = inputs["first"], inputs["last"]  # (B, T), -1 before the first step
        batch, steps = first.shape
        index = torch.stack([first, last], dim=2).clamp(min=0).view(batch, 2 * steps, 1)
        picked = nodes.gather(1, index.expand(-1, -1, nodes.shape[-1])).view(batch, steps, -1)
        return self.project(torch.where((first < 0)[..., None], self.placeholder, picked))


class TSPNodeEmbedding(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(2, dim)

    def forward(self, instance: dict) -> torch.Tensor:
        return self.linear(instance["coords"])


class TSP(Problem):
    name = "tsp"
    objective_name = "tour length"
    reference_name = "LKH"
    instance_fields = {"coords": (2, "float")}

    def generate(self, batch: int, n: int, generator: torch.Generator | None = None, device="cpu") -> dict:
        if n < 2 or batch < 1:
            raise ValueError(f"a TSP batch needs n >= 2 cities and batch >= 1, got n={n}, batch={batch}")
        # drawn on the CPU (the seeded generator's device): the same instances on any device
        coords = torch.rand(batch, n, 2, generator=generator, device="cpu") * 2 - 1
        return CheckedInstance(coords=coords.to(device))

    def check_values(self, instance: dict) -> None:
        if instance["coords"].shape[1] < 2:
            raise ValueError(f"a TSP instance needs at least 2 cities, got {instance['coords'].shape[1]}")

    def size(self, instance: dict) -> int:
        return instance["coords"].shape[1]

    def positions(self, instance: dict) -> torch.Tensor:
        """(B, n, 2) city coordinates, for attention methods that use positions."""
        return instance["coords"]

    def initial_state(self, instance: dict) -> TSPState:
        coords = instance["coords"]
        batch, n = coords.shape[:2]
        empty = torch.full((batch,), -1, dtype=torch.long, device=coords.device)
        visited = torch.zeros(batch, n, dtype=torch.bool, device=coords.device)
        return TSPState(empty, empty, visited, torch.zeros(batch, 0, dtype=torch.long, device=coords.device))

    def cost(self, instance: dict, solution: torch.Tensor) -> torch.Tensor:
        ordered = instance["coords"].gather(1, solution[..., None].expand(-1, -1, 2))
        return (ordered - ordered.roll(-1, dims=1)).norm(dim=-1).sum(1)

    def check(self, instance: dict, solution: torch.Tensor) -> None:
        batch, n = instance["coords"].shape[:2]
        if solution.shape != (batch, n):
            raise InfeasibleSolution(f"expected tours of shape {(batch, n)}, got {tuple(solution.shape)}")
        expected = torch.arange(n, device=solution.device).expand(batch, -1)
        bad = (solution.sort(dim=1).values != expected).any(1).nonzero()[:, 0]
        if len(bad):
            raise InfeasibleSolution(f"TSP tours must visit each of the {n} cities once; instances {bad[:5].tolist()} do not")

    def reference_costs(self, instance: dict, runs: int = 1):
        """The lengths of LKH's tours (`eie.solvers.lkh_tsp_tours`), each checked."""
        instance = self.check_instance(instance)
        coords = instance["coords"].detach().cpu()
        tours = lkh_tsp_tours(coords, runs=runs)
        self.check({"coords": coords}, tours)
        return self.cost({"coords": coords}, tours).numpy()

    def make_node_embedding(self, dim: int) -> nn.Module:
        return TSPNodeEmbedding(dim)

    def make_step_context(self, dim: int) -> nn.Module:
        return TSPStepContext(dim)
