"""Bin packing's recipe pilots at 100 boxes beside the run they branch from, epoch by epoch.

Each pilot preset (`presets/bpp_pilot_*.yaml`) starts from bpp_paper's checkpoint at the epoch it
names (`python -m eie.worker PILOT 05_train_bpp --branch-from bpp_paper --at-epoch E`) and changes
what happens after it (the warm-up's end, the learning rate, the baseline), or starts from scratch
(its first epochs differ from the source's; drawn from epoch 1, dashed). This reads the epoch log of every run
as a worker would resume it (this machine's checkpoint or the carried copy, `eie.worker.training_logs`)
and draws, per run, the held-out greedy load rate and, faint, the load of the solutions sampled on
the training batches, with the paper's 1/sqrt(d) model at 100 boxes (Table 1) as a grey line; it
writes figures/bpp_pilots_<source run>.png and prints, per run, the epochs it has, the mean greedy and sampled
load over its last 10 epochs and over the 10 epochs after the branch.

    .venv/bin/python scripts/diagnostics/bpp_pilots.py [--source presets/bpp_paper.yaml] [--pilots PRESET ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib.pyplot as plt

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, worker  # noqa: E402
from eie.paper import PAPER_BPP  # noqa: E402
from eie.plotting import apply_style, save_figure  # noqa: E402

NOTEBOOK = "05_train_bpp"


def run_logs(presets) -> dict:
    """{run name: its seed-0 1/sqrt(d) epoch log (load rates in %, positive)} for each preset with one."""
    logs = {}
    for preset in presets:
        log = worker.training_logs(preset, NOTEBOOK)
        log = log[(log.rule == "inv_sqrt_d") & (log.seed == 0)]
        if len(log):
            run = experiments.load(NOTEBOOK, preset)["run"]
            logs[run] = log.assign(greedy=-log.eval_cost, sampled=-log.train_cost)
    return logs


def branched(log, source, branch_epoch: int) -> bool:
    """Whether a pilot's log holds the source run's first `branch_epoch` epochs (it branched from it)."""
    mine, theirs = log[log.epoch <= branch_epoch], source[source.epoch <= branch_epoch]
    return len(mine) == branch_epoch and len(theirs) == branch_epoch and \
        (mine.greedy.to_numpy() == theirs.greedy.to_numpy()).all()


def summary(logs: dict, branch_epoch: int, source_run: str) -> list[str]:
    lines = []
    for run, log in logs.items():
        last, after = log.tail(10), log[(log.epoch > branch_epoch) & (log.epoch <= branch_epoch + 10)]
        line = (f"{run}: epochs 1-{int(log.epoch.max())}; last 10 epochs: greedy {last.greedy.mean():.2f} %, "
                f"sampled {last.sampled.mean():.2f} %")
        if run != source_run and not branched(log, logs[source_run], branch_epoch):
            line += " (from scratch)"
        elif len(after) and log.epoch.max() > branch_epoch + 10:
            line += f"; epochs {branch_epoch + 1}-{branch_epoch + 10}: greedy {after.greedy.mean():.2f} %, " \
                    f"sampled {after.sampled.mean():.2f} %"
        lines.append(line)
    return lines


def figure(logs: dict, source_run: str, branch_epoch: int):
    apply_style()
    fig, ax = plt.subplots(figsize=(10.5, 4.2), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for colour, (run, log) in zip(colours[:len(logs)], logs.items(), strict=True):
        own = run == source_run or not branched(log, logs[source_run], branch_epoch)
        shown, style = (log, "-" if run == source_run else "--") if own else (log[log.epoch >= branch_epoch], "-")
        ax.plot(shown.epoch, shown.greedy, color=colour, lw=1.4, ls=style, label=f"{run}: greedy, held-out")
        ax.plot(shown.epoch, shown.sampled, color=colour, lw=0.9, ls=style, alpha=0.45,
                label=f"{run}: sampled, training batches")
    paper = PAPER_BPP[(120, 100)]["inv_sqrt_d"][0][0]
    ax.axhline(paper, color="grey", ls="--", lw=1, label=f"paper's 1/√d model at 100 boxes ({paper} %)")
    ax.axvline(branch_epoch, color="grey", ls=":", lw=1)
    ax.set(xlabel="epoch", ylabel="load rate (%)",
           title=f"Bin packing, 100 boxes: the pilots from {source_run}'s epoch {branch_epoch} (dashed: from scratch)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside: no line hidden
    return fig


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", default="presets/bpp_paper.yaml", help="the run the pilots branch from")
    parser.add_argument("--pilots", nargs="+", default=sorted(str(p.relative_to(ROOT))
                                                               for p in (ROOT / "presets").glob("bpp_pilot_*.yaml")),
                        help="the pilot presets (default: every presets/bpp_pilot_*.yaml)")
    parser.add_argument("--branch-epoch", type=int, default=60, help="the epoch the pilots branch at (60)")
    args = parser.parse_args(argv)
    source_run = experiments.load(NOTEBOOK, args.source)["run"]
    logs = run_logs([args.source, *args.pilots])
    if source_run not in logs:
        parser.error(f"{args.source}: no epoch log of its seed-0 model here or in its carry/ folder")
    for line in summary(logs, args.branch_epoch, source_run):
        print(line)
    path = save_figure(figure(logs, source_run, args.branch_epoch), "bpp_pilots", run=source_run)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
