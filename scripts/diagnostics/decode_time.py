"""Greedy decoding time of a trained policy at test lengths n, and what a run's evaluation would take.

    .venv/bin/python scripts/diagnostics/decode_time.py CHECKPOINT --n 800 1600 [--batch 16]
        [--repeats 3] [--instances 256] [--decodes 12] [--threads 1]

For each n: --batch instances drawn from a seeded generator, decoded greedily (`greedy_costs`, the
feasibility check included) --repeats times after one untimed warm-up decode; prints the median
seconds per instance, and the hours that --instances instances per n would take for --decodes
decodings of each (methods times seeds: a preset with three seeds and four scales is 12). Used to
write a run's evaluation estimate before it starts (results/bpp_paper_rule_start/README.md). The
figures depend on the machine and on what else runs on it: the load average is printed beside them.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import torch

from eie.evaluation import greedy_costs
from eie.training import load_trained

INSTANCE_SEED = 20261202


def seconds_per_instance(model, n: int, batch: int, repeats: int) -> float:
    """Median over `repeats` timed greedy decodes of `batch` seeded instances at n, per instance."""
    if batch < 1 or repeats < 1:
        raise ValueError(f"--batch and --repeats must be at least 1, got {batch} and {repeats}")
    instance = model.problem.generate(batch, n, torch.Generator().manual_seed(INSTANCE_SEED + n))
    greedy_costs(model, instance, chunk=batch)  # warm-up: compiled kernels, allocator
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        greedy_costs(model, instance, chunk=batch)
        times.append(time.perf_counter() - start)
    return statistics.median(times) / batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint", type=Path)
    parser.add_argument("--n", type=int, nargs="+", required=True, help="test lengths to time")
    parser.add_argument("--batch", type=int, default=16, help="instances per timed decode")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--instances", type=int, default=256, help="instances per n in the projected evaluation")
    parser.add_argument("--decodes", type=int, default=12, help="decodings of each instance (methods x seeds)")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    model = load_trained(args.checkpoint)
    total = 0.0
    print(f"{args.checkpoint}: {model.problem.name}, {args.threads} thread(s), batch {args.batch}, "
          f"median of {args.repeats}")
    for n in args.n:
        per_instance = seconds_per_instance(model, n, args.batch, args.repeats)
        hours = per_instance * args.instances * args.decodes / 3600
        total += hours
        print(f"n = {n}: {per_instance:.3f} s per instance; {args.instances} x {args.decodes} decodings "
              f"{hours:.2f} h (load average {os.getloadavg()[0]:.2f})", flush=True)
    print(f"all n: {total:.2f} h")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
