"""Numbers the EIE paper reports, for side-by-side comparison (never used to fit anything)."""

from __future__ import annotations

import pandas as pd

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

# Table 1 (O3BPP, d = 16, N = 100 boxes, five seeds): mean (std) load rate in %, per bin L x W.
_BPP_N = [100, 200, 400, 800, 1600]
PAPER_BPP = {
    (120, 100): {"n": _BPP_N,
                 "inv_sqrt_d": [(78.3, 1.3), (76.5, 0.8), (75.2, 1.9), (71.8, 2.9), (62.6, 1.7)],
                 "ln_sqrt_d": [(53.6, 1.6), (54.2, 1.5), (52.0, 1.6), (55.6, 2.4), (50.9, 2.2)],
                 "ln_d": [(78.6, 0.1), (77.3, 1.4), (76.3, 0.3), (72.9, 1.4), (66.9, 0.4)],
                 "eie": [(78.3, 1.3), (78.8, 1.0), (77.7, 0.7), (75.0, 1.3), (72.6, 1.2)]},
    (140, 110): {"n": _BPP_N,
                 "inv_sqrt_d": [(77.6, 1.2), (75.6, 0.4), (74.0, 1.0), (69.9, 2.0), (62.3, 1.1)],
                 "ln_sqrt_d": [(52.3, 1.5), (52.5, 1.6), (52.1, 2.7), (55.8, 2.4), (55.0, 2.1)],
                 "ln_d": [(77.4, 1.5), (76.0, 1.2), (74.4, 0.9), (71.9, 0.4), (66.1, 0.6)],
                 "eie": [(77.6, 1.2), (76.6, 0.6), (75.9, 0.8), (73.3, 0.4), (69.0, 1.7)]},
    (160, 120): {"n": _BPP_N,
                 "inv_sqrt_d": [(76.1, 0.3), (74.1, 1.8), (70.1, 1.2), (69.9, 1.7), (61.2, 1.1)],
                 "ln_sqrt_d": [(51.4, 2.6), (55.8, 2.5), (52.4, 2.9), (52.6, 2.8), (55.4, 2.9)],
                 "ln_d": [(76.2, 1.8), (74.8, 0.9), (72.8, 0.2), (71.0, 1.8), (64.7, 1.7)],
                 "eie": [(76.1, 0.3), (75.5, 0.3), (74.8, 1.1), (72.6, 0.3), (70.0, 1.3)]},
}

# Table 3 (CVRP, d = 16, N = 100 destinations, five seeds): mean (std) total distance, per capacity.
PAPER_CVRP = {
    10: {"n": [100, 200, 400, 800, 1600],
         "inv_sqrt_d": [(25.3, 0.2), (42.7, 1.2), (73.3, 0.2), (126.9, 0.5), (231.7, 0.9)],
         "ln_d": [(25.3, 0.6), (42.2, 1.1), (71.8, 0.8), (123.8, 1.0), (229.5, 0.4)],
         "eie": [(25.3, 0.2), (41.2, 0.6), (69.3, 1.2), (120.5, 1.3), (215.0, 1.0)]},
    15: {"n": [100, 200, 400, 800, 1600],
         "inv_sqrt_d": [(23.2, 1.2), (38.6, 0.2), (63.5, 0.8), (106.7, 3.2), (186.3, 3.3)],
         "ln_d": [(23.9, 1.4), (38.2, 1.2), (62.5, 1.3), (104.9, 0.4), (185.3, 1.3)],
         "eie": [(23.2, 1.2), (36.7, 0.7), (60.3, 2.9), (102.2, 3.9), (177.9, 2.5)]},
    20: {"n": [100, 200, 400, 800, 1600],
         "inv_sqrt_d": [(21.9, 0.6), (38.4, 0.4), (60.6, 0.5), (101.1, 1.0), (169.3, 3.4)],
         "ln_d": [(21.6, 0.1), (37.6, 0.7), (58.8, 1.3), (96.3, 3.8), (162.7, 0.1)],
         "eie": [(21.9, 0.6), (34.4, 1.1), (55.8, 2.6), (93.0, 1.2), (159.4, 3.3)]},
}

# Table 4: CVRP inference time in hours against n (the paper's test sets; EIE said to add 0.02 s).
PAPER_CVRP_TIME_H = {200: 0.17, 400: 0.54, 800: 2.18, 1600: 8.18}

# The paper's table number for each problem's extrapolation results.
TABLE_NUMBER = {"bpp": 1, "tsp": 2, "cvrp": 3}


def in_table_order(problems) -> list[str]:
    """`problems` in the paper's table order; a problem the paper has no table for comes after, by name."""
    return sorted(problems, key=lambda problem: (TABLE_NUMBER.get(problem, len(TABLE_NUMBER) + 1), problem))


def table_title(problem: str) -> str:
    """'Table <k>' for a problem of the paper, else the problem's name (a problem added to the study)."""
    return f"Table {TABLE_NUMBER[problem]}" if problem in TABLE_NUMBER else problem


def table_stem(problem: str) -> str:
    """The file stem of a problem's table: table<k>_<problem> (the paper's number), else table_<problem>."""
    return f"table{TABLE_NUMBER.get(problem, '')}_{problem}"


def paper_rows(problem: str, setting: str) -> dict | None:
    """The paper's table for a problem and setting ("", "C10", "120x100"), None where it has none."""
    if problem == "tsp":
        return PAPER_TSP
    if problem == "cvrp":
        return PAPER_CVRP.get(int(float(setting.lstrip("C"))))
    if problem == "bpp":
        return PAPER_BPP.get(tuple(int(s) for s in setting.split("x")))
    return None


def paper_table(rows: dict):
    """A paper table as mean (std) strings, methods by n."""

    return pd.DataFrame({key: [f"{m:.1f} ({s:.1f})" for m, s in values] for key, values in rows.items() if key != "n"},
                        index=rows["n"]).T
