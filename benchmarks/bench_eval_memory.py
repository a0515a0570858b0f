"""Peak memory (RSS) of a greedy evaluation at n = 1600: it must be bounded by the chunk size
(`greedy_costs(..., chunk=)`, the notebooks' `eval_chunk`), not by the number of test instances.

Each configuration runs in a fresh process (peak RSS is per process): the test set is drawn, the
untrained TSP model decodes it greedily in chunks, and the process reports its peak resident set
size and the size of the test set itself. Run: python benchmarks/bench_eval_memory.py
[--n 1600] [--configs 512:16 64:16 64:64]   (instances:chunk)
"""

import argparse
import json
import resource
import subprocess
import sys
import time


def measure(n: int, instances: int, chunk: int) -> dict:
    import torch

    from eie.attention import Attention
    from eie.evaluation import fixed_test_set, greedy_costs
    from eie.model import AttentionModel
    from eie.problems import make_problem
    from eie.scaling import inv_sqrt_d

    problem = make_problem("tsp")
    torch.manual_seed(0)
    model = AttentionModel(problem, Attention(inv_sqrt_d(16))).eval()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    instance = fixed_test_set(problem, n, instances)
    start = time.perf_counter()
    costs = greedy_costs(model, instance, chunk=chunk)
    return {"n": n, "instances": instances, "chunk": chunk, "seconds": time.perf_counter() - start,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "rss_before_mib": before, "test_set_mib": instance["coords"].numel() * 4 / 2**20,
            "mean_cost": float(costs.mean())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=1600)
    parser.add_argument("--configs", nargs="+", default=["512:16", "64:16", "64:64"])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        instances, chunk = map(int, args.child.split(":"))
        print(json.dumps(measure(args.n, instances, chunk)))
        return
    print(f"greedy evaluation, TSP n = {args.n}, untrained model, one process per row")
    print(f"{'instances':>9} {'chunk':>6} {'peak RSS (MiB)':>15} {'RSS before (MiB)':>17} {'test set (MiB)':>15} "
          f"{'seconds':>8}")
    for config in args.configs:
        out = subprocess.run([sys.executable, __file__, "--n", str(args.n), "--child", config],
                             capture_output=True, text=True, check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(f"{row['instances']:9d} {row['chunk']:6d} {row['peak_rss_mib']:15.0f} {row['rss_before_mib']:17.0f} "
              f"{row['test_set_mib']:15.2f} {row['seconds']:8.1f}")


if __name__ == "__main__":
    main()
