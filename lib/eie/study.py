"""The study driver the training notebooks call: fitted scales, trained models, extrapolation tables.

One set of functions serves every problem: `ensure_scales` (EIE net and exact lambda* for the
training length, loaded from `results/<run>/eie_nets/` or fitted there), `train_models` (one model
per trained rule and seed, resumable; `seeds_by_rule` says which seeds a rule has), `evaluate`
(every method on the fixed test sets, with the reference solver, into the long-format table);
`train_problem` and `evaluate_problem` run a training experiment's whole grid (`eie.experiments`).
"""

from __future__ import annotations

import numbers
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd

from . import methods as registry
from . import scaling
from .checkpoints import checkpoint_epochs, export_policy, kept_policy
from .eie_net import fit_eie, load_eie_net, save_eie_net
from .evaluation import (
    check_decoding_fits,
    extrapolation_lengths,
)
from .evaluation_store import (
    EvaluationStore,
)
from .experiments import Training, configure, model_config, training_notebooks, training_options
from .extrapolation import bind_methods, evaluate, save_instance_costs
from .methods import BoundMethod
from .paths import eie_net_path, exact_table_path, repo_root, results_dir
from .training import TrainConfig, build_model, finished_training, load_trained, resolve_device, train


def ensure_scales(d: int, N: int, N_max: int, run: str = "default", **fit_options):
    """The EIE net and the exact lambda* table for (d, N, N_max): loaded when saved, else fitted and saved.

    Silent either way (a fit takes ~10 s), so a notebook prints the same whether it fitted or loaded,
    and returns what was loaded from the files either way (a fitted table is read back after saving).
    Nothing is saved unless both the net and the table were obtained (a failure leaves no file).
    """
    if isinstance(N, bool) or not isinstance(N, numbers.Integral) or N < 2:
        raise ValueError(f"the training length N (n_train) must be an integer >= 2 for entropy-invariant scales "
                         f"(at N = 1 a softmax over one key has zero entropy whatever lambda is), got {N!r}")
    net_path, table_path = eie_net_path(d, N, N_max, run), exact_table_path(d, N, N_max, run)
    net = load_eie_net(net_path, d=d, N=N) if net_path.exists() else fit_eie(d, N, N_max, progress=False, **fit_options)[0]
    table = scaling.ExactTable.load(table_path, d=d) if table_path.exists() else scaling.solve_exact(d, N, N_max)
    if table.N != N or table.N_max < N_max or net.config.N_max < N_max:
        raise ValueError(f"saved scales in {net_path.parent} do not cover N={N}..{N_max}; delete them to refit")
    if not net_path.exists():
        save_eie_net(net, net_path)
    if not table_path.exists():
        table.save(table_path)
        # what every later call loads (the file rounds lambda* to its printed digits), so the first run
        # decodes with the same scales as its reruns and the workers of a cluster
        table = scaling.ExactTable.load(table_path, d=d)
    return net, table


def describe_scales(net, table, d: int, N: int, N_max: int) -> str:
    """The EIE and exact lambda at the tables' lengths n = N * 2^k, one line each (what the
    training notebooks print after `ensure_scales`)."""
    lines = ["lambda at n = N * 2^k:"]
    exact = registry.get("exact").rule(d, N=N, table=table)
    for n in extrapolation_lengths(N, N_max):
        lines.append(f"  n = {n:5d}: EIE {float(net(float(n)).detach()):.3f}, exact {exact(n):.3f}")
    return "\n".join(lines)


def training_experiment(notebook: str, params) -> Training:
    """The training experiment of `notebook` (`eie.experiments`) under `params`: a checked experiment
    as is, a mapping of settings checked now."""
    experiment = configure(notebook, params)
    if not isinstance(experiment, Training):
        raise ValueError(f"{notebook!r} is not a training notebook; choose from {', '.join(training_notebooks())}")
    return experiment


def problem_for(notebook: str):
    """The problem class (`eie.problems.PROBLEMS`) that `notebook` trains."""
    experiment = configure(notebook, {})
    if not isinstance(experiment, Training):
        raise ValueError(f"{notebook!r} is not a training notebook; choose from {', '.join(training_notebooks())}")
    return experiment.problem_class()


