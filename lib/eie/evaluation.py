"""Extrapolation evaluation: fixed seeded test sets at n = N * 2^k, greedy decoding in chunks with a
feasibility check of every solution, a classical reference solver, and the long-format result table

    problem, setting, method, seed, n, objective, gap_pct

`method` names the method used at test time (`eie.methods`): a test-time method (EIE, exact
lambda*, calibrated log) runs on the model trained with the method it is applied to (1/sqrt(d)),
a trained method on its own model. `gap_pct` = 100 * (mean objective / mean reference objective - 1) over the instances
the reference solved (the first `reference_size` of each test set); the reference solver is the
problem's own (`Problem.reference_costs`, `eie.solvers`).
"""

from __future__ import annotations

import numbers
import time
from contextlib import contextmanager

import numpy as np
import torch

from .attention import Attention
from .memory import check_fits
from .methods import BoundMethod
from .model import AttentionModel
from .problems.base import CheckedInstance


def extrapolation_lengths(n_train: int, n_max: int) -> list[int]:
    """n = N * 2^k up to n_max (the tables' columns)."""
    for name, value in (("n_train", n_train), ("n_max", n_max)):
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    if n_max < n_train:
        raise ValueError(f"n_max ({n_max}) must be at least the training length ({n_train})")
    return [n_train * 2**k for k in range(0, 32) if n_train * 2**k <= n_max]


def fixed_test_set(problem, n: int, size: int, seed: int = 1234, device="cpu") -> dict:
    """The fixed test set of `size` instances at size n (the same for every method and model seed)."""
    one = problem.generate(1, n, torch.Generator().manual_seed(0))
    per_instance = sum(value.element_size() * value.numel() for value in one.values())
    check_fits(f"a test set of {size} instances", lambda instances: instances * per_instance, size, device,
               name="size", low=1, advice="lower test_size")
    generator = torch.Generator().manual_seed(seed * 1_000_003 + n)
    return problem.generate(size, n, generator, device)


# Peak bytes of greedy decoding per (instance, node) and unit of the model width (float32 activations
# of the encoder layers, the decoder's cache and its step tensors; measured 16-21 x 4 bytes x width
# for TSP and CVRP, plain attention and rotary, at n = 200-1600: `benchmarks/bench_memory_estimates.py`), and per
# (instance, node pair, head) for an attention with an additive bias (the bias and its masked copy).
BYTES_PER_NODE_AND_WIDTH = 24 * 4
BYTES_PER_PAIR_AND_HEAD = 6


def decoding_bytes(model, n: int, chunk: int, method: BoundMethod | None = None) -> int:
    """Estimated peak memory of `greedy_costs(model, ..., method, chunk)` on instances of n nodes."""
    config = getattr(model, "config", None)
    width, heads = getattr(config, "dim", 128), getattr(config, "heads", 8)
    attention = (method.method.attention if method is not None and method.method.attention is not None
                 else type(getattr(model, "attention", None)))
    biased = isinstance(attention, type) and issubclass(attention, Attention) and attention.bias is not Attention.bias
    return int(chunk * n * width * BYTES_PER_NODE_AND_WIDTH + (chunk * n * n * heads * BYTES_PER_PAIR_AND_HEAD if biased else 0))


def check_decoding_fits(model, n: int, chunk: int, method: BoundMethod | None = None, device=None) -> None:
    """Refuse (`eie.memory.NotEnoughMemory`) greedy decoding at n nodes in chunks of `chunk` when its
    estimated peak exceeds the memory available on the model's device."""
    device = device if device is not None else next(model.parameters()).device
    check_fits("greedy decoding of a chunk of {} instances".format(chunk),
               lambda size: decoding_bytes(model, size, chunk, method), n, device,
               advice="lower n_max, or the chunk (eval_chunk) to decode fewer instances at once")


@torch.no_grad()
def greedy_costs(model: AttentionModel, instance: dict, method: BoundMethod | None = None,
                 chunk: int = 256) -> torch.Tensor:
    """Greedy costs, decoded in chunks to bound memory, with `method` applied at test time (same
    sites and n mode as trained; None keeps the model's own attention). A method that rescales
    coordinates rescales what the model sees; the solution is checked and costed on `instance`.

    Every solution passes the problem's feasibility check before its cost is returned. Each chunk is
    moved to the model's device (a test set may stay in host memory); the costs are on that device.
    """
    instance = model.problem.check_instance(instance)  # once: the chunks of a valid batch are valid
    device = next(model.parameters()).device
    batch = next(iter(instance.values())).shape[0]
    check_decoding_fits(model, model.problem.size(instance), min(chunk, batch), method, device)
    costs = []
    for start in range(0, batch, chunk):
        part = CheckedInstance({k: v[start:start + chunk].to(device) for k, v in instance.items()})
        costs.append(model.problem.cost(part, greedy_solutions(model, part, method)))
    return torch.cat(costs)


@torch.no_grad()
def greedy_solutions(model: AttentionModel, instance: dict, method: BoundMethod | None = None) -> torch.Tensor:
    """The greedy solutions of `instance` (one batch, on the model's device) with `method` applied
    (None: the model's own attention; a rescaling method rescales what the model sees), each
    checked for feasibility against `instance` itself."""
    if not isinstance(instance, CheckedInstance):  # a chunk of `greedy_costs`, checked as a whole
        instance = model.problem.check_instance(instance)
    model.eval()
    with method_applied(model, method):
        solution, _ = model.rollout(instance if method is None else method.seen_by_model(instance, model.problem),
                                    "greedy")
    model.problem.check(instance, solution)
    return solution


@contextmanager
def method_applied(model: AttentionModel, method: BoundMethod | None):
    """Within the block the model's attention is `method`'s (same sites and n mode as trained); None
    keeps the model's own. The trained attention is restored on leaving, errors included."""
    trained = model.attention
    if method is not None:
        model.attention = method.attention_for(trained)
    try:
        yield model
    finally:
        model.attention = trained


def median_seconds(fn, repeats: int = 3, device: torch.device | str = "cpu") -> float:
    """Median wall-clock seconds of `fn()` over `repeats` calls (CUDA work synchronised)."""
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats}")
    cuda = torch.device(device).type == "cuda"
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize(device)
        started = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - started)
    return float(np.median(times))


def inference_seconds(model: AttentionModel, instance: dict, method: BoundMethod | None = None, chunk: int = 256,
                      repeats: int = 3) -> float:
    """Median wall-clock seconds to decode `instance` greedily (checks included), over `repeats` runs.

    The method is applied inside the timed region (its scale computed once per chunk), so an EIE
    net's evaluation is part of what is measured.
    """
    device = next(model.parameters()).device
    return median_seconds(lambda: greedy_costs(model, instance, method, chunk=chunk), repeats, device)
