"""EIE fit with the paper's settings (B = 256, 500 epochs, Adam 1e-3, x0.99 per epoch).

Prints, for (d = 16, N = 100, N_max = 1600) and (d = 32, N = 120, N_max = 1920): the fit's wall
time (target: under 60 s on 2 CPU cores) and |lambda_EIE - lambda*| at n = 2N, 4N, 8N, 16N
(target: within 0.02), for fit seeds 0-2. With --ablation, also for the other ways n can enter
the net (input_scale "log", "unit") and the literal n sampling ("uniform"), same seeds.
Run: python benchmarks/bench_eie_fit.py [--ablation]
"""

import argparse
import time

import numpy as np

from eie import scaling
from eie.eie_net import eie_lambda, fit_eie

SETTINGS = [(16, 100, 1600), (32, 120, 1920)]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ablation", action="store_true")
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    variants = [("default (gaussian input, log-uniform n)", {})]
    if args.ablation:
        variants += [("input_scale=log", {"input_scale": "log"}), ("input_scale=unit", {"input_scale": "unit"}),
                     ("n_sampling=uniform", {"n_sampling": "uniform"})]
    print(f"{'d':>3} {'variant':42} {'seed':>4} {'fit s':>6}   |EIE - exact| at n = 2N, 4N, 8N, 16N   max")
    for d, N, N_max in SETTINGS:
        exact = scaling.exact(scaling.solve_exact(d, N, N_max))
        ns = [2 * N, 4 * N, 8 * N, 16 * N]
        lam_star = np.array([exact(n) for n in ns])
        for name, options in variants:
            for seed in range(args.seeds):
                start = time.perf_counter()
                net, _ = fit_eie(d, N, N_max, seed=seed, progress=False, **options)
                seconds = time.perf_counter() - start
                error = np.abs(eie_lambda(net, ns) - lam_star)
                print(f"{d:3d} {name:42} {seed:4d} {seconds:6.1f}   " + "  ".join(f"{e:.4f}" for e in error)
                      + f"   {error.max():.4f}")


if __name__ == "__main__":
    main()
