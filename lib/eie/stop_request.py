"""Stop a training process at the next epoch boundary instead of in the middle of an epoch.

A checkpoint is written after every epoch, so a process killed mid-epoch loses only that epoch; on a
long epoch (minutes on a large model) that is worth avoiding. Inside `stop_after_epoch_on_signals()`
the first SIGTERM or SIGINT only asks for a stop: training finishes the epoch it is in, writes its
checkpoint and log, and raises `Stopped` (`check_stop`, called by `eie.training.train` after each
epoch is saved). A second signal acts as the default would (SIGTERM ends the process, SIGINT
raises KeyboardInterrupt), for when the epoch is too long to wait for.

The handlers are installed only where this context is entered (the background worker), never by
the library on import: a notebook's interrupt button still interrupts at once.
"""

from __future__ import annotations

import signal
import sys
import threading
from contextlib import contextmanager

_requested = threading.Event()


class Stopped(Exception):
    """Training stopped at an epoch boundary because a stop was asked for; the checkpoint is complete."""

    def __init__(self, name: str, epoch: int):
        super().__init__(f"{name}: stopped after epoch {epoch}, its checkpoint written; the same command resumes it")
        self.name, self.epoch = name, epoch


def request_stop() -> None:
    """Ask training to stop after the epoch it is in (what the first signal does)."""
    _requested.set()


def stop_requested() -> bool:
    return _requested.is_set()


def check_stop(name: str, epoch: int) -> None:
    """Raise `Stopped` if a stop was asked for; called once epoch `epoch` of `name` is saved."""
    if _requested.is_set():
        raise Stopped(name, epoch)


def _default_action(signum: int):
    return signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL


@contextmanager
def stop_after_epoch_on_signals(signals=(signal.SIGTERM, signal.SIGINT)):
    """While inside, the first of `signals` asks for a stop at the next epoch boundary and the second
    acts as the default would. Previous handlers and the request are restored on leaving. Only the
    main thread can install handlers; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def ask(signum, _frame):
        print(f"\n{signal.Signals(signum).name}: stopping after the current epoch, once its checkpoint is written "
              "(send it again to stop at once and lose the epoch in progress)", file=sys.stderr, flush=True)
        request_stop()
        signal.signal(signum, _default_action(signum))

    previous = {signum: signal.signal(signum, ask) for signum in signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _requested.clear()
