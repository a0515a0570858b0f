"""Train the models of a preset in background processes, the way its notebook would.

    python -m eie.worker presets/NAME.yaml 03_train_tsp [--threads 1]
    python -m eie.worker presets/NAME.yaml 03_train_tsp 04_train_cvrp   (in this order; those held elsewhere last)
    python -m eie.worker presets/NAME.yaml 03_train_tsp --status     (where its training stands)
    python -m eie.worker presets/NAME.yaml 05_train_bpp --status --plot (and its training curves so far)
    python -m eie.worker presets/NAME.yaml 04_train_cvrp --references (the reference solver only)
    python -m eie.worker presets/NAME.yaml 05_train_bpp --evaluate    (evaluate the finished models only)
    python -m eie.worker presets/NAME.yaml 04_train_cvrp --save-carry (checkpoints to commit)
    python -m eie.worker presets/NAME.yaml 08_rivals 04_train_cvrp --seeds 0 (seed 0 of each first)
    python -m eie.worker presets/NAME.yaml 05_train_bpp --rules inv_sqrt_d   (one rule's models first)
    python -m eie.worker presets/PILOT.yaml 05_train_bpp --branch-from RUN --at-epoch 60
                                            (start from RUN's checkpoints at epoch 60, then train)

A worker reads the notebook's own defaults (its `parameters` cell), applies the preset file (and
its `per_notebook` entry) exactly as `papermill -f presets/NAME.yaml` does, checks them with the
notebook's parameter check, and trains every (setting, rule, seed) model of it with the same
`eie.study.training_setups` and `train_models` the notebook calls. Start several workers on one
preset to use several cores: each model's checkpoint is locked while it trains, so a worker skips
the models another one holds; an interrupted worker resumes from the last epoch when started
again. The first SIGTERM or Ctrl-C (`kill PID`) stops a worker after the epoch in progress, once
its checkpoint is written (exit status 128 + the signal's number), and a second one at once
(`eie.stop_request`). Afterwards `papermill notebooks/NB.ipynb out.ipynb -f presets/NAME.yaml`
finds every model trained and only evaluates. `--status` prints, for every model of the preset,
the epochs done, the last held-out cost, the recent seconds per epoch, the hours its logged epochs
took and the hours its remaining epochs would take; with `--plot` it also draws the held-out
objective per epoch of every model so far (figures/<number>_<problem>_training_progress_<run>.png).
`--references` trains nothing: it runs the preset's reference solver (LKH, HGS, the heuristic; one
core, no model needed) on its test sets into the run's evaluation store, so that it can run beside a
training worker and the notebook's evaluation later reads the solutions back.
`--evaluate` trains nothing either: it runs every method of the preset on the models whose training
has ended (`eie.study.evaluate_finished`) into the same store, so that the evaluation of the first
models runs beside the training of the last ones and the notebook, once every model is trained, only
evaluates those (run it again as more models finish; each finished piece is kept).

`--branch-from RUN` starts every model of the preset that has no checkpoint in this run from the
same model's checkpoint in results/RUN/ (this machine's or its carried copy; with `--at-epoch E` the
one at epoch E), where the two configurations differ only in settings that have not acted by then
(`eie.training.branch_checkpoint`: a warm-up that ends there, another learning rate after it), and
then trains them: a short pilot of a recipe change without training its first epochs again.

The checkpoints are not committed, so a new machine starts from nothing. `--save-carry` copies the
checkpoint and epoch log of every model in training here into results/<run>/carry/, exports the
policy of every model whose training has ended here into results/<run>/models/ (weights and epoch
log, about a quarter of a checkpoint: no optimiser, baseline or generator states), and copies the
run's finished evaluation pieces (the reference solver's solutions, for example) into
carry/evaluation/. Committed, they let work resume exactly on another machine: a model with no
checkpoint resumes from its carried copy (in a worker or a notebook), a finished one is read from
its exported policy and not trained again (so the evaluation can run elsewhere than the training),
and the evaluation reads the carried pieces instead of computing them again. A checkpoint of the
paper's model is about 12 MB: carry only what a long run cannot finish on one machine, and delete
carry/ once the run's results are committed (models/ stays: the notebooks read it).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pandas as pd

from . import study
from .checkpoints import checkpoint_epochs, checkpoint_log, export_policy
from .distributed import client_for, run_grid
from .evaluation_store import EvaluationStore
from .experiments import load, training_notebooks
from .files import FileBusy, copy_atomic, write_csv_atomic
from .paths import repo_root
from .plotting import apply_style, save_figure, training_figure
from .problems import make_problem
from .stop_request import Stopped, check_stop, exit_status, stop_after_epoch_on_signals, wait_for_stop
from .threads import use_threads
from .training import TrainConfig, branch_checkpoint, finished_training, plateau_action


def run_worker(preset, notebooks, poll_seconds: float = 30.0, seeds=None, rules=None) -> None:
    """Train every model of `preset` for `notebooks` (one notebook or several, in their order) that no
    other process is training (only those of `seeds` and `rules`, if given: subsets of the preset's,
    e.g. seed 0 of every problem before the others); wait for those that are and return when all are
    finished. A model another worker holds is left for later, and this worker goes on with the rest,
    of this notebook and the next ones, before it waits: it never idles while any model is free."""
    notebooks = [notebooks] if isinstance(notebooks, str) else list(notebooks)
    jobs = []
    for notebook in notebooks:
        params = load(notebook, preset)
        check_seeds(params, notebook, seeds)
        check_rules(params, notebook, rules)
        jobs += [(notebook, params, setup, rule, seed) for setup in study.training_setups(notebook, params)
                 for rule, seed in study.model_pairs(params["rules"], study.seeds_by_rule(params))
                 if (seeds is None or seed in seeds) and (rules is None or rule in rules)]
    pending = list(jobs)
    while pending:
        busy = []
        for notebook, params, setup, rule, seed in pending:
            check_stop(f"stopped before {setup['setting'] or notebook} {rule} seed {seed}")
            print(f"training {setup['setting'] or notebook} {rule} seed {seed}", flush=True)
            try:
                study.train_models([rule], [seed], run=params["run"], device=params["device"], progress=False,
                                   tag=setup["tag"], **setup["config"])
                print(f"done {setup['setting'] or notebook} {rule} seed {seed}", flush=True)
            except FileBusy:
                print("  held by another worker; later", flush=True)
                busy.append((notebook, params, setup, rule, seed))
        pending = busy
        if pending and wait_for_stop(poll_seconds):  # another worker is training these; finish only when they are
            check_stop(f"stopped while waiting for {len(pending)} model(s) another worker trains")


def branch_models(preset, notebook: str, source_run: str, epoch: int | None = None, seeds=None,
                  rules=None) -> list[str]:
    """Start each model of `preset` for `notebook` (those of `seeds` and `rules`, if given) from the
    same model's checkpoint in run `source_run` (`eie.training.branch_checkpoint`), where this run
    has no checkpoint of it yet, here or carried: the source is this machine's checkpoint or the
    carried copy, whichever has run more epochs, or with `epoch` the one at that epoch. Returns one
    line per model. Raises ValueError or FileNotFoundError, naming the model, where one cannot be branched."""
    params = load(notebook, preset)
    if source_run == params["run"]:
        raise ValueError(f"--branch-from {source_run}: that is this preset's own run; branch into another run")
    source_dir = study.results_dir(source_run, create=False)
    folder, carry = study.results_dir(params["run"]) / "checkpoints", study.carry_folder(params["run"])
    lines = []
    for name, config in _model_configs(params, notebook):
        if (seeds is not None and config.seed not in seeds) or (rules is not None and config.rule not in rules):
            continue
        if (carry / f"{name}.pt").is_file() and not (folder / f"{name}.pt").is_file():
            lines.append(f"{name}: carried in this run already; resumed from there, not branched")
            continue
        found = [path for path in (source_dir / "checkpoints" / f"{name}.pt", source_dir / "carry" / f"{name}.pt")
                 if path.is_file()]
        if epoch is not None:
            found = [path for path in found if checkpoint_epochs(path) == epoch] or found
        if not found:
            raise FileNotFoundError(f"{name}: run {source_run!r} has no checkpoint of this model (in its checkpoints/ "
                                    f"or carry/ folder) to branch from")
        source = max(found, key=checkpoint_epochs)  # ties: this machine's, listed first
        lines.append(branch_checkpoint(source, folder / f"{name}.pt", config, epoch))
    return lines


def check_seeds(params: dict, notebook: str, seeds) -> None:
    """Raise ValueError, naming the preset's seeds, if `seeds` (None: all) holds one the preset does
    not train for `notebook`."""
    known = sorted({seed for each in study.seeds_by_rule(params).values() for seed in each})
    unknown = sorted(set(seeds or []) - set(known))
    if unknown:
        raise ValueError(f"{notebook}: the preset trains seeds {known}, not {unknown}; give --seeds among those")


def check_rules(params: dict, notebook: str, rules) -> None:
    """Raise ValueError, naming the preset's trained rules, if `rules` (None: all) holds one the
    preset does not train for `notebook`."""
    unknown = [rule for rule in rules or [] if rule not in params["rules"]]
    if unknown:
        raise ValueError(f"{notebook}: the preset trains rules {list(params['rules'])}, not {unknown}; "
                         f"give --rules among those")


def training_status(preset, notebook: str, recent: int = 20) -> pd.DataFrame:
    """One row per model of `preset` for `notebook`, from the epoch logs in results/<run>/checkpoints/:
    `done` epochs of `epochs`; `state` ("finished", "stopped" where a stopping rule (the plateau rule,
    `lr_floor`) ended it, "past its epochs" where it trained more epochs than the preset now asks
    (training and evaluation refuse it),
    "in progress", "carried" (unfinished, its checkpoint only in results/<run>/carry/ or further there
    than here: a worker resumes it from there), "not started", or "exported": no finished checkpoint here (none,
    or one behind), but its finished policy is in results/<run>/models/ and is what training reads,
    `eie.training.finished_training`); the last held-out greedy cost; the median seconds of its last
    `recent` epochs; `hours_spent`, the summed time of its logged epochs (those it resumes from or was
    kept with, on whatever machine ran them: a restart from epoch 1 drops the earlier ones, and probes
    and evaluations are not in it; NaN for a log from before epoch times were logged); and
    `hours_left`, its remaining epochs at that pace (at most: a stopping rule may end it earlier;
    for a model not started, the pace of the others)."""
    params = load(notebook, preset)
    rows = []
    for name, _config, log, carried, exported, stopped in _current_logs(params, notebook):
        epochs = params["epochs"]
        done = len(log)
        state = ("exported" if exported else "past its epochs" if done > epochs else
                 "finished" if done == epochs else "stopped" if stopped else
                 "carried" if carried else "in progress" if done else "not started")
        rows.append({"model": name, "done": done, "epochs": epochs, "state": state,
                     "eval_cost": float(log.eval_cost.iloc[-1]) if done else float("nan"),
                     "s_per_epoch": float(log.seconds.tail(recent).median()) if done else float("nan"),
                     "hours_spent": float(log.seconds.sum(min_count=1)) / 3600 if done else 0.0})
    status = pd.DataFrame(rows)
    pace = status.s_per_epoch.fillna(status.s_per_epoch.median())
    training = status.state.isin(["in progress", "carried", "not started"])
    return status.assign(hours_left=((status.epochs - status.done) * pace / 3600).round(2).where(training, 0.0))


def _current_logs(params: dict, notebook: str):
    """For every model the notebook trains with `params`, in its training order: (checkpoint name,
    training configuration, the epoch log a worker would resume from or read, whether that log is the
    carried copy's, whether it is an exported finished policy's, whether a stopping rule ended it).
    The log is this machine's, the carried copy's where that is further (`_epoch_log`), or, where
    neither has finished, the exported policy's when one is in results/<run>/models/."""
    try:
        folder = study.results_dir(params["run"], create=False) / "checkpoints"
    except FileNotFoundError:  # nothing of this run yet (and asking must not create its folder)
        folder = None
    carry = None if folder is None else study.carry_folder(params["run"])  # the run's folder exists: nothing created
    for name, config in _model_configs(params, notebook):
        log, carried = _epoch_log(folder, carry, name)
        stopped = _stopped(log, params)
        exported = None if len(log) >= params["epochs"] or stopped or folder is None else finished_training(
            study.models_folder(params["run"]) / f"{name}.pt", config)
        if exported is not None:  # trained elsewhere and exported (past any unfinished checkpoint here): a
            log, carried, stopped = exported.log, False, _stopped(exported.log, params)  # worker reads it
        yield name, config, log, carried, exported is not None, stopped


