"""Watching a computation for what would break or stall it on a GPU, on a machine without one.

- `device_clean()`: inside it, a tensor created without an explicit device lands on torch's `meta`
  device (the default device is set to it) and any operation that makes or reads a meta tensor
  raises `DeviceLeak`, naming the operation. Run with the inputs on the CPU, a computation that
  passes creates every tensor on its inputs' device, so it runs unchanged with them on CUDA.
  (The default device alone is not enough: indexing a CPU tensor with a meta index silently returns
  garbage.)
- `HostSyncs()`: counts the operations that make a GPU wait for the host to read a value back
  (`.item()`, `bool(tensor)`, `int(tensor)`, `nonzero`, `masked_select`, boolean-mask indexing, ...),
  so that a decoding loop can be shown to synchronise a bounded number of times, not once per step.

Both are `TorchDispatchMode`s: they see every ATen operation, on any device, and cost a few
microseconds per operation (tests and benchmarks only).
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# ATen operations whose result's size or value the host must know: each is a device-to-host wait on a GPU.
SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "unique_consecutive", "_unique2", "unique_dim",
            "is_nonzero", "equal", "allclose"}


class DeviceLeak(RuntimeError):
    """A tensor was created without the device of the computation's inputs."""


class _NoMetaTensors(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if any(isinstance(t, torch.Tensor) and t.device.type == "meta" for t in tree_leaves((args, kwargs, out))):
            raise DeviceLeak(f"{func} made or used a tensor on the default device instead of the inputs' device: "
                             "pass device= (or build it with *_like / new_*) where the tensor is created")
        return out


@contextmanager
def device_clean():
    """Raise `DeviceLeak` at the first tensor created without an explicit device (see the module
    docstring). Build modules and inputs before entering: inside, torch's default device is `meta`."""
    with torch.device("meta"), _NoMetaTensors():
        yield


class HostSyncs(TorchDispatchMode):
    """Counts the operations of `SYNC_OPS` run inside it: `with HostSyncs() as syncs: ...; syncs.count`,
    and `syncs.ops` (name -> count)."""

    def __init__(self):
        super().__init__()
        self.ops: dict[str, int] = {}

    @property
    def count(self) -> int:
        return sum(self.ops.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in SYNC_OPS:
            self.ops[name] = self.ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))
