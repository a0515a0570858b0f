"""Argument checks shared by the library: each error says what was wrong and what to pass instead."""

from __future__ import annotations

import numbers

import numpy as np
import torch


def _values(x) -> np.ndarray:
    if torch.is_tensor(x):
        return x.detach().cpu().numpy()
    return np.asarray(x)


def check_n(n):
    """Sequence lengths must be >= 1 (a softmax over no keys has no entropy)."""
    values = _values(n)
    if values.size == 0:
        raise ValueError("n is empty: pass at least one sequence length >= 1")
    if not np.all(np.isfinite(values)) or np.any(values < 1):
        bad = values[~(np.isfinite(values) & (values >= 1))].reshape(-1)[0]
        raise ValueError(f"n must be >= 1 (a sequence length), got {bad}")
    return n


def check_lambda(lam):
    """Attention scales must be positive and finite."""
    values = _values(lam)
    if not np.all(np.isfinite(values)) or np.any(values <= 0):
        bad = values[~(np.isfinite(values) & (values > 0))].reshape(-1)[0]
        raise ValueError(f"the attention scale lambda must be > 0 and finite, got {bad}")
    return lam


def check_d(d) -> int:
    """Head size: a positive integer."""
    if isinstance(d, bool) or not isinstance(d, numbers.Integral) or d < 1:
        raise ValueError(f"the head size d must be an integer >= 1, got {d!r}")
    return int(d)


def check_samples(samples) -> int:
    if isinstance(samples, bool) or not isinstance(samples, numbers.Integral) or samples < 2:
        raise ValueError(f"samples must be an integer >= 2 (a standard error needs two), got {samples!r}")
    return int(samples)


def check_lengths(N, N_max) -> tuple[int, int]:
    """Training length N >= 2 (at N = 1 a softmax over one key has zero entropy whatever lambda is,
    so no scale keeps it invariant) and maximum extrapolation length N_max > N."""
    for name, value in (("N", N), ("N_max", N_max)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 2:
            raise ValueError(f"{name} must be an integer >= 2 (at N = 1 a softmax over one key has zero entropy "
                             f"whatever lambda is), got {value!r}")
    if N_max <= N:
        raise ValueError(
            f"N_max must be larger than the training length N (got N={N}, N_max={N_max}): "
            "EIE fits lambda(n) on N < n <= N_max"
        )
    return int(N), int(N_max)