def training_setups(notebook: str, params: dict) -> list[dict]:
    """The models a training notebook trains, one entry per problem setting (a capacity, a bin):
    {"setting": its label in the tables ("" for TSP, "C10", "120x100"), "tag": the checkpoint-name
    tag, "config": the `TrainConfig` fields}. `params` are the notebook's checked parameters; the
    notebooks and `eie.worker` both build their training from here, so a preset trains the same
    models whichever runs it. The settings come from the experiment (`Training.problem_settings`), the
    training options from its settings that are fields of `TrainConfig` (`experiments.training_options`)."""
    experiment = training_experiment(notebook, params)
    common = training_options(experiment)
    common["model"] = model_config(experiment)
    problem = experiment.problem_class()
    setups = []
    for options, lr in experiment.problem_settings():
        setting = problem(**options).setting
        config = {"problem": problem.name, "problem_options": options, "lr": lr, **common}
        setups.append({"setting": setting, "tag": f"_{setting}" if setting else "", "config": config})
    return setups


def train_problem(notebook: str, params: dict, prefix: str = ""):
    """Every model a training notebook asks for: each setting of its problem, each trained rule and
    seed (`train_models`; resumable). Writes `results/<run>/<problem>_training_log.csv` (no timings,
    so reruns give the same file) and exports each rule's first seed's policy to `results/<run>/models/`
    (what notebook 07 reads). `prefix` starts the log's file name (notebook 08 writes rivals_...,
    beside notebook 03's files in the same run). Returns ({setting: {(rule, seed): model}}, the
    training logs with a `setting` column)."""
    run, rules, seeds = params["run"], params["rules"], seeds_by_rule(params)
    models, logs = {}, []
    for setup in training_setups(notebook, params):
        trained, log = train_models(rules, seeds, run=run, device=params["device"], progress=params["progress"],
                                    tag=setup["tag"], **setup["config"])
        models[setup["setting"]] = trained
        logs.append(log.assign(setting=setup["setting"]))
        export_policies([model_name(setup["config"]["problem"], rule, params["n_train"], seeds[rule][0], setup["tag"])
                         for rule in rules], run=run)
    logs = pd.concat(logs, ignore_index=True)
    name = problem_for(notebook).name
    logs.drop(columns="seconds").to_csv(results_dir(run) / f"{prefix}{name}_training_log.csv", index=False,
                                        float_format="%.6f")
    return models, logs


def evaluate_problem(notebook: str, params: dict, models: dict, net=None, table=None, d: int = 16, prefix: str = ""):
    """Every method of the notebook's parameters (`rules`, and `training_free` on the 1/sqrt(d)
    model) on each setting's `models` (from `train_problem`), with the reference solver on the
    first `reference_size` instances. Writes the problem's `result_files` to `results/<run>/`, their
    names starting with `prefix`.
    Returns (results table with RESULT_COLUMNS over all settings, per-instance objectives,
    {setting: {n: reference objectives}})."""
    experiment = training_experiment(notebook, params)
    problem_class = experiment.problem_class()
    methods = bind_methods(method_keys(params), d, params["n_train"], net, table)
    store = run_evaluation_store(params["run"])
    results, per_instance, references = [], {}, {}
    for options, _ in experiment.problem_settings():
        problem = problem_class(**options)
        parts = []
        for result, objectives, reference in _evaluate_setting(problem, experiment, methods, models[problem.setting],
                                                               store):
            parts.append(result if not parts else result[result.method != "reference"])
            per_instance.update(objectives)
            references[problem.setting] = reference
        if len(parts) == 1:
            results.append(parts[0])
        else:  # by n, then method by method in the declared order (what tables list first), the reference last
            order = {key: i for i, key in enumerate([method.key for method in methods] + ["reference"])}
            part = pd.concat(parts, ignore_index=True)
            results.append(part.iloc[np.lexsort((part.seed, part.method.map(order), part.n))])
    results = pd.concat(results, ignore_index=True)
    table_file, instances_file = problem_class().result_files
    out = results_dir(params["run"])
    results.to_csv(out / f"{prefix}{table_file}", index=False, float_format="%.4f")
    save_instance_costs(per_instance, out / f"{prefix}{instances_file}")
    return results, per_instance, references


