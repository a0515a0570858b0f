"""Shared look of the study's figures and one way to save them (figures/<name>.png, stable names)."""

from __future__ import annotations

import itertools

import matplotlib.pyplot as plt
import numpy as np
import seaborn as sns

from . import methods
from .decoding import method_label
from .evaluation import extrapolation_lengths
from .paths import figures_dir
from .problems import PROBLEMS
from .seed_level import summarise_effects


def apply_style() -> None:
    sns.set_theme(context="notebook", style="whitegrid", palette="deep")
    plt.rcParams.update({"figure.dpi": 100, "savefig.dpi": 150, "savefig.bbox": "tight", "axes.titlesize": 11})


def rule_kwargs(key: str) -> dict:
    """Colour and line style of a method (`eie.methods`), the same in every figure."""
    return methods.style(key)


def save_figure(fig, name: str, run: str = "default"):
    """Save under figures/ with a stable name (no timestamps in the file), return the path. The
    figures of a run other than "default" get its name as a suffix (`<name>_<run>.png`), so that a
    run never overwrites the committed figures of another."""
    path = figures_dir() / (f"{name}.png" if run == "default" else f"{name}_{run}.png")
    fig.savefig(path, metadata={"Software": None})
    return path


def length_axis(ax, N: int, N_max: int, log: bool = True) -> None:
    """x axis over sequence lengths, ticked at N * 2^k (the lengths the tables report)."""
    ticks = extrapolation_lengths(N, N_max)
    if log:
        ax.set_xscale("log")
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.xaxis.set_minor_formatter(plt.NullFormatter())


def draw_packing(ax, placements, length: int, width: int, title: str = "") -> None:
    """Draw one packed bin on a 3D axis: placements (n, 7) = box, x, y, z, extent x, y, z.

    Boxes are shaded by the order they were packed in; the bin's footprint is outlined.
    """
    from mpl_toolkits.mplot3d.art3d import Poly3DCollection

    placements = np.asarray(placements)
    colours = plt.cm.viridis(np.linspace(0, 1, len(placements)))
    faces = []
    for (_, x, y, z, dx, dy, dz) in placements:
        corners = np.array([[x + i * dx, y + j * dy, z + k * dz] for i in (0, 1) for j in (0, 1) for k in (0, 1)])
        for a, b, c, d in ((0, 1, 3, 2), (4, 5, 7, 6), (0, 1, 5, 4), (2, 3, 7, 6), (0, 2, 6, 4), (1, 3, 7, 5)):
            faces.append(corners[[a, b, c, d]])
    ax.add_collection3d(Poly3DCollection(faces, facecolors=np.repeat(colours, 6, axis=0), edgecolors="k",
                                         linewidths=0.2, alpha=0.9))
    top = int((placements[:, 3] + placements[:, 6]).max())
    ax.plot([0, length, length, 0, 0], [0, 0, width, width, 0], [0] * 5, color="k", lw=0.8)
    ax.set(xlim=(0, length), ylim=(0, width), zlim=(0, top), xlabel="x", ylabel="y", zlabel="z", title=title)
    ax.set_box_aspect((length, width, top))


def relative_to(results, base: str = "inv_sqrt_d"):
    """Each method's objective relative to the `base` model at the same n and training seed, in %
    (100 (objective / base objective - 1)): columns setting, method, n, seed, relative. Differences
    of 1-3 %, invisible on the objective's own scale, stand out; the spread over seeds is kept."""
    models = results[results.method != "reference"]
    base_values = models[models.method == base].set_index(["setting", "n", "seed"]).objective
    if base_values.empty:
        raise ValueError(f"no {base!r} rows to compare with; methods present: {sorted(set(models.method))}")
    keyed = models.set_index(["setting", "n", "seed"])
    out = keyed.assign(relative=100 * (keyed.objective / base_values.reindex(keyed.index) - 1)).reset_index()
    return out[["setting", "method", "n", "seed", "relative"]]


# Rivals whose change against 1/sqrt(d) is an order of magnitude larger than the scaling rules': the
# relative panel's axis ignores them, so that the rules' 1-3 % differences stay visible.
FAR_FROM_BASE = ("rescale", "eie_rescale", "rescale_dist_bias", "bias_rescale", "eie_bias_rescale", "rope_rescale")


