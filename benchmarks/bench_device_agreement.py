"""The paper-scale evaluation on another device: run 1's and run 2's trained N = 100 models
(`results/cpu_paper/models/`, seed 0) decode the study's fixed test sets (1024 instances per n) greedily
with 1/sqrt(d) and with EIE on --device, and each instance's cost is compared with the cost the CPU
computed for the committed tables (`results/cpu_paper/{tsp,cvrp}_instance_costs.npz`).

Prints, per (problem, method, n): seconds to decode the 1024 instances, both means, the share of
instances whose cost agrees to 1e-4 (relative), and the largest relative difference. Greedy decoding
takes an argmax at every step, so a last-bit difference between devices can change a tour; what the
study needs is that the means agree within their standard error.
Run: python benchmarks/bench_device_agreement.py [--device cuda] [--lengths 100 400 1600] [--instances k] [--chunk 256]
"""

import argparse
import time

import numpy as np
import torch

from eie import extrapolation, study
from eie.evaluation import fixed_test_set, greedy_costs

RUN = "cpu_paper"
SETUPS = {"tsp": ("tsp_inv_sqrt_d_n100_seed0", "tsp_instance_costs.npz", ""),
          "cvrp": ("cvrp_C10_inv_sqrt_d_n100_seed0", "cvrp_instance_costs.npz", "C10/")}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--problems", nargs="+", choices=sorted(SETUPS), default=sorted(SETUPS, reverse=True))
    parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie"])
    parser.add_argument("--lengths", type=int, nargs="+", default=[100, 400, 1600])
    parser.add_argument("--instances", type=int, default=None, help="the first k of the 1024 test instances "
                        "(default: all on a GPU, 64 on the CPU, where 1024 at n = 1600 take about 15 minutes)")
    parser.add_argument("--chunk", type=int, default=256)
    args = parser.parse_args()
    device = torch.device(args.device)
    args.instances = args.instances or (1024 if device.type == "cuda" else 64)
    results = study.results_dir(RUN)
    net, table = study.ensure_scales(16, 100, 1600, run=RUN)
    methods = extrapolation.bind_methods(args.methods, d=16, N=100, net=net, table=table)
    print(f"torch {torch.__version__} on {device}" + (f" ({torch.cuda.get_device_name(device)})"
                                                       if device.type == "cuda" else ""))
    print(f"{'problem':7} {'method':10} {'n':>5} {'seconds':>8} {'mean here':>10} {'mean CPU':>9} "
          f"{'diff/SE':>8} {'agree 1e-4':>10} {'max rel diff':>12}")
    for problem_name in args.problems:
        model_name, costs_file, prefix = SETUPS[problem_name]
        model = study.load_policies([model_name], run=RUN, device=str(device))[model_name]
        cpu_costs = np.load(results / costs_file)
        for n in args.lengths:
            instances = fixed_test_set(model.problem, n, 1024, device=device)
            instances = {key: value[:args.instances] for key, value in instances.items()}
            for method in methods:
                if device.type == "cuda":
                    torch.cuda.synchronize()
                start = time.perf_counter()
                here = greedy_costs(model, instances, method, chunk=args.chunk).cpu().numpy()
                if device.type == "cuda":
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - start
                cpu = cpu_costs[f"{prefix}{method.key}|0|{n}"][:args.instances]
                relative = np.abs(here - cpu) / cpu
                se = np.std(cpu, ddof=1) / np.sqrt(len(cpu))
                print(f"{problem_name:7} {method.key:10} {n:5d} {seconds:8.1f} {here.mean():10.4f} {cpu.mean():9.4f} "
                      f"{(here.mean() - cpu.mean()) / se:8.2f} {np.mean(relative < 1e-4):10.3f} {relative.max():12.2e}",
                      flush=True)


if __name__ == "__main__":
    main()