def _evaluate_setting(problem, params: Training, methods: list[BoundMethod], setting_models: dict,
                      store: EvaluationStore):
    """`evaluate` of `methods` on one setting's models ({(rule, seed): model}), one call per group of
    methods whose models have the same seeds: `evaluate` runs each method on every seed of the
    models it is given, so methods whose models have other seeds (`seeds_by_rule`, or models not
    all finished, `evaluate_finished`) go in their own call; the reference, computed once, is read
    back from the store by the later calls. Yields each call's (results, objectives, reference)."""
    any_model = next(iter(setting_models.values()))
    longest = extrapolation_lengths(params["n_train"], params["n_max"])[-1]
    for method in methods:  # before the first length: it is the longest that may not fit
        check_decoding_fits(any_model, longest, min(params["eval_chunk"], params["test_size"]), method,
                            resolve_device(params["device"]))
    for group in _methods_by_seeds(methods, setting_models):
        keys = {method.model_key for method in group}
        yield evaluate(
            {key: model for key, model in setting_models.items() if key[0] in keys}, group, params["n_train"],
            params["n_max"], test_size=params["test_size"], setting=problem.setting, test_seed=params["test_seed"],
            reference_size=params["reference_size"], reference_options=params.reference_options(),
            chunk=params["eval_chunk"], device=params["device"], progress=params["progress"], store=store)


def finished_models(notebook: str, params: dict) -> dict:
    """{setting: {(rule, seed): model}} of the training notebook's models (under its checked
    `params`) whose training has ended: a finished checkpoint in results/<run>/checkpoints/, or a
    policy exported to results/<run>/models/ (`eie.training.finished_training`). A model still in
    training, or not started, is left out, and nothing is trained; a finished checkpoint another
    worker still holds is read without waiting."""
    run, found = params["run"], {}
    for setup in training_setups(notebook, params):
        setting_models = found.setdefault(setup["setting"], {})
        for rule, seed in model_pairs(params["rules"], seeds_by_rule(params)):
            config = TrainConfig(rule=rule, seed=seed, **setup["config"])
            name = model_name(config.problem, rule, config.n_train, seed, setup["tag"])
            for folder in (results_dir(run) / "checkpoints", models_folder(run)):
                result = finished_training(folder / f"{name}.pt", config)
                if result is not None:
                    setting_models[(rule, seed)] = result.model
                    break
    return found


def head_size(notebook: str, params: dict) -> int:
    """The head size d of the models the training notebook trains under `params` (width / heads)."""
    return training_setups(notebook, params)[0]["config"]["model"].head_dim


def evaluate_finished(notebook: str, params: dict, store: EvaluationStore | None = None) -> list[str]:
    """Every method of the training notebook's `params` (`method_keys`) on the models whose training
    has ended (`finished_models`), into the run's evaluation store, where the notebook's own
    evaluation (`evaluate_problem`) later reads each piece back instead of decoding it again: the
    evaluation of the first models can so run beside the training of the last ones (`python -m
    eie.worker PRESET NOTEBOOK --evaluate`). A method whose model has no finished seed is skipped.
    Writes no result table. Returns one line per setting: what was evaluated, what was skipped.
    `store`: another store than the run's (`eie.distributed` passes one that records the keys asked for)."""
    params = training_experiment(notebook, params)
    models = finished_models(notebook, params)
    d = head_size(notebook, params)
    net, table = ensure_scales(d, params["n_train"], params["n_max"], run=params["run"])
    methods = bind_methods(method_keys(params), d, params["n_train"], net, table)
    store = store if store is not None else run_evaluation_store(params["run"])
    pairs = model_pairs(params["rules"], seeds_by_rule(params))
    lines = []
    for options, _ in params.problem_settings():
        problem = params.problem_class()(**options)
        setting_models = models[problem.setting]
        ready = [method for method in methods if any(rule == method.model_key for rule, _ in setting_models)]
        if ready:
            for _ in _evaluate_setting(problem, params, ready, setting_models, store):
                pass  # each piece is kept in the store as it finishes: the notebook reads them back
        waiting = [f"{rule} seed {seed}" for rule, seed in pairs if (rule, seed) not in setting_models]
        lines.append(f"{problem.setting or problem.name}: {len(ready)} of {len(methods)} methods evaluated on "
                     f"{len(setting_models)} finished model(s)"
                     + (f"; not finished: {', '.join(waiting)}" if waiting else "; every model finished"))
    return lines


