"""Cost of the attention seam (`eie.attention.Attention`) against a direct call of PyTorch's fused
`scaled_dot_product_attention` with the same scale, in the same run: the encoder's self-attention
(B = 256, n = 100) and the decoder's glimpse (one query, masked) at n = 100 and n = 1600. The seam
must not slow the plain scalar case down (it runs the same kernel; what it adds is Python).
A distance-biased attention (a per-head bias through the same seam) is timed beside them.
Medians over --repeats calls, direct and seam alternating. Run: python benchmarks/bench_attention.py [--repeats 200]
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

from eie import scaling
from eie.attention import Attention, AttentionContext


class DistanceBias(Attention):
    """-m_h |x_i - x_j| per head on the encoder logits (what a PENS-style method would add)."""

    def bias(self, ctx, n_queries):
        slopes = torch.tensor([2.0 ** -h for h in range(8)])
        return -slopes.view(1, -1, 1, 1) * torch.cdist(ctx.positions, ctx.positions)[:, None]


def median_ms(*fns, repeats):
    """Median ms per call of each of `fns`, the calls alternating (a, b, a, b, ...) so that a change
    in the machine's load during the run affects every one of them alike."""
    for fn in fns:
        fn()  # warm-up
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, kept in zip(fns, times, strict=True):
            start = time.perf_counter()
            fn()
            kept.append(time.perf_counter() - start)
    return [1e3 * statistics.median(kept) for kept in times]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=200)
    args = parser.parse_args()
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; median ms per call")
    seam = Attention(scaling.ln_d(16))
    with torch.no_grad():
        for label, batch, n, queries in [("encoder self-attention", 256, 100, 100), ("glimpse", 256, 100, 1),
                                         ("glimpse", 16, 1600, 1)]:
            q = torch.randn(batch, 8, queries, 16)
            k, v = torch.randn(batch, 8, n, 16), torch.randn(batch, 8, n, 16)
            positions = torch.rand(batch, n, 2)
            ctx = AttentionContext("encoder" if queries > 1 else "glimpse", 0, torch.full((batch,), float(n)), positions)
            allowed = None if queries > 1 else (torch.rand(batch, 1, 1, n) > 0.5)
            scale = seam.scale(ctx).view(-1, 1, 1, 1)
            direct, through = median_ms(
                lambda q=q, k=k, v=v, scale=scale, allowed=allowed: F.scaled_dot_product_attention(
                    q * scale, k, v, attn_mask=allowed, scale=1.0),
                lambda q=q, k=k, v=v, ctx=ctx, allowed=allowed: seam(q, k, v, ctx, allowed), repeats=args.repeats)
            row = f"{label:24s} B={batch:4d} n={n:5d}: direct {direct:7.3f}, seam {through:7.3f} (x{through / direct:.2f})"
            if queries > 1:
                biased = DistanceBias(scaling.ln_d(16))
                row += f", with a distance bias {median_ms(lambda q=q, k=k, v=v, ctx=ctx, biased=biased: biased(q, k, v, ctx), repeats=args.repeats)[0]:7.3f}"
            print(row)


if __name__ == "__main__":
    main()
