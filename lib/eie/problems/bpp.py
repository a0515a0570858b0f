"""Offline 3D bin packing (Section 5.1 of the EIE paper), as attend2pack (Zhang et al. 2021) decides it.

n boxes with integer edges uniform in 10..50 go into a bin of footprint L x W and open height; boxes
are axis-aligned (six orientations), inside the footprint and never overlap. The goal is the lowest
packed height; the metric is the load rate 100 * (total box volume) / (L * W * H_max), higher is
better. `cost` returns minus the load rate (the training loop minimises), `maximise = True` tells
the evaluation to report the load rate itself.

Each step takes two decisions:
1. the **sequence policy** (the Attention Model's decoder: glimpse and pointer over the boxes not yet
   packed, with the injected attention scale) points to the next box;
2. the **placement policy** (`PlacementHead`) chooses the orientation (one of six) and the x
   coordinate (along L) of the box's corner. A rule fixes the rest: y (along W) is the position
   where the box rests lowest for that orientation and x (the smallest such y on ties), and the box
   drops to the highest point under its footprint (z).
The bin state seen by both is the top-view height map: the step context encodes the last two height
maps (attend2pack's frontier, here relative to the current lowest cell and in units of the largest
box edge, so the context does not drift as the packing grows) with 3 convolutions (2 -> 4 -> 4 -> 4
channels, kernel 3, stride 2, padding 1).

A solution is (B, n, 7) integers per placed box, in packing order: box index, corner x, y, z and
extent along x, y, z. `check` verifies, vectorised over the batch, that each box is packed once in
one of its orientations, inside the footprint, with no two boxes overlapping.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from torch import nn

from .base import CheckedInstance, InfeasibleSolution, Problem, StepContext, first_bad
from .bpp_heuristics import best_heuristic_costs, rule_choices
from .heightmap import lowest_placements, oriented, place, resting_heights

MIN_EDGE, MAX_EDGE = 10, 50
FRONTIER_CHANNELS_LAST = True  # the frontier's memory layout (False: the plain one, for benchmarks)
PAIR_BUDGET = 2**26  # box pairs compared at once by the overlap check
RULE_LR = 1e-3  # the learning rate of `BPP.teach_action_rule`'s imitation


@dataclass(frozen=True)
class BPPState:
    dims: torch.Tensor  # (B, n, 3) box edges
    heights: torch.Tensor  # (B, L, W) current height map
    previous: torch.Tensor  # (B, L, W) height map before the last box
    packed: torch.Tensor  # (B, n) bool
    placements: torch.Tensor  # (B, step, 7) long

    @property
    def step(self) -> int:
        return self.placements.shape[1]

    @property
    def done(self) -> bool:
        return self.step == self.dims.shape[1]

    def mask(self) -> torch.Tensor:
        return self.packed

    def retired(self) -> torch.Tensor:
        return self.packed

    def edges_of(self, box: torch.Tensor) -> torch.Tensor:
        """(B, 3) edges of the chosen boxes (B,)."""
        return self.dims.gather(1, box[:, None, None].expand(-1, 1, 3))[:, 0]

    def candidates(self, box: torch.Tensor):
        """For the chosen boxes (B,): each orientation's extents (B, 6, 3) and resting heights at
        every corner (B, 6, L, W), inf where the box would stick out (the heuristics' full map)."""
        dims = self.edges_of(box)
        return oriented(dims), resting_heights(self.heights, dims)

    def placement_options(self, box: torch.Tensor):
        """For the chosen boxes (B,): each orientation's extents (B, 6, 3) and, at every corner column x,
        the lowest resting height over y, the y that reaches it and the trapped volume there, (B, 6, L)
        each (`heightmap.lowest_placements`)."""
        dims = self.edges_of(box)
        return (oriented(dims), *lowest_placements(self.heights, dims))

    def update(self, action: torch.Tensor) -> "BPPState":
        """action (B, 4): box, orientation, x, y."""
        box, orientation, x, y = action.unbind(1)
        extents = oriented(self.edges_of(box))
        extent = extents.gather(1, orientation[:, None, None].expand(-1, 1, 3))[:, 0]
        heights, z = place(self.heights, x, y, extent)
        row = torch.stack([box, x, y, z.long(), extent[:, 0], extent[:, 1], extent[:, 2]], dim=1)
        return BPPState(self.dims, heights, self.heights, self.packed.scatter(1, box[:, None], True),
                        torch.cat([self.placements, row[:, None]], dim=1))

    def solution(self) -> torch.Tensor:
        return self.placements

    @functools.cached_property
    def floor(self) -> torch.Tensor:
        """(B,) float32: the height of the lowest cell."""
        return self.heights.flatten(1).amin(1).to(torch.float32)

    @functools.cached_property
    def frontier(self) -> torch.Tensor:
        """(B, 2, L, W): the last two height maps, relative to the current lowest cell, / MAX_EDGE;
        computed once per state (the step context and the placement head both read it). Laid out
        channels-last in memory when `FRONTIER_CHANNELS_LAST` (the convolutions run faster so)."""
        batch, length, width = self.heights.shape
        options = {"dtype": torch.float32, "device": self.heights.device}
        if FRONTIER_CHANNELS_LAST:
            maps = torch.empty(batch, length, width, 2, **options).permute(0, 3, 1, 2)
        else:
            maps = torch.empty(batch, 2, length, width, **options)
        floor = self.floor[:, None, None]
        torch.sub(self.heights, floor, out=maps[:, 0])  # integers below 2^24: exact in float32
        torch.sub(self.previous, floor, out=maps[:, 1])
        return maps.div_(MAX_EDGE)

    @functools.cached_property
    def frontier_codes(self) -> dict:
        """{id(encoder): its convolutions' output (B, F) on this state's frontier}, filled by
        `FrontierEncoder.forward` for the encoders that share their convolutions, emptied as they read."""
        return {}


class BoxEmbedding(nn.Module):
    """Linear(box edges / MAX_EDGE)."""

    def __init__(self, dim: int):
        super().__init__()
        self.linear = nn.Linear(3, dim)

    def forward(self, instance: dict) -> torch.Tensor:
        return self.linear(instance["dims"].to(torch.float32) / MAX_EDGE)


class FrontierEncoder(StepContext):
    """3 convolutions (2 -> 4 -> 4 -> 4 channels, kernel 3, stride 2, padding 1), then Linear to dim.

    The model has two (the decoder's step context and the placement head's), with their own weights,
    reading the same frontier at every step. `share_convolutions` lets one run the other's
    convolutions with its own, as one convolution with both weight sets (the second and third layers
    grouped): the same numbers to float rounding, at about half the time of the two on a CPU
    (`benchmarks/bench_placement.py`)."""

    def __init__(self, dim: int, length: int, width: int):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv2d(2, 4, 3, 2, 1), nn.ReLU(), nn.Conv2d(4, 4, 3, 2, 1), nn.ReLU(),
                                  nn.Conv2d(4, 4, 3, 2, 1), nn.ReLU(), nn.Flatten())
        size = lambda s: (s - 1) // 2 + 1  # noqa: E731  (one convolution's output size)
        self.project = nn.Linear(4 * size(size(size(length))) * size(size(size(width))), dim)
        self._shares_with = ()  # a tuple, so that they are not registered as this module's submodules

    def share_convolutions(self, *others: "FrontierEncoder") -> None:
        """At each state this encoder reads first, compute `others`' convolutions too (none: stop)."""
        self._shares_with = others

    def inputs(self, state: BPPState) -> dict:
        return {"frontier": state.frontier}

    def embed(self, inputs: dict, nodes: torch.Tensor | None = None) -> torch.Tensor:
        maps = inputs["frontier"]  # (B, T, 2, L, W)
        return self.project(self.conv(maps.flatten(0, 1))).view(maps.shape[0], maps.shape[1], -1)

    def forward(self, state: BPPState, nodes: torch.Tensor | None = None) -> torch.Tensor:
        """One step: (B, D)."""
        codes = state.frontier_codes
        if id(self) not in codes:
            group = (self, *self._shares_with)
            codes.update(zip(map(id, group), convolve_together(group, state.frontier), strict=True))
        return self.project(codes.pop(id(self)))


