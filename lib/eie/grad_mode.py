"""Gradients on inside a function whatever the caller's mode: `torch.no_grad()`, `set_grad_enabled(False)`
or `torch.inference_mode()` (which `enable_grad` alone does not undo)."""

from __future__ import annotations

import functools
from contextlib import contextmanager

import torch


@contextmanager
def gradients_on():
    with torch.inference_mode(False), torch.enable_grad():
        yield


def with_gradients(function):
    """Decorate `function` to run with gradients on (`gradients_on`); the caller's mode is restored after."""
    @functools.wraps(function)
    def wrapped(*args, **kwargs):
        with gradients_on():
            return function(*args, **kwargs)
    return wrapped