def extrapolation_figure(results, ylabel: str, reference_label: str = "reference", base: str = "inv_sqrt_d"):
    """One problem's extrapolation at a glance: a column per setting (capacity, bin); from the top,
    the mean objective against n for each method (band: standard deviation over seeds) with the
    reference solver dashed; the gap to the reference (%); and each method relative to the `base`
    model at the same n and seed (%; `relative_to`), where differences of a few per cent show.
    `results` has the columns of `eie.extrapolation.RESULT_COLUMNS`."""

    settings = list(dict.fromkeys(results.setting))
    has_base = base in set(results.method)
    rows = ("objective", "gap_pct", "relative") if has_base else ("objective", "gap_pct")
    fig, axes = plt.subplots(len(rows), len(settings), figsize=(5.2 * len(settings), 3.8 * len(rows)), squeeze=False,
                             sharex="col")
    for column, setting in enumerate(settings):
        part = results[results.setting == setting]
        lengths = sorted(part.n.unique())
        shown = list(dict.fromkeys(part.method[part.method != "reference"]))
        shown.sort(key=lambda m: m == "eie")  # EIE, the subject, drawn last (on top)
        for row, value in enumerate(rows):
            ax = axes[row, column]
            values = relative_to(part, base) if value == "relative" else part[part.method != "reference"]
            stats = values.groupby(["method", "n"], sort=False)[value].agg(["mean", "std"])
            for method in shown:
                s = stats.loc[method].reindex(lengths)
                top = method == "eie"
                ax.plot(s.index, s["mean"], marker="o", label=methods.label(method), lw=2.6 if top else 1.5,
                        zorder=5 if top else 3, **rule_kwargs(method))
                spread = s["std"].fillna(0).to_numpy()
                ax.fill_between(s.index, s["mean"] - spread, s["mean"] + spread, alpha=0.15,
                                color=rule_kwargs(method)["color"])
            if value == "relative":
                # the axis is set by the scaling rules, not by rivals an order of magnitude off (they are clipped)
                near = stats[~stats.index.get_level_values(0).isin(FAR_FROM_BASE)]
                reach = (near["mean"].abs() + near["std"].fillna(0)).max()
                limit = max(5.0, 1.1 * float(reach)) if np.isfinite(reach) else 5.0
                ax.set_ylim(-limit, limit)
            if value == "objective":
                reference = part[part.method == "reference"].set_index("n").objective.reindex(lengths)
                if np.isfinite(reference.to_numpy(dtype=float)).any():
                    ax.plot(reference.index, reference, ls=(0, (4, 1, 1, 1)), color="0.45", lw=2, marker="x",
                            label=reference_label)
                ax.set(ylabel=ylabel, title=setting or None)
                ax.legend(fontsize=7)
            elif value == "gap_pct":
                ax.axhline(0, color="black", lw=0.8, ls="--")
                ax.set(ylabel=f"gap to {reference_label} (%)")
            else:
                ax.axhline(0, color="black", lw=0.8, ls="--")
                clipped = [methods.label(m) for m in FAR_FROM_BASE if m in shown]
                ax.set(ylabel=f"vs {methods.label(base)} at the same n (%)"
                              + (f"\n({', '.join(clipped)} off the axis)" if clipped else ""))
            if row == len(rows) - 1:
                ax.set(xlabel="$n$")
            length_axis(ax, min(lengths), max(lengths))
    fig.tight_layout()
    return fig


P_FLOOR = 1e-12  # the training figure's p-values below this are drawn at it
SEED_LINE_STYLES = ("-", "--", ":", "-.")


def _seed_kwargs(rule: str, seed: int, seeds: list) -> dict:
    """The rule's colour and style (`rule_kwargs`), with the line style cycling over the seeds when
    there are several, so that the seeds of one rule can be told apart."""
    kwargs = dict(rule_kwargs(rule))
    if len(seeds) > 1:
        kwargs["linestyle"] = SEED_LINE_STYLES[seeds.index(seed) % len(SEED_LINE_STYLES)]
    return kwargs


