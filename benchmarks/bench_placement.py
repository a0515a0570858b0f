"""Bin packing placement step: resting heights and trapped volume for all six orientations at every
corner position of the height map (the sliding-window maximum), batch B = 64 on a 120 x 100 bin,
plus one full decoding step of the untrained attend2pack model (pointer + placement + drop).

Prints medians over repeats, on CPU and, when one is present, on CUDA.
Run: python benchmarks/bench_placement.py [--repeats 20] [--batch 64] [--boxes 100]
"""

import argparse
import statistics
import time

import torch

from eie.attention import Attention
from eie.model import AttentionModel
from eie.problems import BPP
from eie.scaling import inv_sqrt_d


def median_seconds(fn, repeats, device):
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--boxes", type=int, default=100)
    args = parser.parse_args()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads; bin 120 x 100, B = {args.batch}")
    print(f"{'device':6} {'candidates (ms)':>16} {'decoding step (ms)':>19}")
    problem = BPP(120, 100)
    for device in devices:
        torch.manual_seed(0)
        generator = torch.Generator().manual_seed(0)
        instance = problem.generate(args.batch, args.boxes, generator, device)
        state = problem.initial_state(instance)
        for step in range(args.boxes // 2):  # a half-full bin, packed in order, corner placements
            box = torch.full((args.batch,), step, device=device)
            zero = torch.zeros_like(box)
            state = state.update(torch.stack([box, zero, zero + (step * 7) % 60, zero + (step * 11) % 50], 1))
        box = torch.full((args.batch,), args.boxes - 1, device=device)
        candidates = median_seconds(lambda: state.candidates(box), args.repeats, device)
        model = AttentionModel(problem, Attention(inv_sqrt_d(16))).to(device).eval()
        with torch.no_grad():
            cache = model.decoder.precompute(model.encode(instance))
            ctx = model.glimpse_context(instance, state)

            def step():
                log_p = model.decoder.step(cache, state, model.attention, ctx)
                action, _ = model.action_head(state, cache.nodes, log_p.argmax(1), "greedy")
                state.update(action)

            step_time = median_seconds(step, args.repeats, device)
        print(f"{device:6} {1e3 * candidates:16.1f} {1e3 * step_time:19.1f}")


if __name__ == "__main__":
    main()
