"""Best-of-K sampling with one encoding per instance (`AttentionModel.rollout(..., copies=K)`, what
`eie.decoding.mode_costs` runs) against encoding each of the K copies, in the same run: TSP, an
untrained paper-size model (3 layers, width 128), n = 200 and 400, K = 16. Both give the same
solutions (the draws are checked equal); the encoder is what the first saves. Then, at n >=
`eie.model.SHRINK_FROM`, the rollout that drops visited nodes from its key cache against one that
keeps every column (same draws, checked). Medians over --repeats calls, the two alternating.
Run: python benchmarks/bench_sampling.py [--repeats 3] [--batch 8]
"""

import argparse
import statistics
import time

import torch

from eie import model as model_module
from eie.problems.base import CheckedInstance
from eie.training import TrainConfig, build_model


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch", type=int, default=8, help="instances per call (each decoded K times)")
    parser.add_argument("--k", type=int, default=16)
    parser.add_argument("--lengths", type=int, nargs="+", default=[200, 400])
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_grad_enabled(False)
    model = build_model(TrainConfig(problem="tsp", n_train=100), "cpu").eval()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); batch {args.batch} x K = {args.k}")
    for n in args.lengths:
        instance = CheckedInstance(model.problem.generate(args.batch, n, torch.Generator().manual_seed(n)))
        repeated = CheckedInstance({key: value.repeat(args.k, *([1] * (value.dim() - 1))) for key, value in instance.items()})
        each = lambda r=repeated: model.rollout(r, "sample", torch.Generator().manual_seed(1))[0]  # noqa: E731
        once = lambda i=instance: model.rollout(i, "sample", torch.Generator().manual_seed(1), copies=args.k)[0]  # noqa: E731
        per_solution = args.batch * args.k
        compare(n, each, once, ("encode every copy", "encode once"), args.repeats, per_solution)
        if n >= model_module.SHRINK_FROM:
            compare(n, lambda f=once, n=n: keeping_every_column(f, n), once, ("keep every column", "drop visited nodes"),
                    args.repeats, per_solution)


def keeping_every_column(rollout, n: int):
    """`rollout()` with the key cache keeping all n columns (SHRINK_FROM above n for the call)."""
    shrink_from, model_module.SHRINK_FROM = model_module.SHRINK_FROM, n + 1
    try:
        return rollout()
    finally:
        model_module.SHRINK_FROM = shrink_from


def compare(n: int, slow, fast, names, repeats: int, per_solution: int) -> None:
    """Time `slow` and `fast` alternately `repeats` times, require the same tours, print the medians per solution."""
    times = ([], [])
    for _ in range(repeats):
        (t_slow, tours_slow), (t_fast, tours_fast) = timed(slow), timed(fast)
        if not torch.equal(tours_slow, tours_fast):
            raise SystemExit(f"n = {n}: {names[0]} and {names[1]} drew different tours")
        times[0].append(t_slow)
        times[1].append(t_fast)
    a, b = statistics.median(times[0]), statistics.median(times[1])
    print(f"n = {n}: {names[0]} {1e3 * a / per_solution:.1f} ms per solution, "
          f"{names[1]} {1e3 * b / per_solution:.1f} ms; {a / b:.2f}x faster (same tours)")

if __name__ == "__main__":
    main()
