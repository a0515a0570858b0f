"""Greedy decoding throughput (instances per second) of the TSP or CVRP model, three decoders in the
same run, their repeats alternating: the fast decoding step (`Decoder.step`: the glimpse as product,
masked softmax, product with keys stored transposed; the pointer as one product), the step as it was
before it (`reference=True`: the fused attention kernel and (B, n, D) x (B, D, 1) products, kept as the
reference implementation), and a straightforward decoder that also re-projects the node keys and
values at every step. Also the time 16384 instances (the paper's test set) would take.

Targets: the fast step >= 3x the reference at n = 1600; CVRP n = 1600, 16384 instances in
under 2 minutes on a GPU (the paper's Table 4: 8.18 hours). Medians over repeats, on CPU and, when one
is present, on CUDA.
Run: python benchmarks/bench_decode.py [--problem tsp|cvrp] [--repeats 3]
"""

import argparse
import statistics
import time

import torch
from devices import add_device_option, chosen_devices

from eie.attention import Attention
from eie.model import AttentionModel
from eie.problems import make_problem
from eie.scaling import inv_sqrt_d

CASES = {"cpu": [(100, 256), (1600, 16)], "cuda": [(100, 4096), (1600, 512)]}


PATHS = {"fast": {}, "reference": {"reference": True}, "recompute": {"reference": True, "recompute_each_step": True}}


def medians(model, instance, repeats, device) -> dict:
    """Median seconds of a greedy rollout per decoder of PATHS, the decoders taking turns."""
    times = {name: [] for name in PATHS}
    for _ in range(repeats):
        for name, options in PATHS.items():
            if device == "cuda":
                torch.cuda.synchronize()
            start = time.perf_counter()
            with torch.no_grad():
                model.rollout(instance, "greedy", **options)
            if device == "cuda":
                torch.cuda.synchronize()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--problem", choices=["tsp", "cvrp"], default="tsp")
    parser.add_argument("--capacity", type=float, default=10.0, help="CVRP vehicle capacity")
    add_device_option(parser)
    args = parser.parse_args()
    problem = make_problem(args.problem, **({"capacity": args.capacity} if args.problem == "cvrp" else {}))
    devices = chosen_devices(args)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads")
    print(f"problem {args.problem}" + (f", capacity {args.capacity:g}" if args.problem == "cvrp" else ""))
    print(f"{'device':6} {'n':>5} {'batch':>6} " + " ".join(f"{name + ' inst/s':>16}" for name in PATHS)
          + f" {'fast/reference':>15} {'fast/recompute':>15} {'16384 inst. (h)':>16}")
    for device in devices:
        torch.manual_seed(0)
        model = AttentionModel(problem, Attention(inv_sqrt_d(16))).to(device).eval()
        for n, batch in CASES[device]:
            instance = problem.generate(batch, n, torch.Generator().manual_seed(0), device)
            medians(model, {k: v[:2] for k, v in instance.items()}, 1, device)  # warm-up
            seconds = medians(model, instance, args.repeats, device)
            rates = {name: batch / t for name, t in seconds.items()}
            print(f"{device:6} {n:5d} {batch:6d} " + " ".join(f"{rate:16.1f}" for rate in rates.values())
                  + f" {rates['fast'] / rates['reference']:15.2f} {rates['fast'] / rates['recompute']:15.2f}"
                  f" {16384 / rates['fast'] / 3600:16.3f}")


if __name__ == "__main__":
    main()
