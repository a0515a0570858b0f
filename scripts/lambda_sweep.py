"""Sweep a constant attention scale lambda = f / sqrt(d) on a run's trained 1/sqrt(d) model (one seed),
beside EIE's and log_N's factors at the same n (`eie.lambda_sweep`).

    python scripts/lambda_sweep.py PRESET [--problem tsp|cvrp|bpp] [--seed 0] [--instances 256]
        [--lengths 400 800 1600] [--factors 0.75 1 1.25 ...] [--capacity 10] [--bin 120x100]

Writes results/<run>/lambda_sweep_<problem><tag>_seed<k>.csv (tag: _C<capacity> for CVRP, _<bin> for bin
packing); lengths the file already holds with the same factors and instance count are read back, not
recomputed, so a longer --lengths list extends a sweep. Notebook 10 draws the figures and the optimum
per seed from every sweep of a run. Examples:
    python scripts/lambda_sweep.py presets/cpu_paper.yaml --problem tsp --seed 2 --lengths 400 800 1600
    python scripts/lambda_sweep.py presets/cpu_long_v2.yaml --problem cvrp --capacity 2 --seed 1 \\
        --instances 512 --lengths 80 160 320 --factors 0.75 1 1.25 1.5 1.75 2 2.5 3 4
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, extrapolation, lambda_sweep, study  # noqa: E402
from eie.problems import PROBLEMS  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="the run whose exported models are swept, e.g. presets/cpu_paper.yaml")
    parser.add_argument("--problem", choices=sorted(PROBLEMS), default="tsp")
    parser.add_argument("--notebook", default=None, help="the preset's notebook that trained the model "
                        "(default: the problem's training notebook)")
    parser.add_argument("--capacity", type=int, default=10, help="CVRP: the vehicle capacity of the model")
    parser.add_argument("--bin", default="120x100", help="bin packing: the bin L x W of the model")
    parser.add_argument("--seed", type=int, default=0, help="which exported 1/sqrt(d) model")
    parser.add_argument("--instances", type=int, default=256)
    parser.add_argument("--lengths", type=int, nargs="+", default=None, help="test lengths (default: 4N and 8N)")
    parser.add_argument("--factors", type=float, nargs="+", default=list(lambda_sweep.FACTORS))
    args = parser.parse_args()
    params = experiments.load(args.notebook or experiments.training_notebook(args.problem), args.preset)
    run, N, N_max = params["run"], params["n_train"], params["n_max"]
    lengths = args.lengths or [4 * N, 8 * N]
    if any(not N < n <= N_max for n in lengths):
        parser.error(f"every length must lie in ({N}, {N_max}], the range the run's EIE net was fitted to")
    tag = {"cvrp": f"_C{args.capacity}", "bpp": f"_{args.bin}"}.get(args.problem, "")
    name = study.model_name(args.problem, "inv_sqrt_d", N, args.seed, tag=tag)
    folder = study.results_dir(run, create=False) / "models"
    if not (folder / f"{name}.pt").is_file():
        parser.error(f"no exported policy {name} in {folder}: train it with notebook "
                     f"{args.notebook or experiments.training_notebook(args.problem)} and {args.preset} first")
    model = study.load_policies([name], run=run)[name]
    d = model.config.head_dim
    net, table = study.ensure_scales(d, N, N_max, run=run)
    plain, eie, log_n = extrapolation.bind_methods(["inv_sqrt_d", "eie", "log_N"], d, N, net, table)
    out = study.results_dir(run) / f"{lambda_sweep.sweep_name(args.problem, tag, args.seed)}.csv"
    held = lambda_sweep.read_sweep(out) if out.is_file() else None
    methods = {lambda_sweep.factor_name(f) for f in args.factors} | {eie.key, log_n.key}
    done = [n for n in lengths if held is not None and lambda_sweep.holds(held, n, methods, args.instances)]
    todo = [n for n in lengths if n not in done]
    if done:
        print(f"{out.relative_to(ROOT)} already holds n = {done} with these factors and {args.instances} "
              f"instances: read back")
    try:
        frame = lambda_sweep.sweep(model, plain, [eie, log_n], todo, args.factors, args.instances,
                                   test_seed=params["test_seed"]) if todo else None
    except ValueError as error:
        parser.error(str(error))
    frame = lambda_sweep.merged(held, frame)
    frame.to_csv(out, index=False, float_format="%.4f")
    print(frame.round(3).to_string(index=False))
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