def training_figure(logs, ylabel: str, maximise: bool = False, mark_lr_drops: bool = False, sampled: bool = False,
                    references: dict | None = None, at_n: int | None = None, reference_name: str = "reference"):
    """Training at a glance: a panel per setting with the held-out greedy objective per epoch, one
    line per (rule, seed; the seeds of a rule share its colour and differ in line style); a last
    panel with the baseline test's p-value (the 0.05 line dotted; p below 1e-12 drawn at 1e-12, so
    that the axis shows the range where the test decides).
    `logs` are `eie.study.train_problem`'s (columns setting, rule, seed, epoch, eval_cost, p_value,
    and lr, train_cost); with `mark_lr_drops` (for runs with `lr_drops`; not for `lr_decay_on_p`, whose small
    steps would crowd the lines) the epochs where the learning rate was lowered are marked ▼; with
    `maximise` the objective shown is -eval_cost (bin packing's load rate). `sampled`: also the
    mean objective of the solutions REINFORCE sampled on each epoch's training batches, faint, in
    the same colour and style (how far the sampling policy is from its greedy decoding).
    `references` ({setting: {n: reference objectives}}, `eie.study.evaluate_problem`'s) with `at_n`:
    the reference solver's mean at the training length, a grey dashed line named `reference_name`."""
    settings = list(dict.fromkeys(logs.setting))
    seeds = sorted(set(logs.seed))
    fig, axes = plt.subplots(1, len(settings) + 1, figsize=(5.2 * (len(settings) + 1), 3.6), squeeze=False)
    marked = False
    for ax, setting in zip(axes[0][:-1], settings, strict=True):  # the last axis: the p-values
        for (rule, seed), log in logs[logs.setting == setting].groupby(["rule", "seed"], sort=False):
            objective = -log.eval_cost if maximise else log.eval_cost
            ax.plot(log.epoch, objective, alpha=0.8, label=f"{methods.label(rule)}, seed {seed}",
                    **_seed_kwargs(rule, seed, seeds))
            if sampled:
                ax.plot(log.epoch, -log.train_cost if maximise else log.train_cost, alpha=0.3, lw=0.8, label="_",
                        **_seed_kwargs(rule, seed, seeds))
            dropped = (log.lr < log.lr.shift()).to_numpy() if mark_lr_drops and "lr" in log else []
            if any(dropped):
                ax.plot(log.epoch[dropped], objective[dropped], "v", ms=7, ls="none", label="_",
                        color=rule_kwargs(rule).get("color"))
                marked = True
        if references is not None and at_n in references.get(setting, {}):
            ax.axhline(float(np.mean(references[setting][at_n])), color="grey", ls="--", lw=1,
                       label=f"{reference_name}, n = {at_n}")
        ax.set(xlabel="epoch", ylabel=f"held-out {ylabel}", title=setting or "held-out objective")
    if marked:  # one legend entry, in the panel that has the legend
        axes[0, 0].plot([], [], "v", ms=7, ls="none", color="grey", label="learning rate lowered")
    if sampled:
        axes[0, 0].plot([], [], color="grey", alpha=0.3, lw=0.8, label="faint: sampled, training batches")
    axes[0, 0].legend(fontsize=7)
    p_axis = axes[0, -1]
    for (_setting, rule, seed), log in logs.groupby(["setting", "rule", "seed"], sort=False):
        p_axis.plot(log.epoch, np.clip(log.p_value, P_FLOOR, None), alpha=0.6, **_seed_kwargs(rule, seed, seeds))
    p_axis.axhline(0.05, color="grey", ls=":")
    p_axis.set(xlabel="epoch", ylabel="p-value (paired t-test)", yscale="log", ylim=(P_FLOOR / 3, 3),
               title=f"baseline test (p < {P_FLOOR:.0e} drawn at {P_FLOOR:.0e})")
    fig.tight_layout()
    return fig


