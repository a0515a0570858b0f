"""The one seam through which every softmax over the nodes is computed.

The encoder's self-attention, the decoder's glimpse and the probes of `eie.probes` all call an
`Attention` object with the queries, keys and values of the heads and an `AttentionContext` (which
site, which layer, the n the rules see, the nodes' positions). The object decides

    logits = scale(ctx) * rotate(q) . rotate(k)^T + bias(ctx)        (B, H, n_queries, n_keys)

- `scale`: lambda(n) per instance from a scaling rule at the sites the rule applies to, 1/sqrt(d)
  elsewhere (what every method of the study so far changes);
- `bias`: a pairwise additive bias per head, from the node positions (None: no bias);
- `rotate`: a rotation of queries and keys, from the node positions (identity: no rotation).

A new kind of attention (a distance bias per head, a rotary encoding of coordinates, a scale per
layer) is a subclass that overrides one hook, plus an entry in `eie.methods`; the encoder, decoder,
training and evaluation do not change. Self-attention and many-query glimpses run through PyTorch's
`scaled_dot_product_attention` (a bias goes in as its additive float mask), so the plain scalar case
keeps the fused kernel (`benchmarks/bench_attention.py` measures the seam against a direct call); a
single decoding step's glimpse (`attend_steps` with one query) is an explicit product, masked softmax
and product, faster for one query. All of it is computed in float32, even under autocast.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .scaling import ScalingRule, inv_sqrt_d

SITES = ("encoder", "glimpse")
N_MODES = ("instance", "unmasked")


@dataclass(frozen=True)
class AttentionContext:
    """What an attention method may depend on, for one call."""

    site: str  # "encoder" (self-attention) or "glimpse" (the decoder's query over the nodes)
    layer: int  # encoder layer (0, 1, ...); 0 for the glimpse
    n: torch.Tensor  # (B,) the problem size each instance's rule sees; (B, T) for T decoding steps replayed at once
    positions: torch.Tensor | None = None  # (B, n_keys, 2) node coordinates, None for problems without


def float32(method):
    """Run an attention computation in float32 even inside an autocast region (training may run the
    encoder's projections in bfloat16, `eie.training.TrainConfig.precision`): the logits, their scale
    and the softmax over the nodes are what this study measures, so they keep full precision."""

    @functools.wraps(method)
    def wrapped(self, q, k, *args, **kwargs):
        if not torch.is_autocast_enabled(q.device.type):
            return method(self, q, k, *args, **kwargs)
        with torch.autocast(q.device.type, enabled=False):
            args = tuple(a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args)
            return method(self, q.float(), k.float(), *args, **kwargs)

    return wrapped


class Attention:
    """Scaled dot-product attention with the logit scale lambda(n) of a scaling rule.

    rule: the scaling rule; sites: where it applies (elsewhere 1/sqrt(d)); n_mode: which n the
    glimpse's rule sees while decoding ("instance": the problem size; "unmasked": the nodes it may
    still attend to; read by the model, which builds the context)."""

    def __init__(self, rule: ScalingRule, sites=SITES, n_mode: str = "instance"):
        unknown = set(sites) - set(SITES)
        if unknown:
            raise ValueError(f"unknown attention sites {sorted(unknown)}; choose from {SITES}")
        if n_mode not in N_MODES:
            raise ValueError(f"n_mode must be one of {N_MODES}, got {n_mode!r}")
        self.rule, self.sites, self.n_mode = rule, tuple(sites), n_mode
        # A test-time factor s(n) on the node positions the hooks below see (a distance bias, a
        # rotation), not on the coordinates the model embeds: (B,) n -> (B,) factor, None: 1.
        self.position_scale = None
        self._plain = inv_sqrt_d(rule.d)
        self._last = (None, None)  # (context, its scale): a decoding loop reuses one context per episode

    @property
    def d(self) -> int:
        return self.rule.d

    def like(self, rule: ScalingRule) -> "Attention":
        """The same kind of attention, at the same sites and n mode, with another rule (a test-time
        method applied to a trained model). A subclass with parameters of its own overrides it."""
        return type(self)(rule, sites=self.sites, n_mode=self.n_mode)

    def positions(self, ctx: AttentionContext) -> torch.Tensor | None:
        """The node positions (B, n_keys, 2) a position-aware hook uses: ctx.positions times
        `position_scale(n)` when one is set (encoder contexts: n of shape (B,))."""
        if ctx.positions is None or self.position_scale is None:
            return ctx.positions
        factor = self.position_scale(ctx.n.to(torch.float64)).to(ctx.positions.dtype)
        return ctx.positions * factor.view(-1, 1, 1)

    # -- the hooks a method may override ---------------------------------------------------------
    def scale(self, ctx: AttentionContext) -> torch.Tensor:
        """(B,) logit scale lambda per instance."""
        rule = self.rule if ctx.site in self.sites else self._plain
        return rule(ctx.n.to(torch.float64)).to(torch.float32)

    def bias(self, ctx: AttentionContext, n_queries: int) -> torch.Tensor | None:
        """Additive logit bias broadcastable to (B, H, n_queries, n_keys), or None."""
        return None

    def rotate(self, q: torch.Tensor, k: torch.Tensor, ctx: AttentionContext):
        """Queries and keys after a position-dependent rotation (identity here)."""
        return q, k

    # -- what the model and the probes call ------------------------------------------------------
    def scale_for(self, ctx: AttentionContext) -> torch.Tensor:
        """`scale(ctx)`, computed once per context object (an EIE net is not re-evaluated at every
        decoding step of an episode)."""
        if self._last[0] is not ctx:
            self._last = (ctx, self.scale(ctx))
        return self._last[1]

    def scaled(self, q: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        """q (B, H, n_queries, d) times the scale: one per instance (ctx.n of shape (B,)) or one per
        instance and query (ctx.n of shape (B, n_queries): decoding steps replayed at once)."""
        scale = self.scale_for(ctx).to(q.dtype)
        return q * (scale.view(-1, 1, 1, 1) if scale.dim() == 1 else scale[:, None, :, None])

    @float32
    def logits(self, q: torch.Tensor, k: torch.Tensor, ctx: AttentionContext) -> torch.Tensor:
        """(B, H, n_queries, n_keys) logits before masking: what the softmax of `__call__` sees."""
        q, k = self.rotate(q, k, ctx)
        logits = self.scaled(q, ctx) @ k.transpose(-1, -2)  # q scaled first, as in __call__
        bias = self.bias(ctx, q.shape[-2])
        return logits if bias is None else logits + bias

    @float32
    def attend_steps(self, q: torch.Tensor, k_t: torch.Tensor, v: torch.Tensor, ctx: AttentionContext,
                     blocked: torch.Tensor) -> torch.Tensor:
        """The decoder's glimpse: `self(q, k, v, ctx, allowed=~blocked[:, None])` for T queries per head,
        each with its own mask (one decoding step, T = 1, or a whole solution's steps replayed at
        once). q: (B, H, T, d); keys given transposed, k_t: (B, H, d, n_keys); v: (B, H, n_keys, d);
        blocked: (B, T, n_keys) bool, True = may not attend.

        One query (a decoding step) is written as product, masked softmax, product: several times
        faster on a CPU than the fused kernel (`benchmarks/bench_decode.py`); many queries (the
        replay, with gradients) go through the fused kernel, whose backward pass is several times
        faster than that of the explicit softmax. Both use the same hooks (scale, bias, rotate), so a
        method that overrides them needs nothing more here."""
        if q.shape[-2] > 1:
            return self(q, k_t.transpose(-1, -2), v, ctx, allowed=~blocked[:, None])
        q, k = self.rotate(q, k_t.transpose(-1, -2), ctx)
        logits = self.scaled(q, ctx) @ k.transpose(-1, -2)  # (B, H, 1, n)
        bias = self.bias(ctx, 1)
        if bias is not None:
            logits = logits + bias
        return torch.softmax(logits.masked_fill(blocked[:, None], float("-inf")), dim=-1) @ v

    @float32
    def __call__(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, ctx: AttentionContext,
                 allowed: torch.Tensor | None = None) -> torch.Tensor:
        """softmax(logits) v over the keys `allowed` (bool, broadcastable to (B, H, n_queries, n_keys),
        True = may attend; None = all). q: (B, H, n_queries, d); k, v: (B, H, n_keys, d)."""
        q, k = self.rotate(q, k, ctx)
        q = self.scaled(q, ctx)
        bias = self.bias(ctx, q.shape[-2])
        mask = allowed
        if bias is not None:
            mask = bias if allowed is None else bias.masked_fill(~allowed, float("-inf"))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=1.0)
