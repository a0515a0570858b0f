"""The threads of a process: what the worker, the cluster tasks and the scripts set the same way."""

from __future__ import annotations

import torch


def use_threads(count: int) -> None:
    """Limit this process to `count` threads: torch's and the numba bin-packing kernel's
    (`problems.placement_kernel`, which otherwise uses every core whatever torch is told)."""
    torch.set_num_threads(count)
    try:
        import numba
    except ImportError:  # pragma: no cover  (the torch path of `heightmap` runs without numba)
        return
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