def packings_figure(problem, instance: dict, solutions: dict, title: str = ""):
    """The first instance of `instance` packed by each of `solutions` ({name: (B, n, 4) placements}),
    side by side in 3D, each titled with its load rate."""
    fig = plt.figure(figsize=(5 * len(solutions), 4.2))
    for i, (name, solution) in enumerate(solutions.items()):
        rate = float(problem.load_rate(instance, solution)[0])
        draw_packing(fig.add_subplot(1, len(solutions), 1 + i, projection="3d"), solution[0].cpu().numpy(),
                     problem.length, problem.width, title=f"{name}: {rate:.1f} %")
    if title:
        fig.suptitle(title)
    return fig


def receptive_field_figure(measured, theory, N: int):
    """The 2D receptive-field condition at a glance (`eie.receptive_field`): left, the Monte-Carlo row
    entropy minus its value at N against n, one colour per slope, one line style per configuration
    (invariance is the zero line); right, the theoretical receptive field in cities (query at the
    centre of the square) with and without density-preserving rescaling. Each panel has one legend
    for the colours (slopes) and one for the line styles."""
    from matplotlib.lines import Line2D

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    slopes = sorted(set(measured.slope) | set(theory.slope))
    colours = dict(zip(slopes, sns.color_palette("deep", len(slopes)), strict=True))
    styles = dict(zip(dict.fromkeys(measured.configuration), ["-", "--", ":", "-."], strict=False))  # at most four
    lengths = sorted(measured.n.unique())

    def slope_legend(axis, shown):
        handles = [Line2D([], [], color=colours[m], marker="o", ms=3, label=f"m = {m:.2g}" + (" (no bias)" if m == 0 else ""))
                   for m in shown]
        return axis.legend(handles=handles, fontsize=7, loc="upper left", title="slope", title_fontsize=7)

    for (configuration, slope), part in measured.groupby(["configuration", "slope"], sort=False):
        part = part.sort_values("n")
        change = part.entropy.to_numpy() - float(part.entropy[part.n == N].iloc[0])
        left.plot(part.n, change, marker="o", ms=3, color=colours[slope], ls=styles[configuration])
    left.axhline(0, color="black", lw=0.8)
    left.set(xlabel="$n$", ylabel="row entropy minus its value at N (nats)", title="Monte Carlo (query at the centre)")
    length_axis(left, N, max(lengths))
    left.add_artist(slope_legend(left, sorted(measured.slope.unique())))
    left.legend(handles=[Line2D([], [], color="grey", ls=ls, label=name) for name, ls in styles.items()],
                fontsize=7, loc="upper center", title="configuration", title_fontsize=7)
    shown = sorted(m for m in theory.slope.unique() if m > 0)
    for (slope, rescaled), part in theory.groupby(["slope", "rescaled"]):
        right.plot(part.n, part.trf_cities, color=colours[slope], ls="--" if rescaled else "-", marker="o", ms=3)
    right.plot(lengths, np.array(lengths) - 1, color="black", lw=0.8, ls=":")
    right.set(xlabel="$n$", ylabel="cities within the TRF radius", yscale="log", title="theory (query at the centre)")
    right.set_ylim(bottom=float(theory[theory.slope > 0].trf_cities.min()) / 5)  # room for the legend below the lines
    length_axis(right, N, max(lengths))
    right.add_artist(slope_legend(right, shown))
    right.legend(handles=[Line2D([], [], color="grey", ls="-", label="coordinates as they are"),
                          Line2D([], [], color="grey", ls="--", label=r"coordinates $\times\sqrt{n/N}$"),
                          Line2D([], [], color="black", lw=0.8, ls=":", label="n - 1 (the whole instance)")],
                 fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def rescaling_figure(sweep):
    """`eie.rivals.rescaling_sweep` at a glance: per model, the mean tour length relative to factor 1
    (%) against the coordinate factor, one line per n, the density-preserving sqrt(n/N) marked."""
    models = list(dict.fromkeys(sweep.model))
    fig, axes = plt.subplots(1, len(models), figsize=(5 * len(models), 3.8), squeeze=False)
    N = sweep.n.min()
    mean = sweep.groupby(["model", "n", "factor"]).objective.mean()
    palette = dict(zip(sorted(sweep.n.unique()), sns.color_palette("rocket_r", sweep.n.nunique()), strict=True))
    for ax, model in zip(axes[0], models, strict=True):
        for n, colour in palette.items():
            curve = mean.loc[(model, n)]
            ax.plot(curve.index, 100 * (curve / curve.loc[1.0] - 1), marker="o", ms=3, color=colour, label=f"n = {n}")
            ax.axvline((n / N) ** 0.5, color=colour, lw=0.6, ls=":")
        ax.axhline(0, color="black", lw=0.8)
        ax.set(xlabel="coordinate factor s", ylabel="tour length vs s = 1 (%)", title=methods.label(model))
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def tsplib_figure(results, N: int, base: str = "inv_sqrt_d"):
    """`eie.tsplib.evaluate_tsplib` at a glance: left, each method's gap to the optimum (%, mean over
    seeds) against the instance's size; right, each method's gap minus the `base` model's on the same
    instance (percentage points), where the differences the left panel hides show: a log axis on the
    left, a symmetric-log one on the right (linear within 10 points of 0), so a few-point difference
    and a failing method's hundreds both read. The training length N is marked; lines join the
    instances in order of size."""
    gaps = results.groupby(["method", "n", "name"], sort=False).gap_pct.mean().reset_index().sort_values(["n", "name"])
    shown = list(dict.fromkeys(results.method))
    panels = ("gap", "vs base") if base in shown else ("gap",)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 2.5, 4.2), squeeze=False)
    base_gap = gaps[gaps.method == base].set_index("name").gap_pct
    shown.sort(key=lambda m: m == "eie")  # EIE, the subject, drawn last (on top)
    markers = dict(zip(shown, itertools.cycle("osv^DPX*<>hpd8H")))  # rivals may share a colour: markers tell them apart
    for ax, panel in zip(axes[0], panels, strict=True):
        for method in shown:
            part = gaps[gaps.method == method]
            values = part.gap_pct.to_numpy()
            if panel != "gap":
                values = values - base_gap.reindex(part.name).to_numpy()
            top = method == "eie"
            ax.plot(part.n, values, marker=markers[method], ms=4 if top else 3, lw=2.0 if top else 0.8,
                    zorder=5 if top else 2, label=methods.label(method), **rule_kwargs(method))
        ax.axvline(N, color="grey", lw=0.8, ls=":")
        if panel == "gap":
            if (gaps.gap_pct > 0).all():
                ax.set_yscale("log")
            else:  # an optimal tour found: a gap of 0
                ax.set_yscale("symlog", linthresh=1)
            ax.set(ylabel="gap to the optimal tour (%)", title="TSPLIB, greedy (mean over seeds)")
        else:
            ax.axhline(0, color="black", lw=0.8)
            ax.set_yscale("symlog", linthresh=10)
            low, high = ax.get_ylim()
            ticks = [0.0] + [sign * 10.0**k for k in range(1, 6) for sign in (-1, 1) if low <= sign * 10.0**k <= high]
            ax.set_yticks(sorted(ticks), [f"{t:+g}" if t else "0" for t in sorted(ticks)])
            ax.set(ylabel=f"gap minus {methods.label(base)}'s (points)", title=f"against {methods.label(base)}")
        ax.set(xlabel="cities $n$ (instance)", xscale="log")
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=7)
    fig.tight_layout()
    return fig


