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
        times_each, times_once = [], []
        for _ in range(args.repeats):
            t_each, tours_each = timed(each)
            t_once, tours_once = timed(once)
            if not torch.equal(tours_each, tours_once):
                raise SystemExit(f"n = {n}: the two paths drew different tours")
            times_each.append(t_each)
            times_once.append(t_once)
        a, b = statistics.median(times_each), statistics.median(times_once)
        print(f"n = {n}: encode every copy {1e3 * a / (args.batch * args.k):.1f} ms per solution, "
              f"encode once {1e3 * b / (args.batch * args.k):.1f} ms; {a / b:.2f}x faster (same tours)")
        if n < model_module.SHRINK_FROM:
            continue
        times_keep, times_drop = [], []
        for _ in range(args.repeats):
            shrink_from, model_module.SHRINK_FROM = model_module.SHRINK_FROM, n + 1
            t_keep, tours_keep = timed(once)
            model_module.SHRINK_FROM = shrink_from
            t_drop, tours_drop = timed(once)
            if not torch.equal(tours_keep, tours_drop):
                raise SystemExit(f"n = {n}: keeping and dropping visited nodes drew different tours")
            times_keep.append(t_keep)
            times_drop.append(t_drop)
        a, b = statistics.median(times_keep), statistics.median(times_drop)
        print(f"n = {n}: keep every column {1e3 * a / (args.batch * args.k):.1f} ms per solution, "
              f"drop visited nodes {1e3 * b / (args.batch * args.k):.1f} ms; {a / b:.2f}x faster (same tours)")


if __name__ == "__main__":
    main()