def training_logs(preset, notebook: str) -> pd.DataFrame:
    """The epoch logs of every model of `preset` for `notebook` that has run an epoch (finished or
    not; where `training_status` reads them), stacked with the columns `eie.plotting.training_figure`
    reads: setting ("" for TSP, "C10", "120x100"), rule, seed, epoch, eval_cost, train_cost, p_value,
    lr. Empty (those columns, no rows) before any model has run an epoch."""
    params = load(notebook, preset)
    parts = [log.assign(setting=make_problem(config.problem, **config.problem_options).setting,
                        rule=config.rule, seed=config.seed)
             for _name, config, log, *_ in _current_logs(params, notebook) if len(log)]
    columns = ["setting", "rule", "seed", "epoch", "eval_cost", "train_cost", "p_value", "lr"]
    if not parts:
        return pd.DataFrame(columns=columns)
    logs = pd.concat(parts, ignore_index=True)
    return logs[[column for column in columns if column in logs] + [c for c in logs if c not in columns]]


def progress_figure(preset, notebook: str):
    """`eie.plotting.training_figure` of the models trained so far (`training_logs`): the held-out
    greedy objective per epoch of each (rule, seed), faint the objective of the solutions sampled on
    the training batches, and the baseline test's p-values: the notebook's training curves so far,
    for a run still training. Saved as figures/<notebook's number>_<problem>_training_progress.png
    (with `_<run>` before `.png` for a run other than "default", `eie.plotting.save_figure`); returns
    (figure, path).
    Raises ValueError, naming the run, when no model has run an epoch yet."""
    params = load(notebook, preset)
    logs = training_logs(preset, notebook)
    if logs.empty:
        raise ValueError(f"{notebook}: no model of run {params['run']!r} has run an epoch yet; start a worker "
                         f"(python -m eie.worker {preset} {notebook}) and plot once it has logged one")
    config = _model_configs(params, notebook)[0][1]
    problem = make_problem(config.problem, **config.problem_options)
    ylabel = f"greedy {problem.objective_name}"  # every registered problem names its objective
    apply_style()
    fig = training_figure(logs, ylabel, maximise=problem.maximise, sampled=True)
    name = f"{notebook.split('_')[0]}_{problem.name}_training_progress"
    return fig, save_figure(fig, name, run=params["run"])