def _decoding_style(method: str) -> dict:
    return {"color": "0.35", "linestyle": "-."} if method.startswith("const_") else rule_kwargs(method)


def _effects_with_interval(ax, effects, style: dict, offset: float, label: str, top: bool = False,
                           maximise: bool = False) -> None:
    """Per-seed effects (a Series indexed by seed and n, %) as faint points, and their mean over seeds
    with its 95 % t interval at each n; `offset` shifts the x positions (in octaves) so that several
    series at one n stay apart."""
    points = effects.reset_index()
    ax.plot(points.n.to_numpy(dtype=float) * 2**offset, points.iloc[:, -1], "o", ms=3, alpha=0.45,
            color=style["color"], label="_")
    rows = []
    for n, values in effects.groupby(level="n"):
        s = summarise_effects(values.to_numpy(), maximise=maximise)
        rows.append((n * 2**offset, s["mean"], s["mean"] - s["ci_low"], s["ci_high"] - s["mean"]))
    x, mean, low, high = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    ax.errorbar(x, mean, yerr=np.nan_to_num(np.vstack([low, high])), marker="s", ms=5, capsize=3, label=label,
                lw=2.2 if top else 1.3, zorder=5 if top else 3, **style)


def _mode_effect(part, method: str, mode: str, base: str, base_mode: str):
    """Per-seed, per-n effect (%) of `method` under `mode` against `base` under `base_mode`; `part` is
    the mean objective indexed by method, mode, seed, n."""
    return (100 * (part.loc[(method, mode)] / part.loc[(base, base_mode)] - 1)).dropna()