def compute_references(notebook: str, params: dict) -> dict:
    """The reference solver (LKH, HGS, the best heuristic) on the first `reference_size` test
    instances of every setting and n of the notebook's parameters, kept in the run's evaluation
    store (`eie.evaluation_store`), so that `evaluate_problem` reads them back instead of solving
    again. The solver uses one core and needs no trained model: it can run beside the training
    (`python -m eie.worker PRESET NOTEBOOK --references`). Returns {setting: {n: reference objectives}}."""
    params = training_experiment(notebook, params)
    store = run_evaluation_store(params["run"])
    references = {}
    for setup in training_setups(notebook, params):
        problem = params.problem_class()(**setup["config"]["problem_options"])
        # `evaluate` takes the problem from a model: an untrained one, since no method is decoded
        model = build_model(TrainConfig(rule=params["rules"][0], seed=0, **setup["config"]))
        _, _, references[problem.setting] = evaluate(
            {(params["rules"][0], 0): model}, [], params["n_train"], params["n_max"], test_size=params["test_size"],
            setting=problem.setting, test_seed=params["test_seed"], reference_size=params["reference_size"],
            reference_options=params.reference_options(), chunk=params["eval_chunk"], device=params["device"],
            progress=params["progress"], store=store)
    return references


def _methods_by_seeds(methods: list[BoundMethod], models: dict) -> list[list[BoundMethod]]:
    """`methods` in groups whose models ({(key, seed): model}) have the same seeds, in order of first
    appearance (one group when every trained rule has the same seeds)."""
    seeds_of = {}
    for key, seed in models:
        seeds_of.setdefault(key, []).append(seed)
    groups = {}
    for method in methods:
        groups.setdefault(tuple(sorted(seeds_of[method.model_key])), []).append(method)
    return list(groups.values())


def seeds_by_rule(params: dict) -> dict[str, list[int]]:
    """{trained rule: its seeds}: the rule's entry of `seeds_by_rule`, else `seeds`. A rival may so be
    trained with fewer seeds than the 1/sqrt(d) model the training-free methods share."""
    return {rule: list(params["seeds_by_rule"].get(rule, params["seeds"])) for rule in params["rules"]}


def seeds_per_rule(rules, seeds) -> dict[str, list[int]]:
    """{rule: its seeds} from `seeds`: the seeds of every rule, or already {rule: its seeds}."""
    return {rule: list(seeds[rule] if isinstance(seeds, dict) else seeds) for rule in rules}


def model_pairs(rules, seeds) -> list[tuple[str, int]]:
    """(rule, seed) of every model, seed by seed (in the order the seeds first appear), in the order
    of `rules` within a seed; `seeds` is the seeds of every rule, or {rule: its seeds} (`seeds_by_rule`)."""
    per_rule = seeds_per_rule(rules, seeds)
    every_seed = dict.fromkeys(seed for rule in rules for seed in per_rule[rule])
    return [(rule, seed) for seed in every_seed for rule in rules if seed in per_rule[rule]]


def method_keys(params: dict) -> list[str]:
    """The methods a training notebook evaluates: its trained `rules`, then its `training_free`
    methods when the model they are applied to was trained."""
    return list(params["rules"]) + [key for key in params["training_free"]
                                    if registry.get(key).applied_to in params["rules"]]


def train_models(rules, seeds, run: str = "default", device: str = "auto", progress: bool = True, tag: str = "",
                 **config):
    """Train one model per (rule, seed) (`model_pairs`: `seeds` is every rule's seeds, or {rule: its
    seeds}); checkpoints in results/<run>/checkpoints/ make reruns resume.

    `tag` tells apart models of one problem with other settings (for example "_C15" for a capacity).
    A model with no checkpoint here but one in results/<run>/carry/ (committed by `python -m
    eie.worker PRESET NB --save-carry` on another machine) resumes from that one; a model with
    neither but exported to results/<run>/models/ after its training ended is read from there and
    not trained again (`eie.training.finished_training`).
    Returns ({(rule, seed): model}, training log with columns rule, seed, epoch, ..., and
    policy_epoch: the epoch of the policy the model keeps, `eie.checkpoints.kept_policy`).
    """
    models, logs = {}, []
    folder = results_dir(run) / "checkpoints"
    for rule, seed in model_pairs(rules, seeds):
        cfg = TrainConfig(rule=rule, seed=seed, **config)
        result = train(cfg, folder, name=model_name(cfg.problem, rule, cfg.n_train, seed, tag), device=device,
                       progress=progress, carry_dir=carry_folder(run), exported_dir=models_folder(run))
        models[(rule, seed)] = result.model
        logs.append(result.log.assign(rule=rule, seed=seed, policy_epoch=kept_policy(result.checkpoint)["epoch"]))
    return models, pd.concat(logs, ignore_index=True)


