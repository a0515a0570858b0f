"""Training checkpoints and exported policies on disk: their format, reading them safely, the
carried copy a run resumes from on another machine, the epoch log inside, and the export of a
finished run's policy (weights and epoch log, without the optimiser, baseline and generator
states). `eie.training` writes and resumes them; these functions need no model.

A checkpoint holds only tensors and plain values and is read with `weights_only=True`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from .files import copy_atomic, load_tensors, save_atomic, write_csv_atomic

CHECKPOINT_FORMAT = "eie-train/1"


def read_checkpoint(path: Path) -> dict:
    """A training checkpoint or exported policy, read safely and checked to be one."""
    payload = load_tensors(path, "training checkpoint")
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a training checkpoint of this study; delete it or choose another run folder")
    return payload


def resume_from_carry(checkpoint: Path, log_path: Path, carry_dir: Path) -> bool:
    """Put `carry_dir`'s checkpoint of the same name in place of `checkpoint` when there is none
    here, or when the carried one was trained for more epochs with the same settings (a machine
    that comes back with an older checkpoint of the run), and write its epoch log beside it; True
    if it did. The copy is checked by `_load_checkpoint` as any checkpoint is."""
    carried = carry_dir / checkpoint.name
    if not carried.is_file():
        return False
    carried_state = read_checkpoint(carried)
    if checkpoint.exists():
        local = read_checkpoint(checkpoint)
        if carried_state["epoch"] <= local["epoch"] or carried_state["config"] != local["config"]:
            return False  # the local one is as far or further (or another run's: `_load_checkpoint` says so)
        replaced = f" (this machine's own had {local['epoch']})"
    else:
        replaced = ""
    copy_atomic(carried, checkpoint)
    rows = carried_state["log"]
    write_csv_atomic(pd.DataFrame(rows), log_path)
    print(f"{checkpoint.stem}: resuming after epoch {len(rows)} from the checkpoint carried in {carried}{replaced}",
          flush=True)
    return True


def checkpoint_log(path: Path) -> pd.DataFrame:
    """The epoch log kept inside the training checkpoint (or exported policy) at `path`: one row per
    epoch it has run, whatever the CSV beside it says (that one is rewritten after the checkpoint)."""
    return pd.DataFrame(read_checkpoint(Path(path)).get("log") or [])


def checkpoint_epochs(path: Path) -> int:
    """How many epochs the training checkpoint at `path` has run."""
    return int(read_checkpoint(Path(path))["epoch"])


def install_checkpoint(source, target) -> str:
    """Put a checkpoint written elsewhere (another machine or device) at `target`, where training
    resumes it, with its epoch log beside it; one already at `target` with as many epochs is kept.
    A checkpoint from another device type keeps its generator state as it is: resuming restarts the
    sampling stream (`restore_sampling`). Returns what was done, in words."""
    source, target = Path(source), Path(target)
    payload = load_tensors(source, "training checkpoint")
    if target.exists() and int(load_tensors(target, "training checkpoint")["epoch"]) >= int(payload["epoch"]):
        return f"{target.name}: the checkpoint here is as far; kept"
    copy_atomic(source, target)
    write_csv_atomic(checkpoint_log(target), target.with_name(f"{target.stem}_log.csv"))
    return f"{target.name}: checkpoint at epoch {payload['epoch']} into {target.parent}"


def kept_policy(path) -> dict:
    """Which policy the checkpoint or exported policy at `path` gives (`load_trained`): {"policy":
    "last" or "baseline", "epoch": the epoch after which it was the current policy}."""
    payload = read_checkpoint(Path(path))
    held = payload.get("kept")
    if held is None:
        return {"policy": "last", "epoch": int(payload["epoch"])}
    return {"policy": held["policy"], "epoch": int(held["epoch"])}


def policy_weights(payload: dict) -> dict:
    """The weights a checkpoint or export gives as its policy: the kept ones of a finished run that
    keeps another than its last (`TrainConfig.final_policy`; an export holds them as its `model`)."""
    held = payload.get("kept")
    return held["model"] if held is not None and "model" in held else payload["model"]


def export_policy(checkpoint, path) -> Path:
    """Copy the policy of a training checkpoint (`load_trained`'s: the current one, or the one a
    finished run keeps) and its epoch log, without the optimiser, baseline and generator states, to
    `path` (a few MB; `load_trained` reads it like a checkpoint, and `finished_training` takes it for
    the finished model where the checkpoint is gone)."""
    checkpoint, path = Path(checkpoint), Path(path)
    if not checkpoint.is_file():
        raise FileNotFoundError(f"no training checkpoint at {checkpoint}: train the model first")
    payload = read_checkpoint(checkpoint)
    exported = {key: payload[key] for key in ("format", "config", "epoch", "log")}
    exported["model"] = policy_weights(payload)
    if payload.get("kept") is not None:
        exported["kept"] = {key: value for key, value in payload["kept"].items() if key != "model"}
    return save_atomic(exported, path)