def _stopped(log: pd.DataFrame, params: dict) -> bool:
    """Whether a stopping rule (the plateau rule, `lr_floor`) stopped the training whose epoch log is `log`."""
    return plateau_action(list(log.eval_cost) if len(log) else [], log.get("lr"), params["plateau_window"],
                          params["plateau_tolerance"], params["lr_drops"], params["lr_floor"]) == "stop"


def _model_configs(params: dict, notebook: str) -> list[tuple[str, TrainConfig]]:
    """(checkpoint name, training configuration) of every model the notebook trains with `params`,
    in the order it trains them."""
    return [(study.model_name(setup["config"]["problem"], rule, params["n_train"], seed, setup["tag"]),
             TrainConfig(rule=rule, seed=seed, **setup["config"]))
            for setup in study.training_setups(notebook, params)
            for rule, seed in study.model_pairs(params["rules"], study.seeds_by_rule(params))]


def _epoch_log(checkpoints: Path | None, carry: Path | None, name: str) -> tuple[pd.DataFrame, bool]:
    """The epoch log of model `name`: this machine's (in `checkpoints`) or, where the copy carried
    from another machine (in `carry`) has more epochs, the carried one, which is where a worker
    resumes it (`eie.training`); and whether it is the carried one."""
    logs = [] if checkpoints is None else [(checkpoints / f"{name}_log.csv", False), (carry / f"{name}_log.csv", True)]
    found = [(_read_epoch_log(path), is_carried) for path, is_carried in logs if path.is_file()]
    if not found:
        return pd.DataFrame(columns=["eval_cost", "seconds"]), False
    log, carried = max(found, key=lambda pair: len(pair[0]))  # ties: this machine's, listed first
    return log, carried and len(log) > 0


