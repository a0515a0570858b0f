"""The capacitated vehicle routing problem (Section 5.3 of the EIE paper).

n destinations and one depot, coordinates uniform in [-1, 1]^2, demands uniform in [0, 1) (torch.rand:
a demand of exactly 0, about once in 2^24 draws, is a valid destination that loads nothing), unlimited
vehicles of capacity C_v. Node 0 is the depot. A solution is the sequence of visited nodes; a
vehicle leaves the depot, serves destinations while its load allows and returns; the cost is the
total distance, returns included. Finished instances are padded with depot visits (zero distance).

Node features are (x, y, demand / C_v): the paper's (x, y, demand) up to the constant 1/C_v of each
model, which keeps the inputs the same size for every capacity. The decoder's step context is the
current node's embedding and the remaining capacity as a fraction of C_v (Kool et al.).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from ..solvers import hgs_cvrp_solutions
from .base import CheckedInstance, InfeasibleSolution, Problem, StepContext, first_bad, reorder

DEPOT = 0
_EPS = 1e-6
DONE_CHECK_EVERY = 8  # decoding steps between two reads of "all finished" once it can be true


@dataclass(frozen=True)
class CVRPState:
    demand: torch.Tensor  # (B, n + 1), zero at the depot, in units of C_v
    current: torch.Tensor  # (B,) long
    remaining: torch.Tensor  # (B,) capacity left, in units of C_v
    visited: torch.Tensor  # (B, n + 1) bool (the depot entry stays False)
    tour: torch.Tensor  # (B, step) long

    @property
    def step(self) -> int:
        return self.tour.shape[1]

    @property
    def finished(self) -> torch.Tensor:
        """(B,) all destinations served and back at the depot."""
        return self.visited[:, 1:].all(1) & (self.current == DEPOT)

    @property
    def done(self) -> bool:
        """Every instance finished. Read back from the device (a host synchronisation on a GPU) only
        from the first step at which that is possible (n + 1: every destination and the return) and
        then every `DONE_CHECK_EVERY` steps; finished instances meanwhile stay at the depot (zero
        distance, log-probability 0), so costs and likelihoods do not depend on when it is read."""
        after = self.step - self.visited.shape[1]
        return after >= 0 and after % DONE_CHECK_EVERY == 0 and bool(self.finished.all())

    def retired(self) -> torch.Tensor:
        """Served destinations (the depot is never retired)."""
        return self.visited

    def mask(self) -> torch.Tensor:
        """(B, n + 1) True = not allowed now."""
        too_big = self.demand > self.remaining[:, None] + _EPS
        mask = self.visited | too_big
        all_served = self.visited[:, 1:].all(1)
        depot_forbidden = (self.current == DEPOT) & ~all_served
        mask[:, DEPOT] = depot_forbidden
        mask[all_served, 1:] = True  # nothing left: only the depot
        return mask

    def update(self, action: torch.Tensor) -> "CVRPState":
        at_depot = action == DEPOT
        served = self.demand.gather(1, action[:, None])[:, 0]
        remaining = torch.where(at_depot, torch.ones_like(self.remaining), self.remaining - served)
        visited = self.visited.scatter(1, action[:, None], True)
        visited[:, DEPOT] = False
        return CVRPState(self.demand, action, remaining, visited, torch.cat([self.tour, action[:, None]], dim=1))

    def solution(self) -> torch.Tensor:
        return self.tour


class CVRPNodeEmbedding(nn.Module):
    """Destinations: Linear(x, y, demand / C_v); the depot: its own Linear(x, y)."""

    def __init__(self, dim: int):
        super().__init__()
        self.destinations = nn.Linear(3, dim)
        self.depot = nn.Linear(2, dim)

    def forward(self, instance: dict) -> torch.Tensor:
        features = torch.cat([instance["coords"], instance["demand"][..., None]], dim=-1)
        return torch.cat([self.depot(instance["coords"][:, :1]), self.destinations(features[:, 1:])], dim=1)


class CVRPStepContext(StepContext):
    """[current node embedding, remaining capacity / C_v]."""

    def __init__(self, dim: int):
        super().__init__()
        self.project = nn.Linear(dim + 1, dim, bias=False)

    def inputs(self, state: CVRPState) -> dict:
        return {"current": state.current, "remaining": state.remaining}

    def embed(self, inputs: dict, nodes: torch.Tensor) -> torch.Tensor:
        current = nodes.gather(1, inputs["current"][..., None].expand(-1, -1, nodes.shape[-1]))  # (B, T, D)
        return self.project(torch.cat([current, inputs["remaining"][..., None]], dim=-1))


class CVRP(Problem):
    name = "cvrp"
    objective_name = "total distance"
    reference_name = "HGS"

    def __init__(self, capacity: float = 10.0, size_counts_depot: bool = False):
        if capacity <= 1:
            raise ValueError(f"the vehicle capacity must exceed the largest demand (1), got {capacity}")
        self.capacity = float(capacity)
        self.size_counts_depot = size_counts_depot

    @property
    def setting(self) -> str:
        return f"C{self.capacity:g}"

    def generate(self, batch: int, n: int, generator: torch.Generator | None = None, device="cpu") -> dict:
        """n destinations plus the depot (node 0); demand in units of C_v, zero at the depot."""
        if n < 1 or batch < 1:
            raise ValueError(f"a CVRP batch needs n >= 1 destinations and batch >= 1, got n={n}, batch={batch}")
        # drawn on the CPU (the seeded generator's device): the same instances on any device
        coords = torch.rand(batch, n + 1, 2, generator=generator, device="cpu") * 2 - 1
        demand = torch.rand(batch, n + 1, generator=generator, device="cpu")
        demand[:, DEPOT] = 0.0
        return CheckedInstance(coords=coords.to(device), demand=(demand / self.capacity).to(device))

    instance_fields = {"coords": (2, "float"), "demand": (None, "float")}

    def check_values(self, instance: dict) -> None:
        """The depot (node 0) has no demand; every destination's demand is in [0, 1], in units of the
        capacity C_v (a demand above the capacity can never be served; a zero demand, which the
        generator's uniform draw on [0, 1) yields about once in 2^24 destinations, is visited and loads
        nothing)."""
        demand = instance["demand"]
        if demand.shape[1] < 2:
            raise ValueError(f"a CVRP instance needs the depot and at least one destination, got {demand.shape[1]} nodes")
        bad = first_bad(demand[:, DEPOT] == 0)
        if bad is not None:
            raise ValueError(f"CVRP instance {bad[0]}, field 'demand' at node 0 (the depot): "
                             f"{demand[bad[0], DEPOT].item()} must be 0")
        destinations = demand[:, 1:]
        bad = first_bad((destinations >= 0) & (destinations <= 1 + _EPS))
        if bad is not None:
            raise ValueError(f"CVRP instance {bad[0]}, field 'demand' at node {bad[1] + 1}: {destinations[bad].item():g} "
                             f"is outside [0, 1] (demand in units of the capacity C_v = {self.capacity:g}: "
                             f"not negative and at most the capacity)")

    def max_steps(self, instance: dict) -> int:
        """A destination or the depot at each step, never the depot twice in a row before all are
        served, then waiting at the depot until the batch's finish is read: 2 (n + 1) + DONE_CHECK_EVERY."""
        return 2 * instance["coords"].shape[1] + DONE_CHECK_EVERY

    def size(self, instance: dict) -> int:
        """What the scaling rules see: the destinations, or destinations plus depot (`size_counts_depot`)."""
        return instance["coords"].shape[1] - (0 if self.size_counts_depot else 1)

    def positions(self, instance: dict) -> torch.Tensor:
        """(B, n + 1, 2) coordinates of the depot (row 0) and the destinations, as the nodes are encoded."""
        return instance["coords"]

    def permute(self, instance: dict, generator: torch.Generator) -> tuple[dict, torch.Tensor]:
        """The destinations in a random order; the depot stays node 0."""
        destinations = instance["coords"].shape[1] - 1
        shuffled = 1 + torch.randperm(destinations, generator=generator, device="cpu")
        order = torch.cat([torch.zeros(1, dtype=torch.long, device="cpu"), shuffled])
        return reorder(instance, order), order

    def reference_costs(self, instance: dict, iterations: int | None = 1000, time_limit: float | None = None):
        """The total distances of HGS's solutions (`eie.solvers.hgs_cvrp_solutions`), each checked."""
        instance = self.check_instance(instance)
        data = {"coords": instance["coords"].detach().cpu().double(), "demand": instance["demand"].detach().cpu().double()}
        solutions = hgs_cvrp_solutions(data, self.capacity, iterations=iterations, time_limit=time_limit)
        self.check(data, solutions)
        return self.cost(data, solutions).numpy()

    def initial_state(self, instance: dict) -> CVRPState:
        coords = instance["coords"]
        batch, nodes = coords.shape[:2]
        device = coords.device
        return CVRPState(instance["demand"], torch.zeros(batch, dtype=torch.long, device=device),
                         torch.ones(batch, device=device), torch.zeros(batch, nodes, dtype=torch.bool, device=device),
                         torch.zeros(batch, 0, dtype=torch.long, device=device))

    def cost(self, instance: dict, solution: torch.Tensor) -> torch.Tensor:
        """Total distance from the depot along the solution and back to the depot."""
        coords = instance["coords"]
        depot = torch.zeros(solution.shape[0], 1, dtype=torch.long, device=solution.device)
        path = torch.cat([depot, solution, depot], dim=1)
        points = coords.gather(1, path[..., None].expand(-1, -1, 2))
        return (points[:, 1:] - points[:, :-1]).norm(dim=-1).sum(1)

    def check(self, instance: dict, solution: torch.Tensor) -> None:
        """Each destination served exactly once, no route over capacity (vectorised over the batch)."""
        batch, nodes = instance["coords"].shape[:2]
        counts = torch.zeros(batch, nodes, dtype=torch.long, device=solution.device)
        counts.scatter_add_(1, solution, torch.ones_like(solution))
        bad = (counts[:, 1:] != 1).any(1)
        # Load of each route: cumulative demand, reset at every depot visit.
        demand = instance["demand"].gather(1, solution)
        route = (solution == DEPOT).long().cumsum(1)
        load = torch.zeros(batch, solution.shape[1] + 1, dtype=demand.dtype, device=demand.device).scatter_add_(1, route, demand)
        bad |= (load > 1 + 1e-5).any(1)
        if bool(bad.any()):
            raise InfeasibleSolution(
                f"CVRP solutions must serve each destination once within capacity; instances "
                f"{bad.nonzero()[:5, 0].tolist()} do not")

    def make_node_embedding(self, dim: int) -> nn.Module:
        return CVRPNodeEmbedding(dim)

    def make_step_context(self, dim: int) -> nn.Module:
        return CVRPStepContext(dim)
