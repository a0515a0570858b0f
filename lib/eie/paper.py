"""Numbers the EIE paper reports, for side-by-side comparison (never used to fit anything)."""

from __future__ import annotations

# Table 5 (d = 16, N = 100) and Table 7 (d = 32, N = 120): lambda from the paper's EIE net.
PAPER_LAMBDA = {
    (16, 100): {100: 0.250, 200: 0.374, 400: 0.512, 800: 0.618, 1600: 0.702},
    (32, 120): {120: 0.177, 240: 0.227, 480: 0.306, 960: 0.422, 1920: 0.504},
}


def paper_lambda(d: int, N: int, n: int) -> float | None:
    """The paper's lambda(n) for (d, N), or None where it reports none."""
    return PAPER_LAMBDA.get((d, N), {}).get(int(n))
