"""Time of one REINFORCE training step (sampled rollout, greedy baseline rollout, backward, Adam) at
the paper's settings (n = 100, batch 256), TSP and CVRP, two paths in the same run, their steps
alternating:

- fast: what `eie.training` runs: the sampled rollout decodes without gradients and the
  log-likelihood of all its steps is replayed at once (`AttentionModel.sample_with_gradients`); the
  decoding step is the fast one (`Decoder.step`);
- fast bf16: the same with the encoder's linear layers in bfloat16 (`TrainConfig.precision`; it
  trained worse models in results/precision, so float32 stays the default);
- reference: the straightforward path (the sampled rollout with gradients through every decoding
  step, and the reference decoding step, `reference=True`, in both rollouts).

Target: fast >= 3x reference for TSP100 and CVRP100 at batch 256. Medians over steps, on
CPU and, when present, on CUDA.
Run: python benchmarks/bench_train_step.py [--steps 3] [--problem tsp cvrp] [--n 100] [--batch 256]
"""

import argparse
import statistics
import time

import torch
from devices import add_device_option, chosen_devices

from eie.training import TrainConfig, build_model

OPTIONS = {"tsp": {}, "cvrp": {"capacity": 50.0}}


def train_step(model, baseline, optimiser, instance, generator, fast: bool):
    if fast:
        solution, log_likelihood = model.sample_with_gradients(instance, generator)
    else:
        solution, log_likelihood = model.rollout(instance, "sample", generator=generator, reference=True)
    cost = model.problem.cost(instance, solution)
    with torch.no_grad():
        base_cost = model.problem.cost(instance, baseline.rollout(instance, reference=not fast)[0])
    loss = ((cost - base_cost) * log_likelihood).mean()
    optimiser.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimiser.step()


def step_times(problem, device, steps, n, batch):
    """Median seconds per step of each path."""
    config = TrainConfig(problem=problem, problem_options=OPTIONS[problem], n_train=n, batch_size=batch)
    torch.manual_seed(0)
    model = build_model(config, device)
    baseline = build_model(config, device).eval()
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    data = torch.Generator().manual_seed(0)
    sample = torch.Generator(device=device).manual_seed(0)
    times = {"fast": [], "fast bf16": [], "reference": []}
    for repeat in range(steps + 1):  # the first of each is warm-up
        for path in times:
            model.encoder_precision = baseline.encoder_precision = "bfloat16" if path == "fast bf16" else "float32"
            instance = model.problem.generate(batch, n, data, device)
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            train_step(model, baseline, optimiser, instance, sample, fast=path != "reference")
            if device == "cuda":
                torch.cuda.synchronize()
            if repeat:
                times[path].append(time.perf_counter() - start)
    return {path: statistics.median(t) for path, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--problem", nargs="+", choices=sorted(OPTIONS), default=["tsp", "cvrp"])
    parser.add_argument("--n", type=int, default=100)
    parser.add_argument("--batch", type=int, default=256)
    add_device_option(parser)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"{'device':6} {'problem':7} {'n':>4} {'batch':>5} {'fast s/step':>12} {'fast bf16':>10} "
          f"{'reference s/step':>17} {'ratio':>6} {'ratio bf16':>10} {'5000 fast steps (h)':>20}")
    for device in chosen_devices(args):
        for problem in args.problem:
            median = step_times(problem, device, args.steps, args.n, args.batch)
            print(f"{device:6} {problem:7} {args.n:4d} {args.batch:5d} {median['fast']:12.3f} "
                  f"{median['fast bf16']:10.3f} {median['reference']:17.3f} {median['reference'] / median['fast']:6.2f} "
                  f"{median['reference'] / median['fast bf16']:10.2f} {median['fast'] * 5000 / 3600:20.1f}")


if __name__ == "__main__":
    main()
