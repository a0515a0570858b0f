"""How a model still in training extrapolates: each method's greedy objective at n = N * 2^k on the
first instances of its run's fixed test sets.

    .venv/bin/python scripts/diagnostics/extrapolation_probe.py PRESET NOTEBOOK --model NAME
        [--revision REV] [--policy kept|last] [--instances 64] [--methods inv_sqrt_d eie log_N] [--threads 1]

Reads the run's committed checkpoint of model NAME (`eie.study.committed_checkpoint`: the carried
copy in the working tree, or as it was at git revision REV, so that a quoted probe names its weights),
and decodes the policy the finished run would keep (--policy kept: with the preset's `final_policy:
baseline` the rollout baseline's weights, else the last epoch's; --policy last: the last epoch's)
greedily with each method on the first
--instances instances of the preset's test set at every n (`eie.evaluation.fixed_test_set` at the
preset's `test_size` and `test_seed`: the instances the run's evaluation will use). Prints, per n and
method, the mean objective and its paired difference from the first method in percent (positive:
better) with the standard error over instances; writes the table to
results/<run>/probes/<NAME>_epoch<E>_<baseline or last>.csv.

A progress check, not the run's evaluation: one seed, part of an unfinished training, fewer instances,
no reference solver, nothing kept in the run's evaluation store.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm import tqdm

from eie.checkpoints import read_checkpoint
from eie.evaluation import extrapolation_lengths, fixed_test_set, greedy_costs
from eie.experiments import load
from eie.extrapolation import bind_methods
from eie.paths import results_dir
from eie.study import committed_checkpoint, ensure_scales, head_size, training_experiment
from eie.threads import use_threads
from eie.training import load_trained


def probe(model, methods, n_train: int, n_max: int, test_size: int, test_seed: int, instances: int,
          chunk: int) -> pd.DataFrame:
    """One row per (n, method): mean objective over the first `instances` test instances, and the
    paired difference from `methods[0]` (percent of its mean, positive where better) with its
    standard error over instances."""
    problem = model.problem
    sign = -1.0 if problem.maximise else 1.0
    lengths = extrapolation_lengths(n_train, n_max)
    rows = []
    with tqdm(total=len(lengths) * len(methods), desc="probe", mininterval=1.0) as bar:
        for n in lengths:
            test = fixed_test_set(problem, n, test_size, test_seed)
            test = {key: value[:instances] for key, value in test.items()}
            base = None
            for method in methods:
                objective = sign * greedy_costs(model, test, method, chunk=chunk).cpu().numpy().astype(np.float64)
                base = objective if base is None else base
                better = objective - base if problem.maximise else base - objective  # > 0: beats the first
                scale = 100.0 / abs(base.mean())
                rows.append({"n": n, "method": method.key, "objective": objective.mean(),
                             "better_pct": scale * better.mean(),
                             "se_pct": scale * better.std(ddof=1) / np.sqrt(len(better)) if len(better) > 1 else np.nan})
                bar.update()
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="the run's preset, e.g. presets/bpp_paper_rule_start.yaml")
    parser.add_argument("notebook", help="its training notebook, e.g. 05_train_bpp")
    parser.add_argument("--model", required=True, help="the checkpoint's name, e.g. bpp_120x100_inv_sqrt_d_n100_seed0")
    parser.add_argument("--revision", help="read the committed checkpoint as it was at this git revision")
    parser.add_argument("--policy", choices=("kept", "last"), default="kept",
                        help="kept: the policy the finished run keeps (the preset's final_policy); last: the last epoch's")
    parser.add_argument("--instances", type=int, default=64, help="the first this many test instances per n")
    parser.add_argument("--methods", nargs="+", default=["inv_sqrt_d", "eie", "log_N"],
                        help="registered methods; the first is the one the others are compared with")
    parser.add_argument("--threads", type=int, default=1, help="torch threads")
    args = parser.parse_args(argv)
    params = training_experiment(args.notebook, load(args.notebook, args.preset))
    if not 1 <= args.instances <= params["test_size"]:
        parser.error(f"--instances must be between 1 and the preset's test_size ({params['test_size']}), "
                     f"got {args.instances}")
    use_threads(args.threads)
    d, N, n_max = head_size(args.notebook, params), params["n_train"], params["n_max"]
    net, table = ensure_scales(d, N, n_max, run=params["run"])
    methods = bind_methods(args.methods, d, N, net, table)
    with tempfile.TemporaryDirectory() as folder:
        try:
            path = committed_checkpoint(params["run"], args.model, args.revision, Path(folder))
        except FileNotFoundError as error:
            raise SystemExit(str(error)) from error
        model = load_trained(path)  # an unfinished checkpoint: its last epoch's policy
        payload = read_checkpoint(path)
    epoch = int(payload["epoch"])
    policy = "baseline" if args.policy == "kept" and params["final_policy"] == "baseline" else "last"
    if policy == "baseline":
        model.load_state_dict(payload["baseline"])
    table = probe(model, methods, N, n_max, params["test_size"], params["test_seed"], args.instances,
                  params["eval_chunk"])
    out = results_dir(params["run"]) / "probes" / f"{args.model}_epoch{epoch}_{policy}.csv"
    out.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(out, index=False, float_format="%.4f")
    print(f"{args.model}, epoch {epoch} (revision {args.revision or 'working tree'}), {policy} policy, first {args.instances} "
          f"test instances per n; better_pct: paired difference from {args.methods[0]}, positive where better")
    print(table.to_string(index=False, float_format=lambda value: f"{value:.3f}"))
    print(f"written {out.relative_to(results_dir(params['run']).parent.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
