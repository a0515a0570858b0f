"""Where a bin-packing training step's time goes, to decide whether replaying the placement head
(as `AttentionModel.sample_with_gradients` replays the TSP/CVRP decoder) is worth building.
Bin packing's sampled rollout runs step by step with gradients (its action head is not replayed);
this times that rollout, its backward pass, and the same rollout without gradients (the least a
replayed path would still pay), medians of 4 repeats at the preset's training size (20 boxes,
bin 120 x 100, batch 64), one thread.
Run from the repository root: .venv/bin/python scripts/diagnostics/bpp_step_split.py
"""

import argparse
import statistics
import time

import torch

from eie.threads import use_threads  # noqa: E402
from eie.training import TrainConfig, build_model

argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()

use_threads(1)
config = TrainConfig(problem="bpp", problem_options={"length": 120, "width": 100}, n_train=20, batch_size=64)
torch.manual_seed(0)
model = build_model(config, "cpu")
generator = torch.Generator().manual_seed(0)
instance = model.problem.generate(config.batch_size, config.n_train, generator)
times = {"rollout with gradients": [], "its backward": [], "rollout without gradients": []}
for _ in range(4):
    start = time.perf_counter()
    _, log_likelihood = model.rollout(instance, "sample", generator=generator)
    forward = time.perf_counter()
    log_likelihood.mean().backward()
    backward = time.perf_counter()
    with torch.no_grad():
        model.rollout(instance, "sample", generator=generator)
    times["rollout with gradients"].append(forward - start)
    times["its backward"].append(backward - forward)
    times["rollout without gradients"].append(time.perf_counter() - backward)
for name, seconds in times.items():
    print(f"{name}: {statistics.median(seconds):.2f} s")
