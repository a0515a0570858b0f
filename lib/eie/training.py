"""REINFORCE with a greedy rollout baseline (Kool et al. 2019), for any problem of `eie.problems`.

Each step samples solutions for a fresh batch with the current policy and greedily decodes the same
batch with the baseline policy; the loss is mean((cost - baseline cost) * log-likelihood). After
each epoch the current policy and the baseline are decoded greedily on a held-out set; when a
one-sided paired t-test says the current policy is better (p < alpha) it becomes the baseline and a
new held-out set is drawn. Option `lr_decay_on_p` is the EIE paper's rule: when that p-value
exceeds 0.95 the learning rate is multiplied by 0.95. Option `plateau_window` (W epochs) stops a
run before `epochs` once the held-out greedy cost has stopped improving: the mean of the last W
epochs is less than `plateau_tolerance` (relative) below the mean of the W epochs before them
(`plateau_reached`). Option `lr_drops` (K) makes the first K times the rule holds a lower learning
rate instead of a stop (multiplied by `lr_drop_factor`, a "reduce on plateau"), each time judged on
the epochs since the last drop (`plateau_action`). Option `lr_floor` (> 0) stops a run after the
first epoch trained at a rate below it (with `lr_decay_on_p` or `lr_drops`, whose rates only fall).
The rules read only the log, so a resumed run stops (or drops) at the same epoch. Option
`lr_after_warmup` (> 0) sets the learning rate at the first epoch after the warm-up, when the rollout baseline takes over. Option `samples_per_instance`
(K > 1) replaces the greedy rollout in the loss, from the first epoch after the warm-up, by the
leave-one-out mean of K samples of each instance (Kool et al. 2019b, "Buy 4 REINFORCE samples, get a
baseline for free"): each sample's baseline is the mean cost of the instance's K - 1 other samples,
so advantages are centred on the instance. A step still decodes `batch_size` solutions: those of
`batch_size` / K instances (a multiple of K is required), so a run costs what it cost with K = 1
and a checkpoint of the warm-up branches into it (`branch_checkpoint`). The greedy rollout is still
decoded on each batch (logged as `baseline_cost`) and the rollout baseline's paired test runs as
before. Option `rule_warm_start` (S > 0 steps; a problem with a `teach_action_rule` method, bin
packing's `BPP.teach_action_rule`) teaches the action head the problem's hand-written rule by imitation
before epoch 1, from its own seeded stream; reinforcement then starts from that head. Option
`final_policy` says what a finished run keeps: its last policy, or "baseline", the rollout baseline's (the last policy the paired test found better; model selection on the test's
fresh held-out instances, never on a test set), which the checkpoint then holds beside the last one
(`_keep_final_policy`) and `load_trained` and `export_policy` give.

A checkpoint (`eie.checkpoints`) is written atomically after every epoch (model, baseline, optimiser, random-generator
states, held-out set); a run started again with the same configuration resumes from it and ends
exactly where an uninterrupted run would. Each epoch appends a row to a CSV log. A checkpoint is
locked while it is trained (a second process asking for the same model is refused with a message),
holds only tensors and plain values, and is read with `weights_only=True`. A checkpoint can be
branched into another configuration (`branch_checkpoint`) when the settings that differ have not
yet acted by its epoch: the branch then resumes exactly as a run of the new configuration would.
Where a stop was asked for (`eie.stop_request`: the worker's first SIGTERM or SIGINT), training
raises `Stopped` once the epoch in progress is saved.
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path

import pandas as pd
import torch
from scipy import stats
from tqdm import tqdm

from . import methods
from .checkpoints import CHECKPOINT_FORMAT, checkpoint_epochs, policy_weights, read_checkpoint, resume_from_carry
from .evaluation import greedy_costs
from .files import (
    FileBusy,
    exclusive,
    remove_stale_temporaries,
    save_atomic,
    write_csv_atomic,
)
from .grad_mode import gradients_on
from .memory import check_fits
from .model import PRECISIONS, AttentionModel, ModelConfig
from .problems import PROBLEMS, make_problem
from .problems.base import CheckedInstance
from .stop_request import check_stop

WARMUP_BETA = 0.8  # Kool et al. (2019): the exponential baseline's decay, b <- beta b + (1 - beta) mean cost
# What a finished run keeps (`TrainConfig.final_policy`): "last", the policy after its last epoch; or
# "baseline", the rollout baseline's policy, the last one that a paired test on fresh held-out
# instances found better than its predecessor (no later policy was), from the epoch it became the baseline.
FINAL_POLICIES = ("last", "baseline")


@dataclass(frozen=True)
class TrainConfig:
    problem: str = "tsp"
    problem_options: dict = field(default_factory=dict)
    n_train: int = 100
    rule: str = "inv_sqrt_d"
    sites: tuple = ("encoder", "glimpse")
    n_mode: str = "instance"
    epochs: int = 500
    steps_per_epoch: int = 10
    batch_size: int = 256
    lr: float = 1e-4
    max_grad_norm: float = 1.0
    baseline_eval_size: int = 1024
    alpha: float = 0.05
    lr_decay_on_p: bool = False
    precision: str = "float32"  # "bfloat16": the encoder's linear layers under bfloat16 autocast while training
    plateau_window: int = 0  # W > 0: stop before `epochs` once the held-out cost stops improving (`plateau_reached`)
    plateau_tolerance: float = 0.001
    lr_drops: int = 0  # K > 0: the first K plateaus multiply lr by lr_drop_factor and training goes on
    lr_drop_factor: float = 0.25
    lr_floor: float = 0.0  # > 0: stop after the first epoch trained at a learning rate below this (`plateau_action`)
    warmup_epochs: int = 0  # W > 0: Kool et al.'s warm-up, an exponential baseline in the first W epochs (`WARMUP_BETA`)
    lr_after_warmup: float = 0.0  # > 0: the learning rate from epoch W + 1 on, when the rollout baseline takes over
    samples_per_instance: int = 1  # K > 1: after the warm-up, batch_size / K instances sampled K times, leave-one-out baseline
    rule_warm_start: int = 0  # S > 0: before epoch 1, S optimiser steps teach the action head the problem's rule (bin packing)
    final_policy: str = "last"  # what a finished run keeps: its last policy, or the rollout "baseline"'s (`FINAL_POLICIES`)
    seed: int = 0
    model: ModelConfig = ModelConfig()

    def __post_init__(self):
        if self.rule not in methods.keys(trained=True):
            applied = f" ({self.rule!r} is applied at test time to the model trained with " \
                      f"{methods.get(self.rule).applied_to!r})" if self.rule in methods.keys() else ""
            raise ValueError(f"models are trained with one of {methods.keys(trained=True)}, got {self.rule!r}{applied}")
        for name in ("n_train", "epochs", "steps_per_epoch", "batch_size", "baseline_eval_size", "samples_per_instance"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.rule_warm_start < 0:
            raise ValueError(f"rule_warm_start must be >= 0 (0: no warm start), got {self.rule_warm_start}")
        if self.rule_warm_start and not hasattr(PROBLEMS.get(self.problem), "teach_action_rule"):
            taught = ", ".join(key for key, kind in PROBLEMS.items() if hasattr(kind, "teach_action_rule"))
            raise ValueError(f"rule_warm_start teaches the action head a hand-written rule: {self.problem} has none "
                             f"(problems with one: {taught}); set it to 0")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        if not (self.lr > 0 and 0 < self.alpha < 1 and self.max_grad_norm > 0):
            raise ValueError("lr > 0, 0 < alpha < 1 and max_grad_norm > 0 are required")
        if not 0 <= self.lr_floor < self.lr:
            raise ValueError(f"lr_floor must be >= 0 (0: no floor) and below lr = {self.lr} (training would stop "
                             f"after its first epoch), got {self.lr_floor}")
        if self.lr_floor and not (self.lr_decay_on_p or self.lr_drops):
            raise ValueError("lr_floor stops training once the learning rate has fallen below it: it needs "
                             "lr_decay_on_p or lr_drops (with neither the rate never falls); set it to 0")
        if self.plateau_window < 0 or not 0 <= self.plateau_tolerance < 1:
            raise ValueError(f"plateau_window >= 0 (0: train every epoch) and 0 <= plateau_tolerance < 1 are required, "
                             f"got {self.plateau_window} and {self.plateau_tolerance}")
        if self.final_policy not in FINAL_POLICIES:
            raise ValueError(f"final_policy must be one of {', '.join(FINAL_POLICIES)}, got {self.final_policy!r}")
        if self.warmup_epochs < 0:
            raise ValueError(f"warmup_epochs must be >= 0 (0: the greedy rollout baseline from the start), got "
                             f"{self.warmup_epochs}")
        if self.lr_after_warmup < 0:
            raise ValueError(f"lr_after_warmup must be > 0 (the learning rate after the warm-up) or 0 (lr "
                             f"throughout), got {self.lr_after_warmup}")
        if self.lr_after_warmup and not self.warmup_epochs:
            raise ValueError("lr_after_warmup sets the learning rate once the warm-up ends: it needs "
                             "warmup_epochs > 0 (or give the rate as lr)")
        if self.lr_after_warmup and (self.lr_drops or self.lr_decay_on_p):
            raise ValueError("lr_after_warmup changes the learning rate after the warm-up: it cannot be combined "
                             "with lr_drops or lr_decay_on_p (two rules would change the rate)")
        if self.batch_size % self.samples_per_instance:
            raise ValueError(f"samples_per_instance = {self.samples_per_instance} splits each step's batch_size "
                             f"decodings among batch_size / {self.samples_per_instance} instances: batch_size "
                             f"must be a multiple of it, got {self.batch_size}")
        if self.lr_drops < 0 or not 0 < self.lr_drop_factor < 1:
            raise ValueError(f"lr_drops >= 0 and 0 < lr_drop_factor < 1 are required, got {self.lr_drops} and "
                             f"{self.lr_drop_factor}")
        if self.lr_drops and (not self.plateau_window or self.lr_decay_on_p):
            raise ValueError("lr_drops > 0 lowers the learning rate where the plateau rule holds: it needs "
                             "plateau_window > 0, and lr_decay_on_p off (two rules would change the rate)")

    def resume_key(self) -> dict:
        """What must match for a checkpoint to resume this configuration: every setting but those
        that say when to stop or what to keep at the end (a run may be extended). Options at their
        defaults (`_KEYED_WHEN_SET`) are left out, so a checkpoint written without an option reads
        as one with its default."""
        key = asdict(self)
        # Like epochs, these say when to stop (or, lr_drops, when to go on at a lower rate): a model
        # stopped by the plateau rule resumes into its next phase when lr_drops is raised.
        for name in ("epochs", "plateau_window", "plateau_tolerance", "lr_drops", "lr_drop_factor", "lr_floor",
                     "final_policy"):
            key.pop(name)
        for name, default in _KEYED_WHEN_SET.items():
            if key[name] == default:
                key.pop(name)
        for name, default in _MODEL_KEYED_WHEN_SET.items():
            if key["model"][name] == default:
                key["model"].pop(name)
        key["sites"] = list(key["sites"])
        return key


# Training and model options a checkpoint's key holds only when they differ from these defaults: a
# checkpoint written without the option then resumes as one with its default.
_KEYED_WHEN_SET = {"precision": "float32", "warmup_epochs": 0, "lr_after_warmup": 0.0, "samples_per_instance": 1,
                   "rule_warm_start": 0}
# Settings that act only from the first epoch after the warm-up: a checkpoint of at most as many
# epochs as both its own warm-up and the new one can branch into other values (`branch_checkpoint`).
_ACTING_AFTER_WARMUP = ("warmup_epochs", "lr_after_warmup", "samples_per_instance")
_MODEL_KEYED_WHEN_SET = {"pointer_clip": "plain", "normalization": "layer"}


def build_model(config: TrainConfig, device="cpu") -> AttentionModel:
    problem = make_problem(config.problem, **config.problem_options)
    method = methods.get(config.rule)
    attention = method.build(config.model.head_dim, N=config.n_train, sites=config.sites, n_mode=config.n_mode)
    model = (method.model or AttentionModel)(problem, attention, config.model).to(device)
    model.encoder_precision = config.precision
    return model


# Peak bytes of one REINFORCE step per (instance, node) and unit of the model width (activations kept
# for the backward pass; measured 120-130 x 4 bytes x width for TSP and CVRP at n = 100-200, batch 64),
# and per (instance, node pair): the decoder's per-step logits kept for every step.
TRAIN_BYTES_PER_NODE_AND_WIDTH = 160 * 4
TRAIN_BYTES_PER_PAIR = 64


def training_step_bytes(config: TrainConfig, batch_size: int | None = None) -> int:
    """Estimated peak memory of one training step of `config` (at `batch_size` if given)."""
    batch, n = batch_size or config.batch_size, config.n_train
    return int(batch * n * (config.model.dim * TRAIN_BYTES_PER_NODE_AND_WIDTH + n * TRAIN_BYTES_PER_PAIR))


def resolve_device(device: str = "auto") -> torch.device:
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} asked for, but CUDA is not available here; use 'cpu' or 'auto'")
    if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
        raise ValueError(f"device {device!r} asked for, but this machine has {torch.cuda.device_count()} CUDA "
                         f"device(s), numbered from 0")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ValueError("device 'mps' asked for, but Apple's Metal backend is not available here; use 'cpu' or 'auto'")
    return torch.device(device)


def greedy_cost(model: AttentionModel, instance: dict, chunk: int = 1024) -> torch.Tensor:
    """Greedy costs with the model's own scale (the rollout baseline's test)."""
    return greedy_costs(model, instance, chunk=chunk)


def paired_t_test_p(candidate: torch.Tensor, baseline: torch.Tensor) -> float:
    """One-sided p-value of H1: the candidate's mean cost is lower than the baseline's."""
    diff = (candidate - baseline).double().cpu().numpy()
    if diff.std() == 0:
        return 0.0 if diff.mean() < 0 else 1.0
    return float(stats.ttest_rel(candidate.double().cpu().numpy(), baseline.double().cpu().numpy(), alternative="less").pvalue)


def plateau_reached(eval_costs, window: int, tolerance: float) -> bool:
    """True when the mean of the last `window` held-out costs is less than `tolerance` (relative)
    below the mean of the `window` before them: the policy has stopped improving. False while fewer
    than 2 * window epochs have run, and always when window is 0 (the rule off)."""
    if window <= 0 or len(eval_costs) < 2 * window:
        return False
    recent = sum(eval_costs[-window:]) / window
    before = sum(eval_costs[-2 * window:-window]) / window
    return before - recent < tolerance * abs(before)


def plateau_action(eval_costs, lrs, window: int, tolerance: float, lr_drops: int = 0, lr_floor: float = 0.0) -> str:
    """What the stopping rules say before the next epoch, from the epoch log so far (the held-out
    costs, and the learning rate of each epoch, read only with `lr_drops` or `lr_floor`): "train",
    "drop" (the cost has stopped improving at this rate and a drop is left: lower the rate and
    train on) or "stop". With `lr_floor` > 0 a log whose last epoch trained at a rate below it
    stops. With `lr_drops` > 0 the plateau rule looks only at the current phase, the last epochs
    trained at the last epoch's rate, and the drops made so far are the changes of rate in the log;
    with 0 it looks at every epoch (`plateau_reached`)."""
    costs = list(eval_costs)
    lrs = None if lrs is None else list(lrs)
    if lr_floor > 0 and costs:
        if lrs is None or len(lrs) != len(costs) or lrs[-1] is None:
            raise ValueError("plateau_action: lr_floor reads each epoch's learning rate, and the log has none "
                             "for its last epoch")
        if lrs[-1] < lr_floor:
            return "stop"
    if not lr_drops:  # the learning rates are not read (a log without them will do)
        return "stop" if plateau_reached(costs, window, tolerance) else "train"
    lrs = [] if lrs is None else lrs
    if len(costs) != len(lrs):
        raise ValueError(f"plateau_action: {len(costs)} held-out costs but {len(lrs)} learning rates")
    start = len(lrs)
    while start > 0 and lrs[start - 1] == lrs[-1]:
        start -= 1
    if not plateau_reached(costs[start:], window, tolerance):
        return "train"
    drops = sum(1 for before, after in pairwise(lrs) if after != before)
    return "drop" if drops < lr_drops else "stop"


def _log_action(rows, config: TrainConfig) -> str:
    """`plateau_action` on a run's epoch log (its rows) under `config`'s rules."""
    return plateau_action([row["eval_cost"] for row in rows], [row.get("lr") for row in rows],
                          config.plateau_window, config.plateau_tolerance, config.lr_drops, config.lr_floor)


def _load_checkpoint(path: Path, config: TrainConfig) -> dict:
    """The checkpoint to resume `config` from: written with the same settings, and not trained for
    more epochs than `config` asks (a shorter run would otherwise silently return the longer one)."""
    payload = read_checkpoint(path)
    if payload["config"] != config.resume_key():
        key = config.resume_key()
        changed = sorted(k for k in set(payload["config"]) | set(key) if payload["config"].get(k) != key.get(k))
        raise ValueError(f"checkpoint {path} was written with different settings ({', '.join(changed)}); "
                         "use another run folder or delete the checkpoint")
    if payload["epoch"] > config.epochs:
        raise ValueError(f"checkpoint {path} has already been trained for {payload['epoch']} epochs, more than the "
                         f"epochs = {config.epochs} asked for: ask for epochs >= {payload['epoch']} to use it, "
                         "or use another run folder (or delete the checkpoint) to train a shorter run")
    return payload


def branch_difference(source_key: dict, config: TrainConfig, epoch: int) -> list[str]:
    """Why a checkpoint written with `source_key` after `epoch` epochs cannot continue as `config`
    (empty where it can): each setting that differs and has already acted. Settings that act only
    after the warm-up (`_ACTING_AFTER_WARMUP`) may differ while `epoch` is within both warm-ups;
    every other setting must be equal."""
    key = config.resume_key()
    defaults = {**_KEYED_WHEN_SET, "model": {}}
    changed = sorted(k for k in set(source_key) | set(key)
                     if source_key.get(k, defaults.get(k)) != key.get(k, defaults.get(k)))
    warmups = (source_key.get("warmup_epochs", 0), config.warmup_epochs)
    if epoch <= min(warmups):
        return [name for name in changed if name not in _ACTING_AFTER_WARMUP]
    return changed


def branch_checkpoint(source, target, config: TrainConfig, epoch: int | None = None) -> str:
    """Start `config`'s training at `target` from the checkpoint at `source`, written with other
    settings that have not acted by its epoch (`branch_difference`): e.g. a run whose warm-up had not
    ended branched into one whose warm-up ends there, or with another learning rate after it. The
    copy holds `config`'s key and a record of where it came from (`branched_from`: the source's file
    name, epoch and key), so `train` resumes it as its own checkpoint, exactly as `config` trained
    from the start would have gone on. `epoch`, if given, is the epoch the source must be at (so a
    source trained further since is refused, not silently branched later).
    Raises ValueError naming the settings that forbid it; FileExistsError where `target` holds
    another checkpoint (one branched from the same source and epoch is kept). Returns what was done."""
    source, target = Path(source), Path(target)
    if not source.is_file():
        raise FileNotFoundError(f"no checkpoint to branch from at {source}: train (or carry) the source run first")
    payload = read_checkpoint(source)
    at = int(payload["epoch"])
    if epoch is not None and at != epoch:
        raise ValueError(f"{source} has run {at} epochs, not the {epoch} asked for: branch from a copy at epoch "
                         f"{epoch} (a run's committed carry/ copy, for example) or ask for --at-epoch {at}")
    if at > config.epochs:
        raise ValueError(f"{source} has run {at} epochs, more than the epochs = {config.epochs} of the branch")
    blocking = branch_difference(payload["config"], config, at)
    if blocking:
        acted = ", ".join(blocking)
        raise ValueError(f"{source} cannot be branched into this configuration: {acted} differ and have acted "
                         f"within its {at} epochs (only {', '.join(_ACTING_AFTER_WARMUP)} may differ, and only "
                         "while the checkpoint is within both warm-ups)")
    record = {"checkpoint": source.name, "epoch": at, "config": payload["config"]}
    if target.exists():
        held = read_checkpoint(target).get("branched_from") or {}
        if {k: held.get(k) for k in ("checkpoint", "epoch")} == {"checkpoint": source.name, "epoch": at}:
            return f"{target.name}: branched from {source.name} at epoch {at} already; kept"
        raise FileExistsError(f"{target} exists and was not branched from {source.name} at epoch {at}: delete it "
                              "or branch into another run folder")
    payload = {**payload, "config": config.resume_key(), "branched_from": record}
    payload.pop("kept", None)  # a finished run's kept policy is not the branch's
    target.parent.mkdir(parents=True, exist_ok=True)
    save_atomic(payload, target)
    write_csv_atomic(pd.DataFrame(payload["log"]), target.with_name(f"{target.stem}_log.csv"))
    return f"{target.name}: branched from {source} at epoch {at}"


@dataclass
class TrainResult:
    model: AttentionModel
    log: pd.DataFrame
    checkpoint: Path


def train(config: TrainConfig, run_dir, name: str | None = None, device: str = "auto",
          progress: bool = True, carry_dir=None, exported_dir=None) -> TrainResult:
    """Train (or resume) one model; checkpoint and log live in `run_dir` under `name`. The returned
    model is in eval mode and runs in float32 whatever `config.precision` trained it in.

    Gradients are on inside whatever grad mode the caller is in. While it runs the checkpoint is
    locked: a second process training the same model into the same folder is refused (`FileBusy`),
    unless the model is finished (then it is read: nothing writes to it again).
    Where `run_dir` has no checkpoint of `name` but `carry_dir` has one (a copy carried from
    another machine, see `eie.worker --save-carry`), training resumes from that copy. Where neither
    has one but `exported_dir` holds this model exported after its training ended
    (`finished_training`), that policy is returned and nothing is trained.
    """
    device = resolve_device(device)
    check_fits(f"a training step of {config.batch_size} instances", lambda batch: training_step_bytes(config, batch),
               config.batch_size, device, name="batch_size", low=1, advice="lower batch_size")
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    name = name or f"{config.problem}_{config.rule}_n{config.n_train}_seed{config.seed}"
    checkpoint, log_path = run_dir / f"{name}.pt", run_dir / f"{name}_log.csv"
    try:
        with exclusive(checkpoint, "trained"), gradients_on():  # the caller's grad mode does not matter
            remove_stale_temporaries(checkpoint)
            if carry_dir is not None:
                resume_from_carry(checkpoint, log_path, Path(carry_dir))
            if exported_dir is not None and not (checkpoint.exists() and finished_training(checkpoint, config)):
                exported = finished_training(Path(exported_dir) / f"{name}.pt", config, str(device))
                if exported is not None:  # finished elsewhere: this machine's unfinished checkpoint is behind it
                    behind = (f" (this machine's unfinished checkpoint, {checkpoint_epochs(checkpoint)} epochs, "
                              "is left as it is)" if checkpoint.exists() else "")
                    print(f"{name}: trained to the end already, read from {exported.checkpoint}{behind}", flush=True)
                    return exported
            return _train_locked(config, checkpoint, log_path, name, device, progress)
    except FileBusy:
        # Another process holds the lock. Where the model is finished, that process is only reading it
        # (a worker passing over the models it has trained) and nothing will write to it again.
        finished = finished_training(checkpoint, config, str(device))
        if finished is None:
            raise
        return finished


def finished_training(path: Path, config: TrainConfig, device: str = "cpu") -> TrainResult | None:
    """The policy at `path`, a training checkpoint or a policy exported from one (`export_policy`),
    as a finished training of `config`, or None where it is not one: no file; other settings; fewer
    epochs than `config.epochs` asks for without a stopping rule having stopped it, or more; ended
    keeping another policy than `config.final_policy` (a checkpoint is then finished again at once
    by `train`; an export alone is trained again); or no epoch log. A finished
    model is all an evaluation needs, so a run whose checkpoints are gone (they are not committed)
    is not trained again, and a finished checkpoint another process holds is read without waiting."""
    if not path.is_file():
        return None
    payload = read_checkpoint(path)
    log = payload.get("log")
    if payload["config"] != config.resume_key() or not log or len(log) != payload["epoch"]:
        return None
    if (payload.get("kept") or {"policy": "last"})["policy"] != config.final_policy:
        return None  # ended keeping another policy: a checkpoint is finished again (`_keep_final_policy`)
    stopped = _log_action(log, config) == "stop"
    if payload["epoch"] > config.epochs or (payload["epoch"] < config.epochs and not stopped):
        return None
    return TrainResult(load_trained(path, device), pd.DataFrame(log), path)


def sampling_restart_seed(seed: int, epoch: int) -> int:
    """The seed a model's sampling stream restarts from after `epoch` epochs where its saved generator
    state cannot be restored (one device's generator cannot take another's: a GPU's Philox state is not
    a CPU's Mersenne twister)."""
    return seed * 7919 + 2 + 1000 * epoch


def restore_sampling(sample_gen: torch.Generator, saved: torch.Tensor, seed: int, epoch: int) -> int | None:
    """Give `sample_gen` the saved state of a checkpoint trained for `epoch` epochs; where that state is
    another kind of generator's (a checkpoint moved between a CPU and a GPU), restart the stream from
    `sampling_restart_seed` instead and return that seed (else None). The continuation is then exact
    from the restart on, but is not what the first device would have run."""
    if saved.numel() == sample_gen.get_state().numel():
        sample_gen.set_state(saved.to(sample_gen.get_state().device))
        return None
    restart = sampling_restart_seed(seed, epoch)
    sample_gen.manual_seed(restart)
    return restart


def repeat_instances(batch: dict, k: int) -> dict:
    """Each instance of `batch` k times in a row (instance i at rows i k ... i k + k - 1)."""
    return CheckedInstance({key: value.repeat_interleave(k, dim=0) for key, value in batch.items()})


def leave_one_out_mean(cost: torch.Tensor, k: int) -> torch.Tensor:
    """For costs (B k,) of k samples per instance in a row: each sample's mean over the instance's
    k - 1 other samples, the baseline that keeps the REINFORCE gradient unbiased."""
    per_instance = cost.view(-1, k)
    return ((per_instance.sum(dim=1, keepdim=True) - per_instance) / (k - 1)).reshape(-1)


def _train_locked(config: TrainConfig, checkpoint: Path, log_path: Path, name: str, device: torch.device,
                  progress: bool) -> TrainResult:
    """`train`'s loop, run while the checkpoint's lock is held."""
    torch.manual_seed(config.seed)  # parameter initialisation
    model = build_model(config, device)
    if config.rule_warm_start and not checkpoint.exists():  # a resumed run reads the taught head from its checkpoint
        taught = model.problem.teach_action_rule(model, config.rule_warm_start, config.n_train,
                                                 config.batch_size // config.samples_per_instance,
                                                 torch.Generator().manual_seed(config.seed * 7919 + 3), device)
        print(f"{name}: action head taught the rule in {config.rule_warm_start} steps ({100 * taught:.1f} % of the "
              f"last packing's decisions as the rule's)", flush=True)
    baseline = copy.deepcopy(model)
    optimiser = torch.optim.Adam(model.parameters(), lr=config.lr)
    data_gen = torch.Generator().manual_seed(config.seed * 7919 + 1)
    sample_gen = torch.Generator(device=device).manual_seed(config.seed * 7919 + 2)
    problem = model.problem

    def new_eval_set():
        return problem.generate(config.baseline_eval_size, config.n_train, data_gen, device)

    start_epoch, rows = 0, []
    if checkpoint.exists():
        state = _load_checkpoint(checkpoint, config)
        model.load_state_dict(state["model"])
        baseline.load_state_dict(state["baseline"])
        optimiser.load_state_dict(state["optimiser"])
        data_gen.set_state(state["data_gen"])
        restarted = restore_sampling(sample_gen, state["sample_gen"], config.seed, state["epoch"])
        if restarted is not None:
            print(f"{name}: the checkpoint's sampling state is another device's generator's; sampling restarted "
                  f"from seed {restarted}", flush=True)
        eval_set = {k: v.to(device) for k, v in state["eval_set"].items()}
        start_epoch, rows = state["epoch"], state["log"]
        warmup_baseline = state.get("warmup_baseline")
        origin = {"branched_from": state["branched_from"]} if "branched_from" in state else {}
    else:
        origin = {}
        eval_set = new_eval_set()
        warmup_baseline = None  # the exponential baseline of the warm-up epochs (a float once set)
    baseline_costs = greedy_cost(baseline, eval_set)

    bar = tqdm(range(start_epoch, config.epochs), desc=name, disable=not progress, initial=start_epoch,
               total=config.epochs, mininterval=1.0)
    for epoch in bar:
        action = _log_action(rows, config)
        if action == "stop":
            break  # checked before each epoch, so a resumed run that had stopped stops again at once
        if action == "drop":  # the epoch's row records the new rate, so a resumed run does not drop twice
            for group in optimiser.param_groups:
                group["lr"] *= config.lr_drop_factor
        if config.lr_after_warmup and epoch == config.warmup_epochs:  # the checkpoint keeps it from here on
            for group in optimiser.param_groups:
                group["lr"] = config.lr_after_warmup
        started = time.perf_counter()
        model.train()
        costs, base = [], []
        several = config.samples_per_instance > 1 and epoch >= config.warmup_epochs
        for _ in range(config.steps_per_epoch):
            batch = problem.generate(config.batch_size // config.samples_per_instance if several else config.batch_size,
                                     config.n_train, data_gen, device)
            sampled = repeat_instances(batch, config.samples_per_instance) if several else batch
            solution, log_likelihood = model.sample_with_gradients(sampled, sample_gen)
            cost = problem.cost(sampled, solution)
            with torch.no_grad():
                baseline.eval()
                base_solution, _ = baseline.rollout(batch, "greedy")
                base_cost = problem.cost(batch, base_solution)
            base.append(float(base_cost.mean()))  # logged: the greedy rollout's cost, warm-up or not
            if epoch < config.warmup_epochs:
                mean = float(cost.mean())
                warmup_baseline = mean if warmup_baseline is None else \
                    WARMUP_BETA * warmup_baseline + (1 - WARMUP_BETA) * mean
                base_cost = torch.full_like(cost, warmup_baseline)
            elif several:
                base_cost = leave_one_out_mean(cost.detach(), config.samples_per_instance)
            loss = ((cost - base_cost) * log_likelihood).mean()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            optimiser.step()
            costs.append(float(cost.mean()))
        candidate_costs = greedy_cost(model, eval_set)
        p_value = paired_t_test_p(candidate_costs, baseline_costs)
        updated = p_value < config.alpha
        lr = optimiser.param_groups[0]["lr"]
        if updated:
            baseline.load_state_dict(model.state_dict())
            eval_set = new_eval_set()
            baseline_costs = greedy_cost(baseline, eval_set)
        elif config.lr_decay_on_p and p_value > 0.95:
            for group in optimiser.param_groups:
                group["lr"] *= 0.95
        rows.append({"epoch": epoch + 1, "train_cost": sum(costs) / len(costs), "baseline_cost": sum(base) / len(base),
                     "eval_cost": float(candidate_costs.mean()), "p_value": p_value, "baseline_updated": updated,
                     "lr": lr, "seconds": time.perf_counter() - started})
        save_atomic({"format": CHECKPOINT_FORMAT, "config": config.resume_key(), "epoch": epoch + 1,
                     "model": model.state_dict(), "baseline": baseline.state_dict(),
                     "optimiser": optimiser.state_dict(), "data_gen": data_gen.get_state(),
                     "sample_gen": sample_gen.get_state(), "eval_set": {k: v.cpu() for k, v in eval_set.items()},
                     "log": rows, "warmup_baseline": warmup_baseline, **origin}, checkpoint)
        write_csv_atomic(pd.DataFrame(rows), log_path)
        if epoch + 1 < config.epochs:  # the last epoch goes on to keep the final policy
            check_stop(f"{name}: stopped after epoch {epoch + 1}, its checkpoint written")
    _keep_final_policy(config, checkpoint, model, baseline, rows)
    model.eval()
    model.encoder_precision = "float32"  # the trained policy is evaluated in full precision, as `load_trained` gives it
    return TrainResult(model, pd.DataFrame(rows), checkpoint)


def _keep_final_policy(config: TrainConfig, checkpoint: Path, model: AttentionModel, baseline: AttentionModel,
                       rows: list) -> None:
    """At the end of a run, make the checkpoint and `model` hold what `config.final_policy` keeps.

    "baseline": the rollout baseline's weights are written into the checkpoint as its `kept` policy
    (with the epoch they became the baseline; 0 where no policy ever beat the initial one) and
    loaded into `model`; the checkpoint's `model` stays the last policy, so a run extended later
    (more epochs, another lr drop) resumes exactly. "last": no kept policy (one kept by an earlier
    choice is removed). The checkpoint is written only where it holds another choice."""
    payload = read_checkpoint(checkpoint)
    held = payload.get("kept")
    if config.final_policy == "last":
        if held is not None:
            del payload["kept"]
            save_atomic(payload, checkpoint)
        return
    updates = [row["epoch"] for row in rows if row["baseline_updated"]]
    epoch = updates[-1] if updates else 0
    if held is None or held["policy"] != config.final_policy or held["epoch"] != epoch:
        payload["kept"] = held = {"policy": config.final_policy, "epoch": epoch, "model": baseline.state_dict()}
        save_atomic(payload, checkpoint)
    model.load_state_dict(held["model"])


def load_trained(path, device: str = "cpu") -> AttentionModel:
    """The policy of a training checkpoint or exported policy (its configuration is rebuilt from the
    file): the current one, or where a finished run keeps another (`TrainConfig.final_policy`,
    `kept_policy`) that one; in float32 even if it was trained with a bfloat16 encoder."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no training checkpoint at {path}: train the model first (notebook 03)")
    payload = read_checkpoint(path)
    try:
        key = dict(payload["config"])
        key["model"] = ModelConfig(**key["model"])
        key["sites"] = tuple(key["sites"])
        config = TrainConfig(epochs=max(payload["epoch"], 1), **key)
        model = build_model(config, resolve_device(device))
        model.load_state_dict(policy_weights(payload))
        model.encoder_precision = "float32"  # evaluation runs in full precision, whatever training used
    except Exception as error:
        raise ValueError(f"{path} is not a loadable training checkpoint ({error})") from error
    model.eval()
    return model
