"""Attention that sees where the nodes are: PENS's distance bias and axial rotary encoding.

Both are subclasses of `eie.attention.Attention` that override one hook, at the encoder's
self-attention only (the decoder's glimpse query is a context vector, not a node, so it has no
position of its own; see "glimpse" below), on top of the model's linear embedding of the
coordinates (PENS replaces that embedding by random ones; here the rest of the Attention Model stays
as it is, so the comparison with 1/sqrt(d) and EIE changes one thing).

Units. PENS states its constants for cities in the unit square; this study draws them in
[-1, 1]^2, where every distance and coordinate difference is twice as large. Each constant is halved
so that the same city layout gets the same logits:

- `DistanceBias` (PENS-A, ALiBi on Euclidean distances): logit_ij += -m_h ||x_i - x_j|| with
  m_h = 10 / sqrt(2)^h in the unit square, h = 0 .. heads - 1, so m_h = 5 / sqrt(2)^h here.
- `AxialRoPE` (PENS-R): the first half of each query and key is rotated by the x coordinate, the
  second half by y, each half as d/4 pairs with frequencies theta_i = 14 * 100^(-i / (d/4)) in the
  unit square (Heo et al.), so theta_i = 7 * 100^(-i / (d/4)) here. The logit then depends on the
  coordinate differences only (translation invariant).

Position-only rescaling. `Attention.position_scale` multiplies the positions these hooks see, not
the coordinates the model embeds: with s(n) = sqrt(n/N) it is PENS's density-preserving rescaling
as it acts on a model whose coordinates enter only through the bias or the rotation (PENS's
models; here the linear coordinate embedding keeps seeing the coordinates as they are).

The logit scale lambda(n) multiplies q.k only; the bias is added after it, so a test-time scale
(EIE) applied to a distance-bias model changes the content part and leaves the bias as trained.

Glimpse. PENS has no glimpse. A distance bias at the glimpse would need the position of the
decoder's query, i.e. the current node (TSP: the last city; CVRP: the current node), carried into
the glimpse context at every step and through the replayed training steps. It is not built: the
bias is applied where every query is a node (the encoder).
"""

from __future__ import annotations

import math

import torch

from .attention import Attention, AttentionContext

UNIT_SQUARE_TO_STUDY = 0.5  # coordinates in [-1, 1]^2 differ twice as much as in the unit square


def alibi_slopes(heads: int) -> torch.Tensor:
    """(heads,) slopes m_h = 10 / sqrt(2)^h of PENS, converted to [-1, 1]^2 coordinates."""
    return torch.tensor([UNIT_SQUARE_TO_STUDY * 10.0 / math.sqrt(2.0) ** h for h in range(heads)])


def rope_frequencies(d: int) -> torch.Tensor:
    """(d/4,) frequencies theta_i = 14 * 100^(-i/(d/4)) of PENS (axial RoPE), converted to [-1, 1]^2."""
    if d % 4:
        raise ValueError(f"axial RoPE splits each head into two halves of pairs: d must be a multiple of 4, got {d}")
    quarter = d // 4
    return torch.tensor([UNIT_SQUARE_TO_STUDY * 14.0 * 100.0 ** (-i / quarter) for i in range(quarter)])


class DistanceBias(Attention):
    """A per-head bias -m_h ||x_i - x_j|| on the encoder's self-attention logits (PENS-A)."""

    heads = 8  # the model's head count (ModelConfig.heads); the slopes are laid out over it

    def bias(self, ctx: AttentionContext, n_queries: int) -> torch.Tensor | None:
        if ctx.site != "encoder" or ctx.positions is None:
            return None
        # Recomputed at each layer (2 flops per pair against the layer's 2d per pair and head) rather
        # than cached: a cache would keep a (B, n, n) matrix alive through the whole decoding.
        positions = self.positions(ctx).float()
        distances = torch.cdist(positions, positions)
        slopes = alibi_slopes(self.heads).to(positions.device)
        return -slopes.view(1, -1, 1, 1) * distances[:, None]


class AxialRoPE(Attention):
    """Encoder queries and keys rotated by the node coordinates: first half by x, second by y (PENS-R)."""

    def rotate(self, q: torch.Tensor, k: torch.Tensor, ctx: AttentionContext):
        if ctx.site != "encoder" or ctx.positions is None:
            return q, k
        frequencies = rope_frequencies(q.shape[-1]).to(q.device, q.dtype)
        angles = self.positions(ctx).to(q.dtype)[..., None] * frequencies  # (B, n, 2, d/4): x then y
        cos, sin = angles.cos().flatten(2)[:, None], angles.sin().flatten(2)[:, None]  # (B, 1, n, d/2)
        return _rotated(q, cos, sin), _rotated(k, cos, sin)


def _rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, H, n, d) with pair j = (x[j], x[j + d/4]) of each half rotated by angle j (cos, sin: (B, 1, n, d/2))."""
    halves = x.unflatten(-1, (2, 2, -1))  # (B, H, n, half, pair member, d/4)
    first, second = halves[..., 0, :], halves[..., 1, :]
    cos, sin = cos.unflatten(-1, (2, -1)), sin.unflatten(-1, (2, -1))  # (B, 1, n, half, d/4)
    return torch.stack([first * cos - second * sin, first * sin + second * cos], dim=-2).flatten(-3)
