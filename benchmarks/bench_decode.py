"""Greedy decoding throughput (instances per second) of the TSP or CVRP model: the precomputed
decoder against a straightforward one that re-projects node keys and values at every step, measured
in the same run, and the time 16384 instances (the paper's test set) would take at that rate.

Targets: >= 3x the straightforward decoder on CPU at n = 1600 (TSP); CVRP n = 1600, 16384
instances in under 2 minutes on a GPU (the paper's Table 4: 8.18 hours). Prints medians over
repeats, on CPU and, when one is present, on CUDA.
Run: python benchmarks/bench_decode.py [--problem tsp|cvrp] [--repeats 3]
"""

import argparse
import statistics
import time

import torch

from eie.attention import Attention
from eie.model import AttentionModel
from eie.problems import make_problem
from eie.scaling import inv_sqrt_d

CASES = {"cpu": [(100, 256), (1600, 16)], "cuda": [(100, 4096), (1600, 512)]}


def throughput(model, instance, recompute, repeats, device):
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        with torch.no_grad():
            model.rollout(instance, "greedy", recompute_each_step=recompute)
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    batch = instance["coords"].shape[0]
    return batch / statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--problem", choices=["tsp", "cvrp"], default="tsp")
    parser.add_argument("--capacity", type=float, default=10.0, help="CVRP vehicle capacity")
    args = parser.parse_args()
    problem = make_problem(args.problem, **({"capacity": args.capacity} if args.problem == "cvrp" else {}))
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"problem {args.problem}" + (f", capacity {args.capacity:g}" if args.problem == "cvrp" else ""))
    print(f"{'device':6} {'n':>5} {'batch':>6} {'precomputed inst/s':>19} {'recompute inst/s':>17} {'ratio':>6} "
          f"{'16384 inst. (h)':>16}")
    for device in devices:
        torch.manual_seed(0)
        model = AttentionModel(problem, Attention(inv_sqrt_d(16))).to(device).eval()
        for n, batch in CASES[device]:
            instance = problem.generate(batch, n, torch.Generator().manual_seed(0), device)
            throughput(model, {k: v[:2] for k, v in instance.items()}, False, 1, device)  # warm-up
            fast = throughput(model, instance, False, args.repeats, device)
            slow = throughput(model, instance, True, args.repeats, device)
            print(f"{device:6} {n:5d} {batch:6d} {fast:19.1f} {slow:17.1f} {fast / slow:6.2f} {16384 / fast / 3600:16.3f}")


if __name__ == "__main__":
    main()