def decoding_modes_figure(frame, base: str = "inv_sqrt_d"):
    """Does a method's effect depend on how the model decodes? `frame` is `eie.decoding_modes`'s table
    (columns problem, setting, seed, n, mode, method, mean). A row per problem and setting: first, the
    `base` model's objective under each mode relative to its own greedy decoding (%: does the mode
    itself help?); then a panel per mode with each method against `base` under that same mode, at
    the same n and seed (%), titled with the seeds it holds ("not run" where a row lacks the mode).
    Faint points are seeds; squares the mean over seeds with its 95 % t interval (none with one seed)."""
    groups = list(dict.fromkeys(zip(frame.problem, frame.setting, strict=True)))
    modes = list(dict.fromkeys(frame["mode"]))
    spread = lambda k: np.linspace(-0.06, 0.06, k) if k > 1 else [0.0]  # noqa: E731  (octaves between series)
    fig, axes = plt.subplots(len(groups), len(modes) + 1, figsize=(3.9 * (len(modes) + 1), 3.6 * len(groups)),
                             squeeze=False)
    for row, (problem, setting) in enumerate(groups):
        maximise = PROBLEMS[problem].maximise
        name = f"{problem.upper()}{' ' + setting if setting else ''}: " if len(groups) > 1 else ""
        rows = frame[(frame.problem == problem) & (frame.setting == setting)]
        part = rows.set_index(["method", "mode", "seed", "n"])["mean"].sort_index()
        present = set(part.index.droplevel(["seed", "n"]))
        shown = [m for m in dict.fromkeys(rows.method) if m != base]
        shown.sort(key=lambda m: m == "eie")  # EIE, the subject, drawn last (on top)
        lengths = sorted(rows.n.unique())
        ax = axes[row, 0]
        others = [m for m in modes if m != "greedy" and (base, m) in present]
        for mode, offset, colour in zip(others, spread(len(others)), sns.color_palette("deep"), strict=False):
            if (base, "greedy") in present:
                _effects_with_interval(ax, _mode_effect(part, base, mode, base, "greedy"), {"color": colour}, offset,
                                       mode, maximise=maximise)
        ax.set(ylabel=f"{methods.label(base)}: mode vs greedy (%)", title=f"{name}the mode itself")
        for column, mode in enumerate(modes, start=1):
            ax = axes[row, column]
            for method, offset in zip(shown, spread(len(shown)), strict=True):
                if (method, mode) in present and (base, mode) in present:
                    _effects_with_interval(ax, _mode_effect(part, method, mode, base, mode), _decoding_style(method),
                                           offset, method_label(method), top=method == "eie", maximise=maximise)
            seeds = rows[rows["mode"] == mode].seed.nunique()
            if not seeds:
                ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center", color="grey")
                ax.set_yticks([])
            ax.set(title=f"{name}{mode} ({seeds} seed{'s' * (seeds != 1)})", ylabel=f"vs {methods.label(base)}, same mode (%)")
        for ax in axes[row]:
            ax.axhline(0, color="black", lw=0.8)
            ax.set_xscale("log")
            ax.set_xticks(lengths, [str(n) for n in lengths])
            ax.xaxis.set_minor_formatter(plt.NullFormatter())
            ax.set_xlim(min(lengths) / 1.3, max(lengths) * 1.3)
            ax.set(xlabel="$n$")
        for ax in axes[row][:2]:
            if ax.get_legend_handles_labels()[0]:  # a mode not run has nothing to name
                ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
