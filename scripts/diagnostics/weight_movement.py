"""How far training moved a model's weights between two checkpoints of the same training, against
the learning rates it trained at in between.

    .venv/bin/python scripts/diagnostics/weight_movement.py EARLIER.pt LATER.pt [--steps-per-epoch 10]

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
from pathlib import Path

from eie.checkpoints import read_checkpoint


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("earlier", type=Path)
    parser.add_argument("later", type=Path)
    parser.add_argument("--steps-per-epoch", type=int, default=10, help="the training's optimiser steps per epoch")
    args = parser.parse_args(argv)
    moved = weight_movement(read_checkpoint(args.earlier), read_checkpoint(args.later), args.steps_per_epoch)
    print(f"epochs {moved['epochs']}: summed rate {moved['summed_rate']:.3g}; largest change of a weight "
          f"{moved['largest_change']:.3g} ({moved['largest_over_rate']:.2f} x the summed rate); all weights "
          f"{moved['relative_change']:.3g} of their norm")
    return 0


if __name__ == "__main__":
    sys.exit(main())
