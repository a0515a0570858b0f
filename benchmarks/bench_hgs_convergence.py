"""How close is HGS (`eie.solvers.hgs_cvrp_solutions`, through `CVRP.reference_costs`) to its own long-run answer after a given number of
iterations? The CVRP gaps of the study are measured against HGS stopped after `hgs_iterations`
iterations (reproducible, unlike a time limit); a reference that is still improving makes every gap
look smaller than it is. For each n it runs HGS on the first --instances instances of the study's
fixed CVRP test set (`eie.evaluation.fixed_test_set`, test seed 1234, capacity --capacity) with each
iteration budget, and prints the mean cost, its excess over the largest budget, and seconds per
instance (one thread). Run: python benchmarks/bench_hgs_convergence.py
[--lengths 400 1600] [--iterations 5000 20000 50000 150000] [--instances 1]
"""

import argparse
import statistics
import time

from eie.evaluation import fixed_test_set
from eie.problems.cvrp import CVRP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[400, 1600])
    parser.add_argument("--iterations", type=int, nargs="+", default=[5000, 20000, 50000, 150000])
    parser.add_argument("--instances", type=int, default=1)
    parser.add_argument("--capacity", type=float, default=10.0)
    args = parser.parse_args()
    if args.instances < 1 or min(args.iterations) < 1 or min(args.lengths) < 1:
        parser.error("--instances, --iterations and --lengths must all be positive")
    problem = CVRP(args.capacity)
    budgets = sorted(args.iterations)
    print(f"HGS on the first {args.instances} test instance(s) per n, capacity {args.capacity:g}; "
          f"excess over {budgets[-1]} iterations")
    print(f"{'n':>5} {'iterations':>10} {'mean cost':>10} {'excess %':>9} {'s/instance':>10}")
    for n in args.lengths:
        instances = fixed_test_set(problem, n, args.instances)
        costs, seconds = {}, {}
        for budget in budgets:
            start = time.perf_counter()
            costs[budget] = problem.reference_costs(instances, iterations=budget)
            seconds[budget] = (time.perf_counter() - start) / args.instances
        best = costs[budgets[-1]]
        for budget in budgets:
            excess = 100 * statistics.mean((costs[budget] / best - 1).tolist())
            print(f"{n:>5} {budget:>10} {costs[budget].mean():>10.3f} {excess:>9.2f} {seconds[budget]:>10.1f}")


if __name__ == "__main__":
    main()
