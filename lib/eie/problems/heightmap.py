"""Height-map geometry for 3D bin packing, vectorised over a batch (no loop over instances or positions).

A bin of footprint L x W (integer cells) with open height is described by its top-view height map
`heights` (B, L, W): the height of the highest box top over each cell. A box of footprint l x w
placed with its corner at cell (x, y) rests on the highest point under it,

    rest[x, y] = max(heights[x:x+l, y:y+w]),

a sliding-window maximum whose window differs from instance to instance (and between the six
orientations of a box), computed exactly for all of them at once, separably (along y, then x), by
the van Herk / Gil-Werman method. The empty space trapped under a box is l*w*rest minus the sum of
heights under its footprint, from an integral image (`window_sums`, `footprint_sums`).
"""

from __future__ import annotations

import torch

try:  # the compiled CPU kernel of `lowest_placements`; without numba the torch path runs everywhere
    from .placement_kernel import lowest_placements_kernel
except ImportError:  # pragma: no cover
    lowest_placements_kernel = None

CPU_KERNEL = lowest_placements_kernel is not None  # False: the torch composition on CPU too (tests)

# The six axis-aligned orientations: which of the box's (a, b, c) edges lie along x, y and up.
ORIENTATIONS = ((0, 1, 2), (1, 0, 2), (0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0))
INVALID = float("inf")


def oriented(dims: torch.Tensor) -> torch.Tensor:
    """(..., 3) box edges -> (..., 6, 3): the (along x, along y, vertical) extent in each orientation."""
    index = torch.tensor(ORIENTATIONS, device=dims.device)
    return dims[..., index]