def convolve_together(encoders: tuple, maps: torch.Tensor) -> list[torch.Tensor]:
    """Each encoder's `conv` on the same maps (B, 2, L, W), flattened (B, F): one convolution per
    layer with all the encoders' filters stacked, the first on the shared input, the next ones grouped
    (each encoder's filters see only its own channels)."""
    if len(encoders) == 1:
        return [encoders[0].conv(maps)]
    x = maps
    for layer in range(0, 6, 2):  # Conv2d, ReLU; three times
        convs = [encoder.conv[layer] for encoder in encoders]
        weight, bias = torch.cat([c.weight for c in convs]), torch.cat([c.bias for c in convs])
        x = torch.relu(nn.functional.conv2d(x, weight, bias, stride=2, padding=1, groups=1 if layer == 0 else len(encoders)))
    return [part.flatten(1) for part in x.chunk(len(encoders), dim=1)]


class PlacementHead(nn.Module):
    """The placement policy: a distribution over (orientation, x) for the box the sequence policy chose.

    Each candidate is described by the box's extents in that orientation, x, the rule's y, the
    resting height and the empty volume trapped under the box (heights relative to the lowest cell,
    in units of MAX_EDGE); its logit is v . tanh(W_c [box embedding, frontier] + W_f features).
    """

    FEATURES = 7

    def __init__(self, dim: int, length: int, width: int, hidden: int = 64):
        super().__init__()
        self.length, self.width = length, width
        self.frontier = FrontierEncoder(dim, length, width)
        self.context = nn.Linear(2 * dim, hidden)
        self.features = nn.Linear(self.FEATURES, hidden, bias=False)
        self.score = nn.Linear(hidden, 1, bias=False)

    def hidden(self, features: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        """tanh(context + W_f features), (B, 6, L, hidden): the step's largest tensor, so the sum and the
        tanh are taken in place in the output of W_f (no two further tensors of its size per step; this
        works under autograd too, since W_f's backward keeps its input, not its output; the training
        step's time: `benchmarks/bench_placement.py`). The same
        numbers as `torch.tanh(context[:, None, None, :] + self.features(features))`
        (`placement_reference` in the tests)."""
        hidden = self.features(features)
        hidden += context[:, None, None, :]
        return hidden.tanh_()

    def log_probabilities(self, state: BPPState, nodes: torch.Tensor, box: torch.Tensor):
        """For the chosen boxes (B,): (log-probabilities of the 6 L candidates (B, 6 L), orientation-major;
        the rule's y of each (B, 6, L); each candidate's top height (B, 6, L), inf where the box does not
        fit; the empty volume trapped under it (B, 6, L))."""
        batch = box.shape[0]
        extents, low, y, trapped = state.placement_options(box)  # (B, 6, 3), then (B, 6, L) each
        valid = torch.isfinite(low)
        floor = state.floor[:, None, None]
        x = torch.arange(self.length, device=box.device, dtype=torch.float32)[None, None, :].expand(batch, 6, -1)
        extent = extents.to(torch.float32)[:, :, None, :].expand(-1, -1, self.length, -1) / MAX_EDGE
        features = torch.cat([
            extent,
            (x / self.length)[..., None],
            (y.to(torch.float32) / self.width)[..., None],
            ((low - floor).masked_fill(~valid, 0) / MAX_EDGE)[..., None],
            (trapped.masked_fill(~valid, 0) / (MAX_EDGE ** 3))[..., None]], dim=-1)
        chosen = nodes.gather(1, box[:, None, None].expand(-1, 1, nodes.shape[-1]))[:, 0]
        context = self.context(torch.cat([chosen, self.frontier(state)], dim=1))  # (B, hidden)
        logits = self.score(self.hidden(features, context))[..., 0]
        log_p = torch.log_softmax(logits.masked_fill(~valid, float("-inf")).flatten(1), dim=1)
        return log_p, y, low + extents[..., 2, None].to(low.dtype), trapped

    def action(self, box: torch.Tensor, choice: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The action (B, 4) of candidate `choice` (B,) (an index into the 6 L candidates)."""
        cy = y.flatten(1).gather(1, choice[:, None])[:, 0]
        return torch.stack([box, choice // self.length, choice % self.length, cy], dim=1)

    def forward(self, state: BPPState, nodes: torch.Tensor, box: torch.Tensor, decode: str,
                generator: torch.Generator | None = None):
        """Returns (action (B, 4): box, orientation, x, y; log-probability of the placement (B,))."""
        log_p, y, _, _ = self.log_probabilities(state, nodes, box)
        if decode == "greedy":
            choice = log_p.argmax(1)
        else:
            choice = torch.multinomial(log_p.exp(), 1, generator=generator)[:, 0]
        return self.action(box, choice, y), log_p.gather(1, choice[:, None])[:, 0]


class BPP(Problem):
    name = "bpp"
    has_coordinates = False  # boxes have sizes, no positions until packed
    objective_name = "load rate (%)"
    maximise = True  # the reported objective (load rate) is -cost
    reference_name = "best heuristic"
    result_files = ("bpp.csv", "bpp_instance_load_rates.npz")

    def __init__(self, length: int = 120, width: int = 100):
        if not (MAX_EDGE <= length <= 1000 and MAX_EDGE <= width <= 1000):
            raise ValueError(f"the bin footprint must be between {MAX_EDGE} and 1000 cells per side (every box "
                             f"must fit in any orientation), got {length} x {width}")
        self.length, self.width = int(length), int(width)

    @property
    def setting(self) -> str:
        return f"{self.length}x{self.width}"

    def generate(self, batch: int, n: int, generator: torch.Generator | None = None, device="cpu") -> dict:
        if n < 1 or batch < 1:
            raise ValueError(f"a packing batch needs n >= 1 boxes and batch >= 1, got n={n}, batch={batch}")
        dims = torch.randint(MIN_EDGE, MAX_EDGE + 1, (batch, n, 3), generator=generator, device="cpu")  # drawn on the CPU
        return CheckedInstance(dims=dims.to(device))

    instance_fields = {"dims": (3, "integer")}

    def check_values(self, instance: dict) -> None:
        """Box edges are integers in [1, MAX_EDGE] cells (the footprint is at least MAX_EDGE per side,
        so every box fits in any orientation)."""
        dims = instance["dims"]
        bad = first_bad((dims >= 1) & (dims <= MAX_EDGE))
        if bad is not None:
            raise ValueError(f"bin-packing instance {bad[0]}, field 'dims' at box {bad[1]}, edge {bad[2]}: "
                             f"{dims[bad].item()} is outside [1, {MAX_EDGE}] cells")

    def size(self, instance: dict) -> int:
        return instance["dims"].shape[1]

    def positions(self, instance: dict) -> None:
        """Boxes have no positions before they are packed."""
        return None

    def reference_costs(self, instance: dict, **options):
        """Costs (minus load rates) of the best sort-then-place heuristic (`bpp_heuristics`)."""
        self.check_instance(instance)
        return best_heuristic_costs(self, instance, **options)

    def initial_state(self, instance: dict) -> BPPState:
        dims = instance["dims"]
        batch, n = dims.shape[:2]
        heights = torch.zeros(batch, self.length, self.width, dtype=torch.long, device=dims.device)
        return BPPState(dims, heights, heights, torch.zeros(batch, n, dtype=torch.bool, device=dims.device),
                        torch.zeros(batch, 0, 7, dtype=torch.long, device=dims.device))

    def load_rate(self, instance: dict, solution: torch.Tensor) -> torch.Tensor:
        """100 * total box volume / (L * W * packed height), per instance."""
        volume = instance["dims"].to(torch.float64).prod(-1).sum(1)
        top = (solution[..., 3] + solution[..., 6]).amax(1).to(torch.float64)
        return (100 * volume / (self.length * self.width * top)).to(torch.float32)

    def cost(self, instance: dict, solution: torch.Tensor) -> torch.Tensor:
        return -self.load_rate(instance, solution)

    def check(self, instance: dict, solution: torch.Tensor) -> None:
        """Each box packed once in one of its orientations, inside the footprint, no overlaps."""
        dims = instance["dims"]
        batch, n = dims.shape[:2]
        if solution.shape != (batch, n, 7):
            raise InfeasibleSolution(f"expected placements of shape {(batch, n, 7)}, got {tuple(solution.shape)}")
        box, corner, extent = solution[..., 0], solution[..., 1:4], solution[..., 4:7]
        bad = (box.sort(1).values != torch.arange(n, device=box.device)).any(1)
        edges = dims.gather(1, box.clamp(0, n - 1)[..., None].expand(-1, -1, 3))
        bad |= (extent.sort(-1).values != edges.sort(-1).values).any(-1).any(1)
        bad |= (corner < 0).any(-1).any(1)
        bad |= (corner[..., 0] + extent[..., 0] > self.length).any(1) | (corner[..., 1] + extent[..., 1] > self.width).any(1)
        low, high = corner, corner + extent
        rows = max(1, PAIR_BUDGET // (n * n))
        for start in range(0, batch, rows):  # bounded memory: (rows, n, n) pairs at a time
            lo, hi = low[start:start + rows], high[start:start + rows]
            overlap = ((lo[:, :, None] < hi[:, None]) & (lo[:, None] < hi[:, :, None])).all(-1)
            overlap &= ~torch.eye(n, dtype=torch.bool, device=overlap.device)
            bad[start:start + rows] |= overlap.flatten(1).any(1)
        if bool(bad.any()):
            raise InfeasibleSolution(f"packings must place each box once, inside the {self.length} x {self.width} "
                                     f"footprint, without overlaps; instances {bad.nonzero()[:5, 0].tolist()} do not")

    def teach_action_rule(self, model: nn.Module, steps: int, n: int, batch: int,
                          generator: torch.Generator, device="cpu") -> float:
        """(A problem with a hand-written rule for its action head has this method; `TrainConfig`'s
        `rule_warm_start` calls it.) Teach the placement head the heuristics' rule
        (`bpp_heuristics.rule_choices`: the box's top ends lowest, the least trapped volume on ties) by
        imitation, before any reinforcement: packings of `batch` fresh instances of `n` boxes, taken in
        the order generated (a uniformly random one) and placed by the rule; at each box one Adam step
        (learning rate `RULE_LR`, its own optimiser) on minus the log of the probability the head gives
        the candidates whose top ends lowest, until `steps` steps. The encoder and pointer are not
        changed (the box encodings are read without gradients). Returns the share of the last
        packing's boxes whose greedy choice was one of those."""
        head = model.action_head
        optimiser = torch.optim.Adam(head.parameters(), lr=RULE_LR)
        done = 0
        while done < steps:
            instances = self.generate(batch, n, generator, device)
            with torch.no_grad():
                nodes = model.encode(instances)
            state, hits, seen = self.initial_state(instances), 0, 0
            for step in range(n):
                if done == steps:
                    break
                box = torch.full((batch,), step, dtype=torch.long, device=nodes.device)
                log_p, y, top, trapped = head.log_probabilities(state, nodes, box)
                lowest, rule = rule_choices(top, trapped)
                loss = -torch.logsumexp(log_p.masked_fill(~lowest, float("-inf")), dim=1).mean()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
                done += 1
                hits += int(lowest.gather(1, log_p.detach().argmax(1, keepdim=True)).sum())
                seen += batch
                state = state.update(head.action(box, rule, y))
        return hits / max(seen, 1)

    def make_node_embedding(self, dim: int) -> nn.Module:
        return BoxEmbedding(dim)

    def make_step_context(self, dim: int) -> nn.Module:
        return FrontierEncoder(dim, self.length, self.width)

    def make_action_head(self, dim: int, step_context: nn.Module | None = None) -> nn.Module:
        """The placement head; given the model's step context (a `FrontierEncoder`), that one runs the
        head's frontier convolutions with its own at each step (`FrontierEncoder.share_convolutions`)."""
        head = PlacementHead(dim, self.length, self.width)
        if step_context is not None:
            step_context.share_convolutions(head.frontier)
        return head
