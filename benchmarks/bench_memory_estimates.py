"""The memory estimates that refuse a call before it starts (`eie.memory`) against the measured peak.

Each case runs in a fresh process (peak RSS is per process; the growth over the process's size before
the call is what the estimate covers): greedy decoding of TSP and CVRP with plain attention, rotary and a
distance bias (`eie.evaluation.decoding_bytes`), a training step (`eie.training.training_step_bytes`), the EIE fit and lambda* (`eie.entropy.eq6_bytes`).
An estimate is meant to be at or above the measurement (ratio >= 1) and within a small factor of it.
Run: python benchmarks/bench_memory_estimates.py   (about a minute on one core)
"""

import json
import resource
import subprocess
import sys

CASES = ["decode tsp inv_sqrt_d 400 32", "decode tsp inv_sqrt_d 1600 16", "decode cvrp inv_sqrt_d 800 32",
         "decode tsp rope 800 16", "decode tsp dist_bias 800 16", "fit - - 2000 -", "fit - - 8000 -",
         "exact - - 200 -", "exact - - 800 -", "train tsp - 100 64", "train cvrp - 200 32"]


def measure(kind: str, problem: str, method_key: str, n: int, chunk: str) -> dict:
    import torch

    from eie import extrapolation
    from eie.eie_net import fit_eie
    from eie.entropy import eq6_bytes
    from eie.evaluation import decoding_bytes, fixed_test_set, greedy_costs
    from eie.scaling import solve_exact
    from eie.training import TrainConfig, build_model, train, training_step_bytes

    torch.set_num_threads(1)
    if kind == "decode":
        chunk = int(chunk)
        model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=20, problem=problem)).eval()
        (method,) = extrapolation.bind_methods([method_key], 16, 20)
        instances = fixed_test_set(model.problem, n, chunk, 0)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        greedy_costs(model, instances, method, chunk=chunk)
        estimate = decoding_bytes(model, n, chunk, method)
    elif kind == "fit":
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        fit_eie(16, 10, n, epochs=3, progress=False)
        estimate = eq6_bytes(256, 16, n)
    elif kind == "train":
        import tempfile

        config = TrainConfig(rule="inv_sqrt_d", n_train=n, problem=problem, batch_size=int(chunk), epochs=1,
                             steps_per_epoch=1, baseline_eval_size=int(chunk))
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        train(config, tempfile.mkdtemp(), progress=False, device="cpu")
        estimate = training_step_bytes(config)
    else:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        table = solve_exact(16, 10, n)
        estimate = eq6_bytes(len(table.n), 4096, n)
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024
    return {"case": f"{kind} {problem} {method_key} n={n} chunk={chunk}", "measured": grown, "estimate": estimate}


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        kind, problem, method_key, n, chunk = sys.argv[2:7]
        print(json.dumps(measure(kind, problem, method_key, int(n), chunk)))
        return
    print(f"{'case':48} {'measured MiB':>13} {'estimate MiB':>13} {'ratio':>6}")
    for case in CASES:
        out = subprocess.run([sys.executable, __file__, "--child", *case.split()], capture_output=True, text=True,
                             check=True).stdout
        row = json.loads(out.strip().splitlines()[-1])
        print(f"{row['case']:48} {row['measured'] / 2**20:13.0f} {row['estimate'] / 2**20:13.0f} "
              f"{row['estimate'] / max(row['measured'], 1):6.2f}")


if __name__ == "__main__":
    main()
