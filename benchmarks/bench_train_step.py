"""Time of one REINFORCE training step at the paper's TSP settings (n = 100, batch 256): sampled
rollout with gradients, greedy baseline rollout, backward, Adam step. Median over steps, on CPU and,
when present, on CUDA. Run: python benchmarks/bench_train_step.py [--steps 3]
"""

import argparse
import statistics
import time

import torch

from eie.training import TrainConfig, build_model


def step_times(device, steps, n, batch):
    config = TrainConfig(n_train=n, batch_size=batch)
    torch.manual_seed(0)
    model = build_model(config, device)
    baseline = build_model(config, device).eval()
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    data = torch.Generator().manual_seed(0)
    sample = torch.Generator(device=device).manual_seed(0)
    times = []
    for _ in range(steps + 1):  # the first is warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        instance = model.problem.generate(batch, n, data, device)
        solution, log_likelihood = model.rollout(instance, "sample", generator=sample)
        cost = model.problem.cost(instance, solution)
        with torch.no_grad():
            base_cost = model.problem.cost(instance, baseline.rollout(instance)[0])
        loss = ((cost - base_cost) * log_likelihood).mean()
        optimiser.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    for device in ["cpu"] + (["cuda"] if torch.cuda.is_available() else []):
        for n, batch in [(20, 128), (100, 256)]:
            median = step_times(device, args.steps, n, batch)
            print(f"{device:5} n = {n:4d} batch = {batch:4d}: {median:.3f} s per step "
                  f"(500 epochs x 10 steps: {median * 5000 / 3600:.1f} h)")


if __name__ == "__main__":
    main()
