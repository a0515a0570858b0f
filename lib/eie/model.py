"""The CO-Transformer: Kool et al.'s Attention Model with LayerNorm (or BatchNorm, `normalization`)
and an injected attention scale.

Encoder: a linear embedding of the node features (from the problem), then `layers` blocks of
    x = LN(x + MHA(x));  x = LN(x + FF(x))        (h = 8 heads of d = 16, width 128, FF 128-512-128)
with no positional encoding, so the whole model is permutation equivariant (Theorem 1).
Decoder: query = W_g mean(nodes) + W_c [problem step context]; a multi-head glimpse over the nodes
still allowed; single-head pointer logits C tanh(q.k / sqrt(D)) with C = 10; masked log-softmax.
A problem with a second decision per step (bin packing's placement) supplies an action head that
completes the pointer's choice; its log-probability joins the solution's log-likelihood.
What does not change within an episode (node keys and values, the graph part of the query) is
computed once per instance (`Decoder.precompute`), so a decoding step costs O(n D) per instance;
a long greedy rollout drops the nodes no instance can choose again from that cache as it goes.

Speed (`benchmarks/`): training's sampled rollout decodes without gradients and then
computes the log-likelihood of all its steps at once (`sample_with_gradients`, `Decoder.replay`);
the encoder's linear layers may run in bfloat16 while training (`encoder_precision`). Every path
keeps a straightforward reference (`reference=True`, `rollout` with gradients) that tests compare.

Every softmax over the nodes (encoder self-attention, the decoder glimpse) goes through one
`eie.attention.Attention` object (`model.attention`), called with an `AttentionContext`: the site,
the encoder layer, the n the rules see and the node positions. Which n: `n_mode` "instance" (the
problem size, default) or "unmasked" (while decoding, the number of nodes the glimpse may still
attend to; the encoder always sees the problem size). The pointer logits keep the 1/sqrt(D) of the
model width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

import torch
from torch import nn

from .attention import Attention, AttentionContext
from .problems.base import CheckedInstance

# What the encoder's linear layers may compute in: "bfloat16" runs them under autocast (a training
# option, `eie.training.TrainConfig.precision`); the attention softmax and the decoder stay float32.
PRECISIONS = ("float32", "bfloat16")
# A rollout over n >= SHRINK_FROM nodes drops the nodes no instance can choose again from its key
# cache, checking SHRINKS times per n steps (each check reads one number from the device). A sampled
# step still draws one random number per node of the instance (`draw`), so its draws do not depend on
# the columns the cache keeps.
SHRINK_FROM = 256
SHRINKS = 32
SHRINK_AT = 0.125  # the share of retired columns that makes a check shrink the cache


# How a pointer turns its compatibilities u (one per node) into logits: "plain" C tanh(u) (Bello et
# al., Kool et al.); "centred" C tanh(u - mean of the allowed u). Softmax ignores a shift common to
# all u, but tanh does not: a common shift of a few units saturates every tanh at once, the policy
# becomes uniform and its gradient vanishes, and nothing pulls it back. Centring removes that
# direction, the logits still depend on the differences of u only and stay within +-C
# (results/cpu_long_v2/README.md, "Bin packing: the pointer's saturation").
POINTER_CLIPS = ("plain", "centred")
# The encoder's normalisation: "layer" (LayerNorm, the EIE paper's), or "batch" (BatchNorm over every
# node of the batch, the default of Kool et al.'s reference code; eval mode uses the running statistics).
NORMALIZATIONS = ("layer", "batch")


@dataclass(frozen=True)
class ModelConfig:
    dim: int = 128
    heads: int = 8
    layers: int = 3
    ff_hidden: int = 512
    tanh_clip: float = 10.0
    pointer_clip: str = "plain"  # POINTER_CLIPS
    normalization: str = "layer"  # NORMALIZATIONS

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def __post_init__(self):
        if self.dim % self.heads:
            raise ValueError(f"the model width {self.dim} must be a multiple of the number of heads {self.heads}")
        if self.pointer_clip not in POINTER_CLIPS:
            raise ValueError(f"pointer_clip must be one of {POINTER_CLIPS}, got {self.pointer_clip!r}")
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"normalization must be one of {NORMALIZATIONS}, got {self.normalization!r}")


def clipped_logits(u: torch.Tensor, blocked: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """A pointer's logits from its compatibilities u (..., n), -inf where `blocked` (True = not
    allowed): C tanh(u), or C tanh(u - mean of the allowed u) with `pointer_clip = "centred"`."""
    if config.pointer_clip == "centred":
        allowed = (~blocked).to(u.dtype)
        u = u - (u * allowed).sum(-1, keepdim=True) / allowed.sum(-1, keepdim=True).clamp(min=1)
    return (config.tanh_clip * torch.tanh(u)).masked_fill(blocked, float("-inf"))


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def heads_of(self, x: torch.Tensor):
        """q, k, v of every head: (B, H, n, d) each (what the probes read too)."""
        batch, n, dim = x.shape
        return self.qkv(x).view(batch, n, 3, self.heads, dim // self.heads).permute(2, 0, 3, 1, 4)

    def forward(self, x: torch.Tensor, attention: Attention, ctx: AttentionContext) -> torch.Tensor:
        batch, n, dim = x.shape
        o = attention(*self.heads_of(x), ctx)  # (B, H, n, d)
        return self.out(o.transpose(1, 2).reshape(batch, n, dim))


class NodeBatchNorm(nn.BatchNorm1d):
    """BatchNorm1d over every node of every instance: x (B, n, D) normalised per feature."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.reshape(-1, x.shape[-1])).view(x.shape)