def _window_max(values: torch.Tensor, sizes: torch.Tensor, dim: int) -> torch.Tensor:
    """Sliding maxima along `dim` (2 or 3) of integer values (B, E, X, Y) with window sizes (B, E).

    Van Herk / Gil-Werman: cut the axis into blocks of the window size; a window is the maximum of
    a suffix maximum of one block and a prefix maximum of the next. Both are running maxima that
    restart at block boundaries, done for every instance's own block size at once by adding block
    number x offset (larger than any value) before a cummax. Entries whose window runs past the end
    are garbage (callers mark them invalid).
    """
    length = values.shape[dim]
    shape = [sizes.shape[0], sizes.shape[1], 1, 1]
    shape[dim] = length
    position = torch.arange(length, device=values.device, dtype=torch.int32)
    block = (position[None, None, :] // sizes[..., None].to(torch.int32)).view(shape)
    offset = block * (values.amax() + 1)  # int32: heights up to 2^31 / (blocks + 1), about 10^7
    prefix = torch.cummax(values + offset, dim).values - offset
    suffix = torch.cummax((values - offset).flip(dim), dim).values.flip(dim) + offset
    end = (position[None, None, :] + sizes[..., None] - 1).clamp(max=length - 1).long().view(shape).expand_as(values)
    return torch.maximum(suffix, prefix.gather(dim, end))


def resting_heights(heights: torch.Tensor, dims: torch.Tensor) -> torch.Tensor:
    """(B, 6, L, W): where a box with edges dims[b] = (a, b, c) would rest, in each orientation of
    `ORIENTATIONS`, with its corner at (x, y); `INVALID` (inf) where it would stick out of the bin.

    The maxima along y are taken once per distinct edge (3 maps), those along x once per orientation.
    """
    batch, length, width = heights.shape
    index = torch.tensor(ORIENTATIONS, device=heights.device)
    values = heights.to(torch.int32)[:, None].expand(-1, 3, -1, -1)
    along_y = _window_max(values, dims, dim=3)  # (B, 3, L, W): window = edge e along y
    rest = _window_max(along_y[:, index[:, 1]], dims[:, index[:, 0]], dim=2).to(torch.float32)
    extents = dims[:, index]
    x = torch.arange(length, device=heights.device)[None, None, :, None]
    y = torch.arange(width, device=heights.device)[None, None, None, :]
    outside = (x + extents[..., 0, None, None] > length) | (y + extents[..., 1, None, None] > width)
    return rest.masked_fill(outside, INVALID)


def window_sums(heights: torch.Tensor, footprints: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Sum of heights under footprints (B, O, 2) with corners at x, y (B, O, P): (B, O, P) floats."""
    batch, length, width = heights.shape
    integral = torch.zeros(batch, length + 1, width + 1, dtype=torch.float64, device=heights.device)
    integral[:, 1:, 1:] = heights.to(torch.float64).cumsum(1).cumsum(2)
    flat = integral.flatten(1)
    x1 = (x + footprints[..., 0, None]).clamp(max=length)
    y1 = (y + footprints[..., 1, None]).clamp(max=width)

    def at(i, j):
        index = i * (width + 1) + j
        return flat.gather(1, index.flatten(1)).view(index.shape)

    return (at(x1, y1) - at(x, y1) - at(x1, y) + at(x, y)).to(torch.float32)


def footprint_sums(heights: torch.Tensor, footprints: torch.Tensor) -> torch.Tensor:
    """(B, O, L, W): the sum of heights under each footprint (B, O, 2) at every corner (x, y)."""
    batch, length, width = heights.shape
    cells = torch.arange(length * width, device=heights.device).expand(batch, footprints.shape[1], -1)
    return window_sums(heights, footprints, cells // width, cells % width).view(batch, -1, length, width)


def place(heights: torch.Tensor, x: torch.Tensor, y: torch.Tensor, dims: torch.Tensor):
    """Drop boxes of extent dims (B, 3) at corners (x, y): returns (new heights, resting z (B,))."""
    batch, length, width = heights.shape
    cx = torch.arange(length, device=heights.device)[None, :, None]
    cy = torch.arange(width, device=heights.device)[None, None, :]
    under = ((cx >= x[:, None, None]) & (cx < (x + dims[:, 0])[:, None, None])
             & (cy >= y[:, None, None]) & (cy < (y + dims[:, 1])[:, None, None]))
    z = heights.masked_fill(~under, 0).flatten(1).amax(1)
    return torch.where(under, (z + dims[:, 2])[:, None, None], heights), z


def lowest_placements(heights: torch.Tensor, dims: torch.Tensor):
    """For boxes of edges dims (B, 3) in each orientation of `ORIENTATIONS`, at every corner column x:
    the lowest resting height over y, the smallest y that reaches it and the empty volume trapped
    under the box there. Returns low (B, 6, L) float32 (inf where the box sticks out at every y),
    y (B, 6, L) long (0 there) and trapped (B, 6, L) float32 (area * low minus the heights' sum under
    the footprint, the footprint clipped to the bin and low taken as 0 where it is inf).

    On a CPU with numba: one compiled kernel (`placement_kernel`, no (B, 6, L, W) map in memory);
    elsewhere (CUDA): the vectorised composition of `resting_heights`, a minimum over y and
    `window_sums`. Both give the same numbers (tests/test_bpp.py)."""
    batch, length, width = heights.shape
    extents = oriented(dims)  # (B, 6, 3)
    if CPU_KERNEL and heights.device.type == "cpu":
        low = torch.empty(batch, len(ORIENTATIONS), length, dtype=torch.float32, device="cpu")
        y = torch.empty(low.shape, dtype=torch.long, device="cpu")
        trapped = torch.empty(low.shape, dtype=torch.float32, device="cpu")
        lowest_placements_kernel(heights.to(torch.long).contiguous().numpy(), extents.to(torch.long).contiguous().numpy(),
                                 low.numpy(), y.numpy(), trapped.numpy())
        return low, y, trapped
    rest = resting_heights(heights, dims)
    low = rest.amin(-1)
    y = (rest == low[..., None]).to(torch.int8).argmax(-1)
    columns = torch.arange(length, device=heights.device).expand(batch, len(ORIENTATIONS), -1)
    area = (extents[..., 0] * extents[..., 1]).to(torch.float32)[..., None]
    trapped = area * low.masked_fill(~torch.isfinite(low), 0) - window_sums(heights, extents[..., :2], columns, y)
    return low, y, trapped