def _read_epoch_log(path: Path) -> pd.DataFrame:
    """The epoch log of the model whose CSV is `path`: the log its checkpoint beside it holds, where
    there is one (what training resumes from, so a CSV that is empty, cut off, header-only or
    unreadable cannot hide a trained model), else the CSV (an empty log where it cannot be read)."""
    checkpoint = path.with_name(path.name.removesuffix("_log.csv") + ".pt")
    if checkpoint.is_file():
        try:
            return checkpoint_log(checkpoint)
        except (ValueError, KeyError, RuntimeError, OSError) as error:
            print(f"warning: {checkpoint} cannot be read ({error}); using {path.name}", file=sys.stderr)
    try:
        return pd.read_csv(path)
    except (pd.errors.EmptyDataError, pd.errors.ParserError, UnicodeDecodeError):
        return pd.DataFrame(columns=["eval_cost", "seconds"])


def save_carry(preset, notebook: str, written: list | None = None) -> list[str]:
    """Make this machine's training of `preset` for `notebook` resumable from the repository alone.

    - A model in training here: its checkpoint and epoch log are copied into results/<run>/carry/
      (a carried copy trained for at least as many epochs is kept: it is what this machine would
      resume from; an equal one is the same checkpoint).
    - A model whose training ended here: its policy is exported to results/<run>/models/
      (`eie.checkpoints.export_policy`: weights and epoch log, a quarter of the checkpoint; what
      `train_models` and the evaluation read), unless an export there is this model's end already
      (`finished_training` accepts it), and its carried copy is deleted, which the export
      supersedes. An exported model cannot be trained further on another machine: raising
      `epochs` or `lr_drops` there trains it again from the start (this machine's checkpoint can go
      on). Where git ignores models/ or the export is not accepted (a model trained past `epochs`),
      the whole checkpoint is carried instead.
    - The run's finished evaluation pieces (reference solutions, methods' objectives; small) are
      copied to carry/evaluation/, and the carried pieces no lookup reads any more (the code that
      computes them has changed since: `EvaluationStore.stale_pieces`) are deleted.
    Returns one line per model whose files changed; the size in bytes of every file written is
    appended to `written`, if given (what the carry adds to the commits: `main` prints the sum)."""
    written = [] if written is None else written
    params = load(notebook, preset)
    status = training_status(preset, notebook)
    checkpoints, carry = study.results_dir(params["run"]) / "checkpoints", study.carry_folder(params["run"])
    models = study.models_folder(params["run"])
    for piece in sorted((checkpoints / "evaluation").glob("*.pt")):
        if not (carry / "evaluation" / piece.name).is_file():
            copy_atomic(piece, carry / "evaluation" / piece.name)
            written.append(piece.stat().st_size)
    for piece in EvaluationStore(carry / "evaluation").stale_pieces():
        piece.unlink()  # an edit to the code that computes it made it miss: nothing reads it any more
    exportable = not _ignored_by_git(models / "policy.pt")
    saved = []
    for row, (name, config) in zip(status.itertuples(), _model_configs(params, notebook), strict=True):
        local = checkpoints / f"{name}.pt"
        if not local.is_file():
            continue
        ended = row.state in ("finished", "stopped") and checkpoint_epochs(local) == row.done
        if ended and exportable:
            exported = models / f"{name}.pt"
            if finished_training(exported, config) is None:
                replaced = " (replacing one that was not this model's end)" if exported.is_file() else ""
                export_policy(local, exported)
                written.append(exported.stat().st_size)
                saved.append(f"{name} ({row.state}, {row.done} epochs): policy exported to models/{replaced}")
            if finished_training(exported, config) is not None:
                removed = [path for path in (carry / f"{name}.pt", carry / f"{name}_log.csv") if path.is_file()]
                for path in removed:
                    path.unlink()
                if removed:
                    saved.append(f"{name}: carried checkpoint deleted (its export in models/ supersedes it)")
                continue
        if (ended or row.state in ("in progress", "carried")) and not _carry_is_further(carry / f"{name}.pt", local):
            copy_atomic(local, carry / f"{name}.pt")
            # the log the copied checkpoint holds: the CSV here may already have the next epoch's row
            write_csv_atomic(checkpoint_log(carry / f"{name}.pt"), carry / f"{name}_log.csv")
            written += [(carry / f"{name}.pt").stat().st_size, (carry / f"{name}_log.csv").stat().st_size]
            saved.append(f"{name} ({row.state}, {row.done} epochs): checkpoint carried")
    return saved


