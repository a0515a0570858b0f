"""How far is each trained TSP20, CVRP20 and bin-packing model of cpu_long_v2 from LKH / HGS / the best
sort-then-place heuristic at its own training length?
A progress check while the run trains (the run's evaluation, notebooks 04 and 08, gives the tables):
the greedy cost of each model on the study's fixed test set at n = 20 (`eie.evaluation.fixed_test_set`,
512 instances, the preset's test size) against the reference solver on the same instances: for TSP,
LKH (`TSP.reference_costs`, one run) on all 512; for CVRP, HGS at the preset's iterations
(`CVRP.reference_costs`, 20 000) on the first --cvrp-reference instances (default 64), and the
greedy mean and gaps on those same instances; for bin packing (20 boxes, 120 x 100), the best
sort-then-place heuristic (`BPP.reference_costs`) on the preset's 128 test instances, in load rate
(%; the gap is positive where the model packs less); `p_paired`: the two-sided paired t-test of the
model's objective against the reference's on the same instances. Reads the checkpoints in results/cpu_long_v2/checkpoints/
(whatever epoch they hold; the `epochs` column says which, and `policy_epoch` the epoch of the policy
evaluated: the last one, or in a finished run the rollout baseline's it keeps, `TrainConfig.final_policy`),
and the finished policies exported to
results/cpu_long_v2/models/ where this machine has no checkpoint or one trained less far; writes
results/cpu_long_v2/gap_at_N.csv (TSP), gap_at_N_cvrp.csv and gap_at_N_bpp.csv.
Run from the repository root (about 5 s per TSP model, one thread; CVRP: about a minute per capacity
for HGS, then seconds per model):
  .venv/bin/python scripts/diagnostics/gap_at_N.py [--problems tsp cvrp bpp]
"""

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from scipy import stats

from eie import experiments
from eie.checkpoints import checkpoint_epochs, kept_policy
from eie.evaluation import fixed_test_set, greedy_costs
from eie.problems import make_problem
from eie.training import load_trained

RUN = Path("results/cpu_long_v2")


def trained_models(pattern: str) -> list[Path]:
    """The models named like `pattern`: of a checkpoint here and an export of the same model, the one
    trained further (the checkpoint where they are level; an export from another machine, a GPU machine,
    where this machine's checkpoint is an unfinished start of the same model)."""
    found = {}
    for folder in ("models", "checkpoints"):
        for path in (RUN / folder).glob(pattern):
            if path.name not in found or checkpoint_epochs(path) >= checkpoint_epochs(found[path.name]):
                found[path.name] = path
    return [found[name] for name in sorted(found)]


def row(path: Path, costs: np.ndarray, reference: np.ndarray, reference_name: str) -> dict:
    gaps = 100 * (costs / reference - 1)
    return {"model": path.stem, "epochs": checkpoint_epochs(path), "policy_epoch": kept_policy(path)["epoch"],
            "greedy": costs.mean(),
            reference_name: reference.mean(), "gap_pct": gaps.mean(), "gap_pct_median": np.median(gaps),
            "p_paired": stats.ttest_rel(costs, reference).pvalue}


def tsp_gaps(size: int, paths: list[Path] | None = None) -> pd.DataFrame:
    """The TSP20 models `paths` (default: every one of the run) against LKH on the `size` test instances."""
    paths = paths or trained_models("tsp_*_n20_seed*.pt")
    if not paths:
        raise SystemExit(f"no TSP20 models in {RUN}/checkpoints or {RUN}/models: train them first ({RUN}/README.md)")
    instance = fixed_test_set(make_problem("tsp"), 20, size)
    reference = make_problem("tsp").reference_costs(instance)  # LKH, one run
    return pd.DataFrame([row(path, greedy_costs(load_trained(path), instance).cpu().numpy(), reference, "lkh")
                         for path in paths])


def cvrp_gaps(size: int, reference_size: int) -> pd.DataFrame:
    params = experiments.load("04_train_cvrp", f"presets/{RUN.name}.yaml")
    rows = []
    found = {int(path.name.split("_")[1][1:]) for path in trained_models("cvrp_C*_n20_seed*.pt")}
    for capacity in sorted(set(params["capacities"]) | found):  # and the unscaled C_v = 10, 15 of README "CVRP at N = 20"
        paths = trained_models(f"cvrp_C{capacity:g}_*_n20_seed*.pt")
        if not paths:
            continue
        problem = load_trained(paths[0]).problem  # as trained (capacity, what n the rules see)
        instance = fixed_test_set(problem, 20, size)  # the whole test set, then its first instances
        instance = {key: value[:reference_size] for key, value in instance.items()}
        reference = problem.reference_costs(instance, iterations=params["hgs_iterations"])  # HGS
        for path in paths:
            model = load_trained(path)
            if model.problem.capacity != float(capacity) or vars(model.problem) != vars(problem):
                raise SystemExit(f"{path}: trained with {vars(model.problem)}, not at capacity {capacity} "
                                 f"like {vars(problem)}")
            rows.append(row(path, greedy_costs(model, instance).cpu().numpy(), reference, "hgs"))
    if not rows:
        raise SystemExit(f"no CVRP20 models in {RUN}/checkpoints or {RUN}/models: train them first ({RUN}/README.md)")
    return pd.DataFrame(rows)


def bpp_gaps() -> pd.DataFrame:
    params = experiments.load("05_train_bpp", f"presets/{RUN.name}.yaml")
    paths = trained_models(f"bpp_*_n{params['n_train']}_seed*.pt")
    if not paths:
        raise SystemExit(f"no bin-packing models in {RUN}/checkpoints or {RUN}/models: train them first")
    rows, references = [], {}  # the heuristic once per bin
    for path in paths:
        model = load_trained(path)
        instance = fixed_test_set(model.problem, params["n_train"], params["test_size"])
        if model.problem.setting not in references:
            references[model.problem.setting] = -model.problem.reference_costs(instance)  # load rates, %
        reference = references[model.problem.setting]
        loads = -greedy_costs(model, instance, chunk=params["eval_chunk"]).cpu().numpy()
        gaps = 100 * (1 - loads / reference)
        rows.append({"model": path.stem, "epochs": checkpoint_epochs(path), "policy_epoch": kept_policy(path)["epoch"],
                     "greedy_load": loads.mean(),
                     "heuristic_load": reference.mean(), "gap_pct": gaps.mean(), "gap_pct_median": np.median(gaps),
                     "at_least_heuristic": (loads >= reference).mean(), "p_paired": stats.ttest_rel(loads, reference).pvalue})
    return pd.DataFrame(rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", nargs="+", choices=["tsp", "cvrp", "bpp"], default=["tsp"])
    parser.add_argument("--size", type=int, default=512, help="test instances (default 512, the preset's test_size)")
    parser.add_argument("--cvrp-reference", type=int, default=64, help="CVRP: HGS on the first k (default 64)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for problem in args.problems:
        table = {"tsp": lambda: tsp_gaps(args.size), "cvrp": lambda: cvrp_gaps(args.size, args.cvrp_reference),
                 "bpp": bpp_gaps}[problem]()
        table = table.round({column: 4 for column in table.columns if column != "p_paired"})
        table["p_paired"] = table["p_paired"].map(lambda p: float(f"{p:.2g}"))
        table.to_csv(RUN / ("gap_at_N.csv" if problem == "tsp" else f"gap_at_N_{problem}.csv"), index=False)
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
