"""Shared look of the study's figures and one way to save them (figures/<name>.png, stable names)."""

from __future__ import annotations

import matplotlib.pyplot as plt
import seaborn as sns

from .paths import figures_dir

# One colour per scaling rule, the same in every figure.
RULE_COLOURS = {
    "inv_sqrt_d": "#4c72b0",
    "ln_sqrt_d": "#8172b3",
    "ln_d": "#dd8452",
    "log_N": "#937860",
    "ssmax": "#da8bc3",
    "eie": "#c44e52",
    "exact": "#222222",
}
RULE_STYLES = {"exact": "--", "eie": "-", "ssmax": ":"}


def apply_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="deep")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight", "axes.titlesize": 11})


def rule_kwargs(key: str) -> dict:
    return {"color": RULE_COLOURS.get(key), "linestyle": RULE_STYLES.get(key, "-")}


def save_figure(fig, name: str):
    """Save under figures/ with a stable name (no timestamps in the file), return the path."""
    path = figures_dir() / f"{name}.png"
    fig.savefig(path, metadata={"Software": None})
    return path


def length_axis(ax, N: int, N_max: int, log: bool = True) -> None:
    """x axis over sequence lengths, ticked at N * 2^k (the lengths the tables report)."""
    ticks = [N * 2**k for k in range(0, 16) if N * 2**k <= N_max]
    if log:
        ax.set_xscale("log")
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())