def kept_held_out(logs: pd.DataFrame, keys) -> pd.DataFrame:
    """The held-out greedy cost of the policy each model keeps, from `train_models`' logs: the row of
    its `policy_epoch` (its last epoch, or with `final_policy = "baseline"` the epoch its kept policy
    became the rollout baseline), grouped by `keys` (which include "seed"), one column per seed."""
    kept = logs[logs.epoch == logs.policy_epoch]
    return kept.groupby(list(keys)).eval_cost.last().unstack("seed")


def carry_folder(run: str = "default") -> Path:
    """results/<run>/carry/: copies of unfinished checkpoints and of finished evaluation pieces,
    committed so that work resumes on another machine (the checkpoints folder is not committed)."""
    return results_dir(run) / "carry"


def committed_checkpoint(run: str, model: str, revision: str | None, folder: Path) -> Path:
    """The run's committed checkpoint of `model` (`carry_folder`) as it was at git `revision`, written
    into `folder`; with `revision` None, the working tree's copy itself. Lets a diagnostic of a model
    still in training name the exact weights it read."""
    path = carry_folder(run) / f"{model}.pt"
    if revision is None:
        if not path.is_file():
            raise FileNotFoundError(f"no committed checkpoint {path}: carry it first (python -m eie.worker PRESET "
                                    f"NOTEBOOK --save-carry) or give a git revision that has one")
        return path
    relative = path.resolve().relative_to(repo_root()).as_posix()
    shown = subprocess.run(["git", "show", f"{revision}:{relative}"], cwd=repo_root(), capture_output=True)
    if shown.returncode:
        raise FileNotFoundError(f"no {relative} at git revision {revision}: {shown.stderr.decode().strip()}")
    copy = Path(folder) / path.name
    copy.write_bytes(shown.stdout)
    return copy


def models_folder(run: str = "default") -> Path:
    """results/<run>/models/: the finished policies exported from their checkpoints (weights,
    configuration and epoch log; `export_policies`, `eie.worker --save-carry`), committed where a
    notebook or another machine needs them."""
    return results_dir(run) / "models"


def run_evaluation_store(run: str = "default") -> EvaluationStore:
    """The run's evaluation pieces: results/<run>/checkpoints/evaluation/, and those carried from
    another machine in results/<run>/carry/evaluation/."""
    return EvaluationStore(results_dir(run) / "checkpoints" / "evaluation", carried=carry_folder(run) / "evaluation")


def model_name(problem: str, rule: str, n_train: int, seed: int, tag: str = "") -> str:
    """The file stem of a model's checkpoint, log and exported policy."""
    return f"{problem}{tag}_{rule}_n{n_train}_seed{seed}"


def export_policies(names, run: str = "default") -> list:
    """Copy the trained policies `names` (see `model_name`) from results/<run>/checkpoints/ to
    results/<run>/models/: weights, configuration and epoch log, what notebook 07 reads. A policy
    with no checkpoint here, read from there by `train_models`, is left as it is, and so is one
    trained further than the checkpoint here (finished on another machine, say a GPU machine, while
    this one kept an older, unfinished checkpoint of the same model)."""
    exported = []
    for name in names:
        checkpoint, path = results_dir(run) / "checkpoints" / f"{name}.pt", models_folder(run) / f"{name}.pt"
        if path.is_file() and (not checkpoint.is_file()
                               or checkpoint_epochs(path) > checkpoint_epochs(checkpoint)):
            exported.append(path)  # the model came from there (`train_models`), or got further there
            continue
        exported.append(export_policy(checkpoint, path))
    return exported


def load_policies(names, run: str = "default", device: str = "cpu") -> dict:
    """{name: model} from results/<run>/models/ (written by `export_policies`)."""
    return {name: load_trained(models_folder(run) / f"{name}.pt", device) for name in names}
