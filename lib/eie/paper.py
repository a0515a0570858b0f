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

# Table 2 (TSP, d = 16, N = 100, five seeds): mean (std) tour length on [-1, 1]^2. The middle row
# is labelled ln(n)/sqrt(d) in the table while the text discusses ln(n)/d (see the references README).
PAPER_TSP = {
    "n": [100, 200, 400, 800, 1600],
    "inv_sqrt_d": [(18.5, 0.7), (27.5, 2.0), (40.8, 2.9), (61.9, 2.2), (96.6, 1.9)],
    "ln_sqrt_d (row label; text: ln_d)": [(18.4, 0.1), (27.3, 0.8), (40.5, 2.9), (60.3, 1.3), (96.5, 0.4)],
    "eie": [(18.5, 0.7), (26.0, 1.1), (39.0, 0.9), (59.2, 1.6), (91.2, 4.8)],
}

METHOD_LABELS = {
    "inv_sqrt_d": "1/sqrt(d)",
    "ln_d": "ln(n)/d",
    "ln_sqrt_d": "ln(n)/sqrt(d)",
    "log_N": "log_N(n)/sqrt(d)",
    "ssmax": "ln(n+1)/sqrt(d)",
    "eie": "EIE",
    "exact": "exact lambda*",
}


def paper_table(rows: dict):
    """A paper table as mean (std) strings, methods by n."""
    import pandas as pd

    return pd.DataFrame({key: [f"{m:.1f} ({s:.1f})" for m, s in values] for key, values in rows.items() if key != "n"},
                        index=rows["n"]).T
