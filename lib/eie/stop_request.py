"""Stop a training process at the next epoch boundary instead of in the middle of an epoch.

A checkpoint is written after every epoch, so a process killed mid-epoch loses only that epoch; on a
long epoch (minutes on a large model) that is worth avoiding. Inside `stop_after_epoch_on_signals()`
the first SIGTERM or SIGINT only asks for a stop: training finishes the epoch it is in, writes its
checkpoint and log, and raises `Stopped` (`check_stop`, called by `eie.training.train` after each
epoch is saved, and by the worker before each model and while it waits for one). A second signal
acts as the default would (SIGTERM ends the process, SIGINT raises KeyboardInterrupt), for when the
epoch is too long to wait for.

The handlers are installed only where this context is entered (the background worker), never by
the library on import: a notebook's interrupt button still interrupts at once.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from contextlib import contextmanager

# Whether a stop was asked for, and by which signal. A plain flag, not a threading.Event: a signal
# handler that takes a lock the interrupted code may hold can deadlock.
_state = {"requested": False, "signal": None}


class Stopped(Exception):
    """Work stopped where nothing is lost (after an epoch's checkpoint, or between models) because a
    stop was asked for; the same command resumes it."""


def request_stop(signum: int | None = None) -> None:
    """Ask training to stop after the epoch it is in (what the first signal does)."""
    _state.update(requested=True, signal=signum)


def stop_requested() -> bool:
    return _state["requested"]


def exit_status() -> int:
    """The status a process stopped on request exits with: 128 + the signal's number, as if the signal
    had ended it (so `worker && next-step` does not go on), or 1 where no signal asked."""
    return 128 + _state["signal"] if _state["signal"] is not None else 1


def wait_for_stop(seconds: float) -> bool:
    """Sleep up to `seconds`, waking within a second of a stop being asked for; whether one was."""
    end = time.monotonic() + seconds
    while not _state["requested"] and (left := end - time.monotonic()) > 0:
        time.sleep(min(left, 1.0))
    return _state["requested"]


def check_stop(what: str) -> None:
    """Raise `Stopped` (saying `what` stopped) if a stop was asked for."""
    if _state["requested"]:
        raise Stopped(f"{what}; the same command resumes it")


def _default_action(signum: int):
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


@contextmanager
def stop_after_epoch_on_signals(signals=(signal.SIGTERM, signal.SIGINT)):
    """While inside, the first of `signals` asks for a stop at the next epoch boundary and a second
    one, of any of them, acts as the default would. Previous handlers are put back and the request
    cleared on leaving. Only the main thread can install handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum, _frame):
        message = (f"\n{signal.Signals(signum).name}: stopping after the current epoch, once its checkpoint is "
                   "written (send a signal again to stop at once and lose the epoch in progress)\n")
        os.write(2, message.encode())  # straight to stderr: the signal may have interrupted a buffered print
        request_stop(signum)
        for each in signals:  # a second signal, of any of them, acts at once
            signal.signal(each, _default_action(each))

    previous = {signum: signal.signal(signum, ask) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _state.update(requested=False, signal=None)
