"""Bin packing's placement, B = 64 on a 120 x 100 bin with a half-full height map: the placement options
(for each of the six orientations and every corner column, the lowest resting height over y, its y
and the trapped volume: `heightmap.lowest_placements`) and one full decoding step of the untrained
attend2pack model (pointer + placement + drop), each by the compiled CPU kernel (what runs on a CPU)
and by the torch composition (the reference; what runs on a GPU), repeats alternating; then one
REINFORCE training step at 100 boxes, batch 64 (sampled rollout with gradients, greedy baseline
rollout, backward, Adam), kernel path, two ways, steps alternating: as the library runs it (the
step context runs the placement head's frontier convolutions with its own, on a channels-last
frontier: `FrontierEncoder.share_convolutions`; the placement layer's sum and tanh in place:
`PlacementHead.hidden`) and the straightforward way (each encoder its own convolutions, plain
layout, the placement layer written out). `--train-boxes 20` gives the step of `presets/cpu_long_v2.yaml`.

Target: the decoding step in <= 1/10 of the torch path's time. Medians over repeats, on CPU
and, when one is present, on CUDA (the torch path only).
Run: python benchmarks/bench_placement.py [--repeats 20] [--batch 64] [--boxes 100] [--train-boxes 100] [--train-steps 3]
"""

import argparse
import statistics
import time

import torch
from devices import add_device_option, chosen_devices

from eie.attention import Attention
from eie.model import AttentionModel
from eie.problems import BPP, bpp, heightmap
from eie.scaling import inv_sqrt_d
from eie.training import TrainConfig, build_model


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


def alternate(functions: dict, repeats: int, device) -> dict:
    """Median seconds of each function, calls taking turns (the first round is warm-up)."""
    times = {name: [] for name in functions}
    for repeat in range(repeats + 1):
        for name, fn in functions.items():
            seconds = median_seconds(fn, 1, device)
            if repeat:
                times[name].append(seconds)
    return {name: statistics.median(t) for name, t in times.items()}


def with_kernel(use: bool, fn):
    def run():
        saved, heightmap.CPU_KERNEL = heightmap.CPU_KERNEL, use and heightmap.CPU_KERNEL
        try:
            fn()
        finally:
            heightmap.CPU_KERNEL = saved
    return run


def training_step_seconds(problem, batch, boxes, steps, device) -> dict:
    """Median seconds of a training step, {"shared": as the library runs it, "separate": the
    straightforward convolutions}, steps alternating (the first of each is warm-up)."""
    config = TrainConfig(problem="bpp", problem_options={"length": problem.length, "width": problem.width},
                         n_train=boxes, batch_size=batch)
    torch.manual_seed(0)
    model, baseline = build_model(config, device), build_model(config, device).eval()
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    data, sample = torch.Generator().manual_seed(0), torch.Generator(device=device).manual_seed(0)

    in_place = bpp.PlacementHead.hidden

    def written_out(head, features, context):  # the placement layer without the in-place sum and tanh
        return torch.tanh(context[:, None, None, :] + head.features(features))

    def step(shared: bool):
        def run():
            bpp.FRONTIER_CHANNELS_LAST = shared
            bpp.PlacementHead.hidden = in_place if shared else written_out
            for m in (model, baseline):
                m.decoder.step_context.share_convolutions(*((m.action_head.frontier,) if shared else ()))
            instance = problem.generate(batch, boxes, data, device)
            solution, log_likelihood = model.sample_with_gradients(instance, sample)
            with torch.no_grad():
                base = problem.cost(instance, baseline.rollout(instance)[0])
            loss = ((problem.cost(instance, solution) - base) * log_likelihood).mean()
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
        return run

    try:
        return alternate({"shared": step(True), "separate": step(False)}, steps, device)
    finally:
        bpp.FRONTIER_CHANNELS_LAST = True
        bpp.PlacementHead.hidden = in_place
        for m in (model, baseline):
            m.decoder.step_context.share_convolutions(m.action_head.frontier)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--boxes", type=int, default=100)
    parser.add_argument("--train-boxes", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=3)
    add_device_option(parser)
    args = parser.parse_args()
    devices = chosen_devices(args)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, numba kernel: {heightmap.CPU_KERNEL}; "
          f"bin 120 x 100, B = {args.batch}; training step at {args.train_boxes} boxes")
    print(f"{'device':6} {'options kernel':>15} {'options torch':>14} {'step kernel':>12} {'step torch':>11} "
          f"{'step ratio':>11} {'train step (s)':>15} {'straightforward (s)':>20} {'ratio':>6}   (ms unless said)")
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
        model = AttentionModel(problem, Attention(inv_sqrt_d(16))).to(device).eval()
        with torch.no_grad():
            cache = model.decoder.precompute(model.encode(instance))
            ctx = model.glimpse_context(instance, state)

            def step(model=model, cache=cache, state=state, ctx=ctx):
                log_p = model.decoder.step(cache, state, model.attention, ctx)
                action, _ = model.action_head(state, cache.nodes, log_p.argmax(1), "greedy")
                state.update(action)

            t = alternate({"options kernel": with_kernel(True, lambda state=state, box=box: state.placement_options(box)),
                           "options torch": with_kernel(False, lambda state=state, box=box: state.placement_options(box)),
                           "step kernel": with_kernel(True, step), "step torch": with_kernel(False, step)},
                          args.repeats, device)
        train = training_step_seconds(problem, args.batch, args.train_boxes, args.train_steps, device)
        print(f"{device:6} {1e3 * t['options kernel']:15.1f} {1e3 * t['options torch']:14.1f} "
              f"{1e3 * t['step kernel']:12.1f} {1e3 * t['step torch']:11.1f} "
              f"{t['step torch'] / t['step kernel']:11.1f} {train['shared']:15.2f} {train['separate']:20.2f} "
              f"{train['separate'] / train['shared']:6.2f}")


if __name__ == "__main__":
    main()