def normalization(config: ModelConfig) -> nn.Module:
    return nn.LayerNorm(config.dim) if config.normalization == "layer" else NodeBatchNorm(config.dim)


class EncoderLayer(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.attention = MultiHeadSelfAttention(config.dim, config.heads)
        self.norm1 = normalization(config)
        self.ff = nn.Sequential(nn.Linear(config.dim, config.ff_hidden), nn.ReLU(), nn.Linear(config.ff_hidden, config.dim))
        self.norm2 = normalization(config)

    def forward(self, x: torch.Tensor, attention: Attention, ctx: AttentionContext) -> torch.Tensor:
        x = self.norm1(x + self.attention(x, attention, ctx))
        return self.norm2(x + self.ff(x))


@dataclass
class DecoderCache:
    """Per-episode precomputation: node embeddings, graph query, glimpse keys/values, logit keys.

    After `shrink` the keys and values hold m <= n columns: node `columns[b, j]` is column j (the
    decoding step then works on m columns and maps its choice back)."""

    nodes: torch.Tensor  # (B, n, D)
    graph: torch.Tensor  # (B, D)
    glimpse_k_t: torch.Tensor  # (B, H, d, m): the glimpse keys, transposed once for the one-query product
    glimpse_v: torch.Tensor  # (B, H, m, d)
    logit_k_t: torch.Tensor  # (B, D, m): the pointer keys, transposed likewise
    columns: torch.Tensor | None = None  # (B, m) node index of each column; None: all n nodes in order

    @property
    def glimpse_k(self) -> torch.Tensor:
        """(B, H, n, d) view of the glimpse keys."""
        return self.glimpse_k_t.transpose(-1, -2)

    def detach(self) -> "DecoderCache":
        """The same tensors, cut from the autograd graph (no copy)."""
        return DecoderCache(*(None if getattr(self, f.name) is None else getattr(self, f.name).detach()
                              for f in fields(self)))

    def shrink(self, keep: torch.Tensor) -> "DecoderCache":
        """The cache with only columns `keep` (B, m) of its keys and values (indices into its columns)."""
        batch, heads, d, _ = self.glimpse_k_t.shape
        columns = keep if self.columns is None else self.columns.gather(1, keep)
        return DecoderCache(self.nodes, self.graph,
                            self.glimpse_k_t.gather(3, keep[:, None, None, :].expand(-1, heads, d, -1)),
                            self.glimpse_v.gather(2, keep[:, None, :, None].expand(-1, heads, -1, d)),
                            self.logit_k_t.gather(2, keep[:, None, :].expand(-1, self.logit_k_t.shape[1], -1)),
                            columns)

    def repeated(self, copies: int) -> "DecoderCache":
        """The cache of `copies` copies of its batch, copy-major (row c * B + b is row b), as
        `Tensor.repeat` lays out a repeated instance."""
        return DecoderCache(*(None if t is None else t.repeat(copies, *([1] * (t.dim() - 1)))
                              for t in (getattr(self, f.name) for f in fields(self))))

    def columns_of(self, nodes: torch.Tensor) -> torch.Tensor:
        """A (B, n, ...) per-node tensor restricted to the cache's columns (B, m, ...)."""
        if self.columns is None:
            return nodes
        index = self.columns.view(*self.columns.shape, *([1] * (nodes.dim() - 2)))
        return nodes.gather(1, index.expand(-1, -1, *nodes.shape[2:]))


def draw(log_p: torch.Tensor, columns: torch.Tensor | None, n: int, generator: torch.Generator | None) -> torch.Tensor:
    """One action per row (B,) drawn from exp(log_p) (B, m) over the cache's `columns` of n nodes, as
    `torch.multinomial(p, 1)` draws it: argmax of p / q with q ~ Exp(1), one q per node. q is drawn for
    all n nodes whatever the cache keeps, so a shrunk cache draws what the full one would (the dropped
    nodes have p = 0) and leaves `generator` where multinomial leaves it."""
    q = torch.empty(log_p.shape[0], n, device=log_p.device, dtype=log_p.dtype).exponential_(1, generator=generator)
    if columns is not None:
        q = q.gather(1, columns)
    return (log_p.exp() / q).argmax(1)


class Decoder(nn.Module):
    def __init__(self, config: ModelConfig, step_context: nn.Module):
        super().__init__()
        self.config = config
        self.project_nodes = nn.Linear(config.dim, 3 * config.dim, bias=False)
        self.project_graph = nn.Linear(config.dim, config.dim, bias=False)
        self.step_context = step_context
        self.project_out = nn.Linear(config.dim, config.dim, bias=False)

    def precompute(self, nodes: torch.Tensor) -> DecoderCache:
        batch, n, dim = nodes.shape
        heads = self.config.heads
        gk, gv, lk = self.project_nodes(nodes).chunk(3, dim=-1)
        split = lambda t: t.view(batch, n, heads, dim // heads).transpose(1, 2)  # noqa: E731
        return DecoderCache(nodes, self.project_graph(nodes.mean(1)), split(gk).transpose(-1, -2).contiguous(),
                            split(gv).contiguous(), lk.transpose(1, 2).contiguous())

    def log_probs(self, cache: DecoderCache, query: torch.Tensor, blocked: torch.Tensor, attention: Attention,
                  ctx: AttentionContext) -> torch.Tensor:
        """Log-probabilities (B, T, n) of the action at T decoding steps, from their queries (B, T, D)
        and masks `blocked` (B, T, n) (True = not allowed; -inf there). T = 1 is one step; a whole
        solution's steps at once is the replay of `AttentionModel.sample_with_gradients`.

        The glimpse is `attention.attend_steps` (for one step: product with the transposed keys,
        masked softmax, product with the values; for many: the fused kernel); the pointer logits are
        one product with the transposed keys (on a CPU several times faster than a batched
        matrix-vector product)."""
        batch, steps, dim = query.shape
        heads = self.config.heads
        q = query.view(batch, steps, heads, dim // heads).transpose(1, 2)  # (B, H, T, d)
        glimpse = attention.attend_steps(q, cache.glimpse_k_t, cache.glimpse_v, ctx, blocked)
        glimpse = self.project_out(glimpse.transpose(1, 2).reshape(batch, steps, dim))
        logits = clipped_logits(torch.bmm(glimpse, cache.logit_k_t) / math.sqrt(dim), blocked, self.config)
        return torch.log_softmax(logits, dim=-1)

    def step(self, cache: DecoderCache, state, attention: Attention, ctx: AttentionContext,
             reference: bool = False) -> torch.Tensor:
        """Log-probabilities (B, m) of the next action over the cache's columns (all n nodes unless
        the cache was shrunk); -inf where the state forbids it (`log_probs` with T = 1).
        `reference=True`: the straightforward step (the fused attention call and (B, n, D) x (B, D, 1)
        products), the reference implementation kept for tests and benchmarks."""
        mask = cache.columns_of(state.mask())  # (B, m) True = not allowed
        query = cache.graph + self.step_context(state, cache.nodes)  # (B, D)
        if not reference:
            return self.log_probs(cache, query[:, None], mask[:, None], attention, ctx)[:, 0]
        batch, n, dim = cache.nodes.shape
        q = query.view(batch, self.config.heads, 1, dim // self.config.heads)
        glimpse = attention(q, cache.glimpse_k, cache.glimpse_v, ctx, allowed=~mask[:, None, None, :])
        glimpse = self.project_out(glimpse.reshape(batch, dim))
        logits = torch.bmm(cache.logit_k_t.transpose(1, 2), glimpse[:, :, None])[..., 0] / math.sqrt(dim)
        return torch.log_softmax(clipped_logits(logits, mask, self.config), dim=-1)

    def replay(self, cache: DecoderCache, trace: "DecodingTrace", attention: Attention) -> torch.Tensor:
        """Summed log-likelihood (B,) of the recorded actions, all steps at once: one query per step
        from the recorded step-context inputs, each step's recorded mask and glimpse context."""
        query = cache.graph[:, None] + self.step_context.embed(trace.context_inputs, cache.nodes)  # (B, T, D)
        log_p = self.log_probs(cache, query, trace.blocked, attention, trace.glimpse)
        return log_p.gather(2, trace.actions[..., None])[..., 0].sum(1)


@dataclass
class DecodingTrace:
    """What a decoding loop saw at each of its T steps, stacked along axis 1: the step context's
    inputs, the masks (B, T, n), the glimpse context (its n (B,) or, per step, (B, T)) and the
    pointer's actions (B, T)."""

    context_inputs: dict
    blocked: torch.Tensor
    glimpse: AttentionContext
    actions: torch.Tensor


class AttentionModel(nn.Module):
    """Encoder-decoder policy for any problem of `eie.problems`."""

    def __init__(self, problem, attention: Attention, config: ModelConfig = ModelConfig()):
        super().__init__()
        if attention.d != config.head_dim:
            raise ValueError(f"the attention is for head size d={attention.d}, the model has d={config.head_dim}")
        if getattr(attention, "heads", config.heads) != config.heads:
            raise ValueError(f"the attention lays out a bias over {attention.heads} heads, the model has {config.heads}")
        self.problem = problem
        self.attention = attention
        self.config = config
        self.embed = problem.make_node_embedding(config.dim)
        self.encoder = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.decoder = Decoder(config, problem.make_step_context(config.dim))
        # A second decision per step, after the pointer (bin packing's placement); None for most problems.
        self.action_head = problem.make_action_head(config.dim, self.decoder.step_context)
        self.encoder_precision = "float32"  # one of PRECISIONS

    def encoder_context(self, instance: dict, layer: int, batch: int, device) -> AttentionContext:
        n = torch.full((batch,), float(self.problem.size(instance)), device=device)
        return AttentionContext("encoder", layer, n, self.problem.positions(instance))

    def encode(self, instance: dict) -> torch.Tensor:
        """Node embeddings (B, n, D), float32."""
        device = next(iter(instance.values())).device
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=self.encoder_precision == "bfloat16"):
            x = self.embed(instance)
            for i, layer in enumerate(self.encoder):
                x = layer(x, self.attention, self.encoder_context(instance, i, x.shape[0], x.device))
        return x.float()

    def glimpse_context(self, instance: dict, state) -> AttentionContext:
        mask = state.mask()
        if self.attention.n_mode == "unmasked":
            n = (~mask).sum(1).clamp(min=1).to(torch.float32)
        else:
            n = torch.full((mask.shape[0],), float(self.problem.size(instance)), device=mask.device)
        return AttentionContext("glimpse", 0, n, self.problem.positions(instance))

    def rollout(self, instance: dict, decode: str = "greedy", generator: torch.Generator | None = None,
                recompute_each_step: bool = False, reference: bool = False, copies: int = 1):
        """Decode whole solutions: returns (solution (B, steps), summed log-likelihood (B,)).

        decode: "greedy" or "sample" (draws from `generator`). copies: decode that many copies of
        every instance (rows copy-major, B = copies x the instances: the layout of
        `value.repeat(copies, ...)`), encoding each instance once; the encoder is about 40 % of a
        sampled rollout of a 200-city tour, so best-of-K sampling needs it once, not K times. A rollout over n >= SHRINK_FROM
        nodes drops the nodes no instance can choose again from its key cache as it goes (same
        solutions and draws; the step's cost falls with the nodes left). recompute_each_step: re-project the
        node keys and values at every step. reference: the straightforward decoding step
        (`Decoder.step`), every column kept. Both for tests and benchmarks only.
        """
        if not isinstance(copies, int) or copies < 1:
            raise ValueError(f"copies must be a positive integer, got {copies!r}")
        self._check(instance)
        cache = self.decoder.precompute(self.encode(instance))
        if copies > 1:
            instance = CheckedInstance({key: value.repeat(copies, *([1] * (value.dim() - 1)))
                                        for key, value in instance.items()})
            cache = cache.repeated(copies)
        solution, log_likelihood, _ = self._decode(instance, cache, decode, generator,
                                                   recompute_each_step=recompute_each_step, reference=reference)
        return solution, log_likelihood

    def sample_with_gradients(self, instance: dict, generator: torch.Generator | None = None):
        """Sampled solutions (B, steps) and their log-likelihood (B,) with gradients: what REINFORCE needs.

        The decoding loop runs without gradients and records each step (`DecodingTrace`); the
        log-likelihood of the drawn actions is then computed for all steps at once
        (`Decoder.replay`), so the backward pass runs through a few large operations instead of a
        dozen small ones per step. Same draws, and the same likelihood to float rounding, as
        `rollout(instance, "sample", generator)` with gradients, which is what runs for a problem with
        a second decision per step (its action head is not replayed) or when gradients are off.
        """
        if self.action_head is not None or not torch.is_grad_enabled():
            return self.rollout(instance, "sample", generator)
        self._check(instance)
        cache = self.decoder.precompute(self.encode(instance))
        with torch.no_grad():
            solution, _, trace = self._decode(instance, cache.detach(), "sample", generator, record=True)
        return solution, self.decoder.replay(cache, trace, self.attention)

    def _check(self, instance: dict) -> None:
        """`Problem.check_instance` on any batch not known to be valid (`CheckedInstance`)."""
        if not isinstance(instance, CheckedInstance):
            self.problem.check_instance(instance)

    def _decode(self, instance: dict, cache: DecoderCache, decode: str, generator: torch.Generator | None,
                recompute_each_step: bool = False, reference: bool = False, record: bool = False):
        """The decoding loop of `rollout`: (solution, summed log-likelihood, `DecodingTrace` if `record`)."""
        if decode not in ("greedy", "sample"):
            raise ValueError(f"decode must be 'greedy' or 'sample', got {decode!r}")
        state = self.problem.initial_state(instance)
        n = cache.nodes.shape[1]
        log_likelihood = torch.zeros(cache.nodes.shape[0], device=cache.nodes.device)
        fixed = whole = None if self.attention.n_mode == "unmasked" else self.glimpse_context(instance, state)
        shrink = not (record or reference or recompute_each_step) and n >= SHRINK_FROM
        shrink_every = max(n // SHRINKS, 1) if shrink else None
        steps = []  # what `record` keeps of each step: (context inputs, mask, glimpse n, action)
        limit, taken = self.problem.max_steps(instance), 0
        while not state.done:
            if taken >= limit:
                raise RuntimeError(f"{self.problem.name} decoding took {taken} steps, more than any feasible solution "
                                   f"of these {n}-node instances needs ({limit}): some instance has no allowed action "
                                   f"left (a demand above the capacity, say); check the instances with "
                                   f"problem.check_instance")
            taken += 1
            if recompute_each_step:
                cache = self.decoder.precompute(cache.nodes)
            if shrink_every and state.step and state.step % shrink_every == 0:
                shrunk = self._without_retired(cache, state)
                if shrunk is not cache:
                    cache = shrunk
                    fixed = None if whole is None else self._on_columns(whole, cache)
            ctx = fixed if fixed is not None else self._on_columns(self.glimpse_context(instance, state), cache)
            log_p = self.decoder.step(cache, state, self.attention, ctx, reference=reference)
            if decode == "greedy":
                choice = log_p.argmax(dim=1)
            else:
                choice = draw(log_p, cache.columns, n, generator)
            action = choice if cache.columns is None else cache.columns.gather(1, choice[:, None])[:, 0]
            if record:
                steps.append((self.decoder.step_context.inputs(state), state.mask(), ctx.n, action))
            log_likelihood = log_likelihood + log_p.gather(1, choice[:, None])[:, 0]
            if self.action_head is not None:
                action, log_p_second = self.action_head(state, cache.nodes, action, decode, generator)
                log_likelihood = log_likelihood + log_p_second
            state = state.update(action)
        trace = None
        if record:
            inputs, masks, ns, actions = zip(*steps, strict=True)
            context_inputs = {key: torch.stack([step[key] for step in inputs], dim=1) for key in inputs[0]}
            glimpse = fixed if fixed is not None else AttentionContext(
                "glimpse", 0, torch.stack(ns, dim=1), self.problem.positions(instance))
            trace = DecodingTrace(context_inputs, torch.stack(masks, dim=1), glimpse, torch.stack(actions, dim=1))
        return state.solution(), log_likelihood, trace

    def _without_retired(self, cache: DecoderCache, state) -> DecoderCache:
        """The cache without the columns no instance can choose again (`State.retired`), when that
        drops at least SHRINK_AT of them (else `cache` itself; also for a problem whose states do not
        say which nodes are retired). Reads one number back from the device (the most live nodes)."""
        if not hasattr(state, "retired"):
            return cache
        retired = cache.columns_of(state.retired())  # (B, m)
        live = int((~retired).sum(1).max())
        if live > (1 - SHRINK_AT) * retired.shape[1]:
            return cache
        keep = torch.sort(retired.to(torch.int8), dim=1, stable=True).indices[:, :max(live, 1)]  # live columns first
        return cache.shrink(keep)

    def _on_columns(self, ctx: AttentionContext, cache: DecoderCache) -> AttentionContext:
        """`ctx` with the node positions of the cache's columns only."""
        if cache.columns is None or ctx.positions is None:
            return ctx
        return replace(ctx, positions=cache.columns_of(ctx.positions))

    def first_step_log_probs(self, instance: dict) -> torch.Tensor:
        """Log-probabilities of the first action (for equivariance checks)."""
        nodes = self.encode(instance)
        state = self.problem.initial_state(instance)
        return self.decoder.step(self.decoder.precompute(nodes), state, self.attention,
                                 self.glimpse_context(instance, state))
