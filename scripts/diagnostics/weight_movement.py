"""How far training moved a model's weights between two checkpoints of the same training, against
the learning rates it trained at in between.

    .venv/bin/python scripts/diagnostics/weight_movement.py EARLIER.pt LATER.pt [--steps-per-epoch 10]
    .venv/bin/python scripts/diagnostics/weight_movement.py --run RUN --model NAME REV [REV2]

The second form reads the run's committed checkpoint of model NAME (`eie.study.carry_folder`) as it
was at git revision REV, against it at REV2 (default: as it is in the working tree).

Prints the epochs between them, the summed learning rate of their optimiser steps (each epoch's
logged rate times its steps), the largest change of one weight (absolute, and as a multiple of that
summed rate: Adam moves a weight by about the rate per step at most), and the change of all weights
together relative to their norm (root of the summed squared changes over the root of the summed
squared weights of the earlier policy). Used to judge how much the epochs at a tiny learning rate
can still change a model (`lr_floor`; results/sensitivity_lr_rule/README.md). Seconds.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

from eie.checkpoints import read_checkpoint
from eie.study import committed_checkpoint


def weight_movement(earlier: dict, later: dict, steps_per_epoch: int) -> dict:
    """{epochs, summed_rate, largest_change, largest_over_rate, relative_change} between two training
    checkpoints (`eie.checkpoints.read_checkpoint` payloads) of one model, the later one further."""
    if later["epoch"] <= earlier["epoch"]:
        raise ValueError(f"the second checkpoint (epoch {later['epoch']}) must be further than the first "
                         f"(epoch {earlier['epoch']}); give them in training order")
    if set(earlier["model"]) != set(later["model"]):
        raise ValueError("the two checkpoints hold different models (other parameter names): give two "
                         "checkpoints of the same training")
    rates = [row["lr"] for row in later["log"][earlier["epoch"]:later["epoch"]]]
    summed_rate = steps_per_epoch * sum(rates)
    squared_change = squared_weight = largest = 0.0
    for name, before in earlier["model"].items():
        if not before.is_floating_point():
            continue
        change = (later["model"][name] - before).double()
        squared_change += float((change ** 2).sum())
        squared_weight += float((before.double() ** 2).sum())
        largest = max(largest, float(change.abs().max()))
    return {"epochs": f"{earlier['epoch']}-{later['epoch']}", "summed_rate": summed_rate, "largest_change": largest,
            "largest_over_rate": largest / summed_rate if summed_rate > 0 else math.nan,
            "relative_change": math.sqrt(squared_change / squared_weight) if squared_weight > 0 else math.nan}


def committed_payload(run: str, model: str, revision: str | None) -> dict:
    """The run's committed checkpoint of `model` at git `revision` (None: the working tree's), read."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            return read_checkpoint(committed_checkpoint(run, model, revision, Path(folder)))
        except FileNotFoundError as error:
            raise SystemExit(str(error)) from error


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+", help="EARLIER.pt LATER.pt, or with --run: REV [REV2]")
    parser.add_argument("--run", help="read the run's committed checkpoint of --model at the given revisions")
    parser.add_argument("--model", help="the checkpoint's name, e.g. tsp_inv_sqrt_d_n100_seed0")
    parser.add_argument("--steps-per-epoch", type=int, default=10, help="the training's optimiser steps per epoch")
    args = parser.parse_args(argv)
    if args.run:
        if not args.model or len(args.checkpoints) > 2:
            parser.error("--run takes --model and one or two git revisions")
        revisions = [*args.checkpoints, None][:2]
        earlier, later = (committed_payload(args.run, args.model, revision) for revision in revisions)
    elif len(args.checkpoints) == 2:
        earlier, later = (read_checkpoint(Path(path)) for path in args.checkpoints)
    else:
        parser.error("give two checkpoint files, or --run RUN --model NAME and a git revision")
    moved = weight_movement(earlier, later, args.steps_per_epoch)
    print(f"epochs {moved['epochs']}: summed rate {moved['summed_rate']:.3g}; largest change of a weight "
          f"{moved['largest_change']:.3g} ({moved['largest_over_rate']:.2f} x the summed rate); all weights "
          f"{moved['relative_change']:.3g} of their norm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