def carry_size(sizes) -> str:
    """The summed `sizes` (bytes) in MiB, as `--save-carry` reports what it wrote."""
    return f"{sum(sizes) / 2**20:.2f} MiB"


def _ignored_by_git(path: Path) -> bool:
    """Whether git ignores `path` (a file written there cannot be committed); False outside a
    repository or without git."""
    try:
        result = subprocess.run(["git", "check-ignore", "-q", str(path)], cwd=repo_root(), capture_output=True)
    except OSError:
        return False
    return result.returncode == 0


def _carry_is_further(carried: Path, local: Path) -> bool:
    """Whether the carried checkpoint has run at least as many epochs as this machine's (which then
    is not copied over it: with more, the next worker here resumes from the carried one instead;
    with as many, it is the same checkpoint, carried already)."""
    if not carried.is_file():
        return False
    epochs_carried, epochs_here = checkpoint_epochs(carried), checkpoint_epochs(local)
    if epochs_carried > epochs_here:
        print(f"{local.stem}: the carried checkpoint has run {epochs_carried} epochs, this machine's {epochs_here}; "
              "the carried one is kept (a worker here resumes from it)", flush=True)
    return epochs_carried >= epochs_here


def print_status(preset, notebook: str) -> None:
    status = training_status(preset, notebook)
    with pd.option_context("display.width", 160, "display.max_rows", None):
        print(status.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    trained = status.state.isin(["finished", "stopped", "exported"]).sum()
    if status.hours_left.isna().any():
        left = "hours left unknown until a model has run an epoch (no pace measured yet)"
    else:
        left = (f"at most {status.hours_left.sum():.1f} h of training left, summed over the models at their recent "
                "pace (pace measured with whatever else ran beside it; k workers side by side share the sum, "
                "so two at one thread each take about half of it)")
    print(f"{trained} of {len(status)} models trained; {left}")
    past = status[status.state == "past its epochs"]
    for row in past.itertuples():
        print(f"{row.model} has trained {row.done} epochs, more than the preset's {row.epochs}: it is neither "
              f"evaluated nor trained further; raise epochs to {row.done} to use it, or delete its checkpoint to retrain")
    untimed = status.hours_spent.isna().sum()
    print(f"{status.hours_spent.sum():.1f} h of epoch time spent in all, summed over the models' logged epochs "
          f"({status.hours_spent[status.state.isin(['finished', 'stopped', 'exported'])].sum():.1f} h on the trained ones)"
          + (f"; {untimed} model(s) logged no epoch times, not counted" if untimed else ""))


def main(argv=None) -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="a preset YAML file, e.g. presets/paper.yaml")
    parser.add_argument("notebooks", nargs="+", choices=training_notebooks(), metavar="notebook",
                        help=f"one or more of {', '.join(training_notebooks())}, trained in this order")
    parser.add_argument("--threads", type=int, default=1, help="threads of this worker, torch's and the bin-packing "
                        "kernel's (default 1)")
    parser.add_argument("--status", action="store_true", help="print where the preset's training stands; train nothing")
    parser.add_argument("--plot", action="store_true",
                        help="with --status: also draw the training so far (held-out objective per epoch, the "
                             "baseline test's p-values) to figures/<number>_<problem>_training_progress_<run>.png "
                             "(no _<run> for the default run)")
    parser.add_argument("--references", action="store_true",
                        help="solve the preset's test instances with the reference solver; train nothing")
    parser.add_argument("--evaluate", action="store_true",
                        help="evaluate every method on the models whose training has ended, into the run's "
                             "evaluation store (the notebook reads it back); train nothing")
    parser.add_argument("--save-carry", action="store_true",
                        help="copy the checkpoints of the models in training here into results/<run>/carry/ and "
                             "export the finished ones to results/<run>/models/ (to commit); train nothing")
    parser.add_argument("--seeds", type=int, nargs="+", default=None,
                        help="train only these of the preset's seeds, in the preset's order (e.g. --seeds 0: seed 0 "
                             "of each notebook before the others); training only")
    parser.add_argument("--rules", nargs="+", default=None,
                        help="train only these of the preset's trained rules (e.g. --rules inv_sqrt_d: the 1/sqrt(d) "
                             "models before the others); training only")
    parser.add_argument("--branch-from", default=None, metavar="RUN",
                        help="start the models with no checkpoint in this run from run RUN's checkpoints of the same "
                             "models, where only settings that have not acted by then differ (a warm-up that ends "
                             "there, another learning rate after it), then train")
    parser.add_argument("--at-epoch", type=int, default=None, metavar="E",
                        help="with --branch-from: branch from the source checkpoint at epoch E (refused if none is)")
    parser.add_argument("--cluster", default=None, metavar="SPEC",
                        help="train (and evaluate) on a Dask cluster: local:K, slurm:N or a scheduler address "
                             "(eie.distributed; pip install -e '.[cluster]')")
    parser.add_argument("--gpu-share", type=float, default=None,
                        help="with --cluster slurm:N, the share of a GPU one training job takes (e.g. 0.25)")
    args = parser.parse_args(argv)
    try:
        for notebook in args.notebooks:
            load(notebook, args.preset)
    except (ValueError, FileNotFoundError) as error:
        parser.error(str(error))
    if args.threads < 1:
        parser.error(f"--threads must be at least 1, not {args.threads}")
    modes = [flag for flag, on in (("--status", args.status), ("--save-carry", args.save_carry),
                                   ("--references", args.references), ("--evaluate", args.evaluate)) if on]
    if len(modes) > 1:
        parser.error(f"give one of {', '.join(modes)}, not several")
    if args.seeds is not None and modes:
        parser.error(f"--seeds picks the models to train; {modes[0]} covers every seed")
    if args.rules is not None and modes:
        parser.error(f"--rules picks the models to train; {modes[0]} covers every rule")
    if args.plot and not args.status:
        parser.error("--plot draws the training so far beside --status's table; give --status --plot")
    if args.branch_from is not None and (modes or args.cluster):
        parser.error(f"--branch-from starts this machine's training from another run; not with "
                     f"{(modes or ['--cluster'])[0]}")
    if args.at_epoch is not None and args.branch_from is None:
        parser.error("--at-epoch names the epoch of the checkpoint to branch from; give it with --branch-from RUN")
    if args.save_carry:
        written = []
        for notebook in args.notebooks:
            saved = save_carry(args.preset, notebook, written)
            nothing = "nothing to save (every model trained or in training here is carried or exported already)"
            print(f"{notebook}: " + ("; ".join(saved) if saved else nothing))
        print(f"this carry wrote {carry_size(written)} to commit; every file added or changed is stored whole in "
              "the history each time: commit a run's checkpoints once, when its training stops on this machine")
        return None
    if args.status:
        for notebook in args.notebooks:
            if len(args.notebooks) > 1:
                print(f"== {notebook}")
            print_status(args.preset, notebook)
            if args.plot:
                try:
                    _fig, path = progress_figure(args.preset, notebook)
                except ValueError as error:
                    print(error)
                else:
                    print(f"training so far drawn to {path}")
        return None
    for notebook in args.notebooks:  # every notebook's parameters checked before hours of training start
        params = load(notebook, args.preset)
        try:
            check_seeds(params, notebook, args.seeds)
            check_rules(params, notebook, args.rules)
        except ValueError as error:
            parser.error(str(error))
    use_threads(args.threads)
    if args.cluster and not (args.status or args.save_carry or args.references):

        client = client_for(args.cluster, threads=args.threads)
        try:
            for line in run_grid(client, args.preset, args.notebooks, seeds=args.seeds, rules=args.rules,
                                 gpu_share=args.gpu_share, train=not args.evaluate):
                print(line, flush=True)
        finally:
            client.close()
        return None
    if args.evaluate:
        for notebook in args.notebooks:
            params = load(notebook, args.preset)
            for line in study.evaluate_finished(notebook, {**params, "progress": True}):
                print(f"{notebook} {line}", flush=True)
        return None
    if args.branch_from is not None:
        for notebook in args.notebooks:
            try:
                lines = branch_models(args.preset, notebook, args.branch_from, args.at_epoch, args.seeds, args.rules)
            except (ValueError, FileNotFoundError, FileExistsError) as error:
                parser.error(str(error))
            for line in lines:
                print(line, flush=True)
    if not args.references:
        with stop_after_epoch_on_signals():
            try:
                run_worker(args.preset, args.notebooks, seeds=args.seeds, rules=args.rules)
            except Stopped as stopped:
                print(stopped, flush=True)
                return exit_status()  # not 0: the training has not ended
        return None
    for notebook in args.notebooks:
        params = load(notebook, args.preset)
        references = study.compute_references(notebook, {**params, "progress": True})
        for setting, by_n in references.items():
            means = [f"n = {n}: {values.mean():.2f} ({len(values)} instances)" if len(values) else f"n = {n}: none"
                     for n, values in by_n.items()]
            print(f"{notebook} {setting}: reference mean objective " + ", ".join(means), flush=True)
    return None


if __name__ == "__main__":
    sys.exit(main())
