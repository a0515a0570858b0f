"""Safe files for the study's checkpoints, models and fitted nets.

- `save_atomic`: write to a temporary file beside the target, then rename over it, so an
  interrupted write leaves the previous file intact (each writer has its own temporary name);
  `copy_atomic` copies a file the same way;
- `load_tensors`: `torch.load(weights_only=True)`: tensors and plain Python values only, so a
  crafted file cannot run code when it is read;
- `exclusive`: an advisory lock on a file that another process is writing (a checkpoint being
  trained), refused at once with a message instead of two writers racing on one file;
- `remove_stale_temporaries`: the temporary files interrupted writes left behind.
"""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

TEMPORARY_SUFFIX = ".tmp"
_UMASK = os.umask(0o022)
os.umask(_UMASK)  # read once: files written here get the mode a plain open() would give (0o666 & ~umask)


@contextmanager
def _written_then_renamed(path):
    """Yield a temporary file name beside `path`; renamed over `path` when the block ends, deleted if it fails."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=TEMPORARY_SUFFIX, dir=path.parent)
    os.close(handle)
    os.chmod(temporary, 0o666 & ~_UMASK)  # mkstemp makes 0600: a group sharing a results folder could not read it
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, (OSError, RuntimeError)) and _disk_full(error):
            free = shutil.disk_usage(path.parent).free
            raise OSError(errno.ENOSPC, f"no space left on the disk holding {path.parent} ({free / 2**20:.0f} MiB "
                                        f"free) while writing {path.name}; the previous file, if any, is intact: "
                                        f"free some space and run again") from error
        raise


def _disk_full(error: BaseException) -> bool:
    """Whether a failed write failed for want of space (torch's archive writer reports it as an
    'unexpected pos' or a failed file write rather than as ENOSPC)."""
    return getattr(error, "errno", None) == errno.ENOSPC or any(
        sign in str(error) for sign in ("No space left", "unexpected pos", "file write failed"))


def save_atomic(payload, path) -> Path:
    """`torch.save(payload, path)` that never leaves a half-written `path` behind. The same payload
    gives the same bytes (saved through a file handle, the archive's inner folder is not named after
    the temporary file), so a committed file saved again unchanged is not a change to git."""
    with _written_then_renamed(path) as temporary, open(temporary, "wb") as handle:
        torch.save(payload, handle)
    return Path(path)


def copy_atomic(source, path) -> Path:
    """Copy the file `source` to `path` so that `path` is never half-written (see `save_atomic`).
    A source replaced by rename while it is copied (a checkpoint saved meanwhile) is read whole:
    the copy reads the file it opened."""
    with _written_then_renamed(path) as temporary:
        shutil.copyfile(source, temporary)
    return Path(path)


def write_csv_atomic(frame, path) -> Path:
    """`frame.to_csv(path, index=False)` that never leaves a half-written or empty `path` behind (a
    worker killed at its time limit while writing its epoch log, say)."""
    with _written_then_renamed(path) as temporary:
        frame.to_csv(temporary, index=False)
    return Path(path)


def savez_atomic(arrays: dict, path) -> Path:
    """`numpy.savez_compressed(path, **arrays)` that never leaves a half-written `path` behind."""
    with _written_then_renamed(path) as temporary, open(temporary, "wb") as handle:
        np.savez_compressed(handle, **arrays)
    return Path(path)


def remove_stale_temporaries(path) -> list[Path]:
    """Delete the temporary files of interrupted `save_atomic` calls for `path`; returns them.

    Call it only while holding `exclusive(path)`, so that no live writer's file is removed."""
    path = Path(path)
    stale = sorted(path.parent.glob(f"{path.name}.*{TEMPORARY_SUFFIX}"))
    for item in stale:
        item.unlink(missing_ok=True)
    return stale


def load_tensors(path, what: str):
    """`torch.load` of `path` restricted to tensors and plain values (no code runs while loading).

    `what` names the kind of file in the error message ("training checkpoint", "EIE net", ...)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no {what} at {path}")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # corrupt, truncated, another kind of file, or one that carries code
        if "Weights only load failed" in str(error):  # torch's own hint to load it unsafely is not repeated
            reason = "it holds pickled objects other than tensors and plain values, which could run code"
        else:
            reason = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        raise ValueError(f"{path} cannot be read: it is not a loadable {what} ({reason}); it is corrupt, truncated, "
                         "another kind of file, or holds objects other than tensors and plain values (which are "
                         "never unpickled: do not load it with weights_only=False unless you wrote it yourself): "
                         "delete it (and recompute it) or choose another file") from None


class FileBusy(RuntimeError):
    """Another process holds the lock of this file."""


def _soft_lock(path: Path, purpose: str, cause: OSError):
    """Where the filesystem refuses flock: `filelock.SoftFileLock` on `<path>.softlock` (a file that
    exists while held; one left by a killed process must be deleted by hand, as the message says)."""
    from filelock import SoftFileLock, Timeout

    soft = SoftFileLock(str(path.with_name(path.name + ".softlock")))
    try:
        soft.acquire(timeout=0)
    except Timeout:
        raise FileBusy(f"{path} is being {purpose} by another process (soft lock {soft.lock_file}: this filesystem "
                       f"has no flock, {cause.strerror}); if no process holds it, delete that file") from None
    warnings.warn(f"this filesystem has no flock ({cause.strerror}): {path} is locked with the soft lock "
                  f"{soft.lock_file}, which a killed process leaves behind", stacklevel=3)
    return soft


@contextmanager
def exclusive(path, purpose: str = "written"):
    """Hold an advisory lock on `path` (through `<path>.lock`) for the duration of the block.

    A second holder, in this or another process, is refused at once with `FileBusy`. The lock
    goes with its process: a killed run leaves nothing to clean up (the empty `.lock` file stays).
    On systems without `fcntl` (Windows) the block runs unlocked."""
    path = Path(path)
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux or macOS
        yield path
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(path.name + ".lock")
    handle = os.open(lock, os.O_CREAT | os.O_RDWR, 0o644)
    soft = None
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise FileBusy(f"{path} is being {purpose} by another process right now (lock {lock}); wait for it to "
                           "finish, or use another run folder (-p run <name>)") from None
        except OSError as error:  # a filesystem without flock (some network filesystems)
            if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
                raise
            soft = _soft_lock(path, purpose, error)
        yield path
    finally:
        if soft is not None:
            soft.release()
        os.close(handle)  # releases the lock
