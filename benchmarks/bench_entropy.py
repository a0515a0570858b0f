"""How fast the Eq. 6 estimator reaches a standard error <= 2e-3 at n = 1600 (target: under 0.1 s).

For each lambda (1/sqrt(d), and the entropy-invariant lambda*(1600) where the logits are spread
widest) and each variant (plain, control variates), the sample count is grown until the
reported standard error is <= 2e-3 on one seed; then the call is timed 7 times on fresh seeds and the median
printed, with the standard error reached. Run: python benchmarks/bench_entropy.py
"""

import statistics
import time

import torch

from eie.entropy import entropy_eq6

TARGET_SE = 2e-3
N, D = 1600, 16
LAMBDAS = {"1/sqrt(d) = 0.25": 0.25, "lambda*(1600) = 0.709": 0.709}


def samples_needed(lam, cv):
    """Smallest sample count (to ~5%) whose reported standard error is <= TARGET_SE on seed 0."""
    pilot = 1024
    se = float(entropy_eq6(N, lam, D, samples=pilot, seed=0, control_variates=cv).se)
    samples = max(64, int(pilot * (se / TARGET_SE) ** 2))
    while float(entropy_eq6(N, lam, D, samples=samples, seed=0, control_variates=cv).se) > TARGET_SE:
        samples = int(samples * 1.05) + 1
    return samples


def main():
    torch.set_num_threads(torch.get_num_threads())
    print(f"H({N}, lambda), d = {D}, standard error <= {TARGET_SE}; {torch.get_num_threads()} threads")
    print(f"{'lambda':24} {'variant':18} {'samples':>8} {'median s':>9} {'se':>8}")
    for label, lam in LAMBDAS.items():
        for cv in (False, True):
            samples = samples_needed(lam, cv)
            times, ses = [], []
            for seed in range(1, 8):
                start = time.perf_counter()
                est = entropy_eq6(N, lam, D, samples=samples, seed=seed, control_variates=cv)
                times.append(time.perf_counter() - start)
                ses.append(float(est.se))
            variant = "control variates" if cv else "plain"
            print(f"{label:24} {variant:18} {samples:8d} {statistics.median(times):9.3f} {statistics.median(ses):8.4f}")


if __name__ == "__main__":
    main()
