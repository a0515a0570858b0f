"""The bin-packing placement candidates as one compiled CPU kernel (numba), for `heightmap.lowest_placements`.

For every instance b and orientation o of its chosen box (extents size_x, size_y), and every
corner column x: the lowest height at which the box can rest over all y (the 2D sliding-window
maximum of the height map, minimised over y), the smallest y that reaches it, and the empty volume
trapped under the box there. The same numbers as the vectorised torch composition in `heightmap`
(which runs on GPUs), computed without materialising the (B, 6, L, W) map of resting heights: per
(b, o), a sliding maximum along y (van Herk / Gil-Werman, O(L W); once for all orientations that
share the box's extent along y), then one along x, whole rows at a time, taking the minimum over y
as each window's maximum is known. The jobs run in parallel over the cores.
The first call compiles (about 2 s, cached on disk afterwards).
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True)
def _sliding_max(values, window, count, prefix, suffix, out):
    """out[i] = max(values[i:i + window]) for i < count (van Herk / Gil-Werman: blocks of the window size)."""
    n = values.shape[0]
    for i in range(n):
        prefix[i] = values[i] if i % window == 0 else max(prefix[i - 1], values[i])
    for i in range(n - 1, -1, -1):
        suffix[i] = values[i] if (i == n - 1 or (i + 1) % window == 0) else max(suffix[i + 1], values[i])
    for i in range(count):
        out[i] = max(suffix[i], prefix[i + window - 1])


@nb.njit(parallel=True, cache=True)
def lowest_placements_kernel(heights, extents, low, best_y, trapped):
    """heights (B, L, W) int64; extents (B, O, 3) int64. Writes low (B, O, L) float32 (inf where the box
    sticks out at every y), best_y (B, O, L) int64 (0 there) and trapped (B, O, L) float32:
    float32(size_x size_y) * float32(low or 0) - float32(sum of heights under the footprint at (x, best_y),
    clipped to the bin), as `heightmap` computes it."""
    batch, length, width = heights.shape
    orientations = extents.shape[1]
    integral = np.zeros((batch, length + 1, width + 1), np.int64)
    for b in nb.prange(batch):
        for x in range(length):
            row = 0
            for y in range(width):
                row += heights[b, x, y]
                integral[b, x + 1, y + 1] = integral[b, x, y + 1] + row
    for job in nb.prange(batch * orientations):
        b, first = job // orientations, job % orientations
        size_y = extents[b, first, 1]
        shared = False  # an earlier orientation with the same extent along y does this job's work
        for o in range(first):
            shared |= extents[b, o, 1] == size_y
        if shared:
            continue
        ny = width - size_y + 1
        along_y = np.empty((length, max(ny, 1)), np.int32)  # max over the window along y, row by row
        if ny > 0:
            prefix, suffix = np.empty(width, np.int32), np.empty(width, np.int32)
            for x in range(length):
                _sliding_max(heights[b, x], size_y, ny, prefix, suffix, along_y[x])
        before, after = np.empty((length, max(ny, 1)), np.int32), np.empty(max(ny, 1), np.int32)
        for o in range(first, orientations):
            if extents[b, o, 1] != size_y:
                continue
            size_x = extents[b, o, 0]  # the box's extent along x
            nx = length - size_x + 1
            for x in range(length):
                low[b, o, x] = np.inf
                best_y[b, o, x] = 0
            if nx <= 0 or ny <= 0:
                continue
            # along x, whole rows at a time (contiguous inner loops): van Herk's block prefix maxima
            # forwards, then the block suffix maxima backwards, one row kept, each window's maximum
            # (and the lowest over y) taken as soon as its suffix row is known
            for x in range(length):
                for y in range(ny):
                    before[x, y] = along_y[x, y] if x % size_x == 0 else max(before[x - 1, y], along_y[x, y])
            for x in range(length - 1, -1, -1):
                block_end = x == length - 1 or (x + 1) % size_x == 0
                for y in range(ny):
                    after[y] = along_y[x, y] if block_end else max(after[y], along_y[x, y])
                if x < nx:
                    lowest, at = np.int32(2**31 - 1), 0
                    for y in range(ny):
                        rest = max(after[y], before[x + size_x - 1, y])
                        if rest < lowest:  # strict: the smallest y wins ties
                            lowest, at = rest, y
                    low[b, o, x] = lowest
                    best_y[b, o, x] = at
    for job in nb.prange(batch * orientations):
        b, o = job // orientations, job % orientations
        size_x, size_y = extents[b, o, 0], extents[b, o, 1]
        area = np.float32(size_x * size_y)
        for x in range(length):
            y = best_y[b, o, x]
            x1, y1 = min(x + size_x, length), min(y + size_y, width)
            under = integral[b, x1, y1] - integral[b, x, y1] - integral[b, x1, y] + integral[b, x, y]
            resting = low[b, o, x] if low[b, o, x] < np.inf else np.float32(0.0)
            trapped[b, o, x] = area * resting - np.float32(under)
