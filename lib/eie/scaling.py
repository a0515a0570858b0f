"""Attention scaling rules: n -> lambda(n), and the exact entropy-invariant lambda*.

    1/sqrt(d)            `inv_sqrt_d`   Vaswani et al.
    ln(n)/sqrt(d)        `ln_sqrt_d`    Chiang & Cholak (2022)
    ln(n)/d              `ln_d`         Su (2021)
    log_N(n)/sqrt(d)     `log_N`        calibrated log rule (= 1/sqrt(d) at N)
    ln(n+1)/sqrt(d)      `ssmax`        Scalable-Softmax as PENS uses it
    the fitted EIE net   `eie`          the EIE paper
    lambda*(n)           `exact`        H(n, lambda) = H(N, 1/sqrt(d)) solved (`solve_exact`), tabulated

Names, colours and which rule needs a model of its own are declared once, in `eie.methods`.

Rules accept an int, a float, a NumPy array or a torch tensor and answer in kind (a tensor keeps its
device), so a model can hand them a per-instance n. `eie` and `exact` are entropy-invariance rules
fitted on N <= n <= N_max: below N they return 1/sqrt(d) (the model's training scale); `exact`
refuses n beyond its table, while `eie` evaluates its integral there (untrained range).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import torch
from scipy.interpolate import PchipInterpolator

from .entropy import entropy_eq6, eq6_bytes
from .grad_mode import with_gradients
from .memory import check_fits
from .validation import check_d, check_lengths, check_n


def _log(n):
    return torch.log(n) if torch.is_tensor(n) else np.log(n)


def _as_numeric(n):
    if torch.is_tensor(n):
        return n.to(torch.float64) if not n.is_floating_point() else n
    return np.asarray(n, dtype=np.float64) if np.ndim(n) else float(n)


@dataclass(frozen=True)
class ScalingRule:
    """A named map n -> lambda(n) for head size d."""

    key: str
    d: int
    formula: Callable

    def __call__(self, n):
        check_n(n)
        return self.formula(_as_numeric(n))


def inv_sqrt_d(d: int) -> ScalingRule:
    d = check_d(d)
    c = 1 / math.sqrt(d)

    def formula(n):
        return torch.full_like(n, c) if torch.is_tensor(n) else np.full_like(n, c) if np.ndim(n) else c

    return ScalingRule("inv_sqrt_d", d, formula)


def ln_sqrt_d(d: int) -> ScalingRule:
    d = check_d(d)
    return ScalingRule("ln_sqrt_d", d, lambda n: _log(n) / math.sqrt(d))


def ln_d(d: int) -> ScalingRule:
    d = check_d(d)
    return ScalingRule("ln_d", d, lambda n: _log(n) / d)


def log_N(d: int, N: int) -> ScalingRule:
    d = check_d(d)
    check_lengths(N, N + 1)
    if N < 2:
        raise ValueError(f"the calibrated log rule log_N(n)/sqrt(d) needs a training length N >= 2 (log base N), got N={N}")
    return ScalingRule("log_N", d, lambda n: _log(n) / math.log(N) / math.sqrt(d))


def ssmax(d: int) -> ScalingRule:
    d = check_d(d)
    return ScalingRule("ssmax", d, lambda n: _log(n + 1) / math.sqrt(d))


def eie(net) -> ScalingRule:
    """The fitted EIE net as a rule (1/sqrt(d) below its training length N)."""
    c = net.config

    def formula(n):
        with torch.no_grad():
            if torch.is_tensor(n):
                if next(net.parameters()).device != n.device:
                    net.to(n.device)  # once: the net then runs where n is (no copy to the host per call)
                return net(n.detach().to(torch.float64).clamp(min=c.N)).to(n.dtype)
            lam = net(torch.as_tensor(np.maximum(n, c.N), dtype=torch.float64)).numpy()
            return lam if np.ndim(n) else float(lam)

    return ScalingRule("eie", c.d, formula)


@dataclass(frozen=True)
class ExactTable:
    """lambda*(n) solving H(n, lambda) = H(N, 1/sqrt(d)) on a grid of n, with standard errors."""

    d: int
    N: int
    N_max: int
    n: np.ndarray
    lam: np.ndarray
    se: np.ndarray
    target_entropy: float

    def check(self, source: str = "the lambda* table") -> "ExactTable":
        """Refuse a table that cannot be a solution of H(n, lambda) = H(N, 1/sqrt(d)): its n must rise
        from N to at least N_max, its lambda be finite, positive and non-decreasing, its standard
        errors finite and >= 0. `source` (a file name) goes into the message."""
        n, lam, se = (np.asarray(v, dtype=np.float64) for v in (self.n, self.lam, self.se))
        problems = []
        if not (n.ndim == lam.ndim == se.ndim == 1 and len(n) == len(lam) == len(se) >= 2):
            problems.append("n, lambda and se must be columns of the same length >= 2")
        else:
            if not np.all(np.isfinite(n)) or np.any(np.diff(n) <= 0) or n[0] != self.N or n[-1] < self.N_max:
                problems.append(f"n must rise strictly from N={self.N} to at least N_max={self.N_max}")
            bad = ~np.isfinite(lam) | (lam <= 0)
            if bad.any():
                problems.append(f"lambda must be finite and > 0 (n = {n[bad][0]:g} has {lam[bad][0]})")
            elif np.any(np.diff(lam) < 0):
                problems.append("lambda must not decrease in n")
            if not np.all(np.isfinite(se) & (se >= 0)):
                problems.append("se must be finite and >= 0")
        if not np.isfinite(self.target_entropy):
            problems.append("target_entropy must be finite")
        if problems:
            raise ValueError(f"{source} is not a valid lambda* table: {'; '.join(problems)}. Delete it and recompute "
                             "(notebooks/02_fit_eie.ipynb or eie.scaling.solve_exact)")
        return self

    def interpolator(self) -> PchipInterpolator:
        return PchipInterpolator(np.log(self.n), self.lam)

    def save(self, path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        frame = pd.DataFrame({"n": self.n, "lambda": self.lam, "se": self.se})
        header = f"# d={self.d} N={self.N} N_max={self.N_max} target_entropy={self.target_entropy:.8f}\n"
        path.write_text(header + frame.to_csv(index=False, float_format="%.8f"))
        return path

    @classmethod
    def load(cls, path, d: int | None = None) -> "ExactTable":
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no exact lambda* table at {path}: run notebooks/02_fit_eie.ipynb or eie.scaling.solve_exact")
        try:
            first = path.read_text().splitlines()[0]
            meta = dict(item.split("=") for item in first.lstrip("# ").split())
            frame = pd.read_csv(path, comment="#")
            table = cls(int(meta["d"]), int(meta["N"]), int(meta["N_max"]), frame["n"].to_numpy(float),
                        frame["lambda"].to_numpy(float), frame["se"].to_numpy(float), float(meta["target_entropy"]))
        except Exception as error:
            raise ValueError(f"{path} is not a readable lambda* table ({error}); delete it and recompute") from error
        table.check(str(path))
        if d is not None and d != table.d:
            raise ValueError(f"the lambda* table {path} is for d={table.d}, not d={d}")
        return table


@with_gradients  # Newton's derivative comes from autograd, whatever the caller's grad mode
def solve_exact(
    d: int,
    N: int,
    N_max: int,
    grid_points: int = 25,
    samples: int = 4096,
    target_samples: int = 65536,
    seed: int = 0,
    iterations: int = 12,
    tol: float = 1e-5,
) -> ExactTable:
    """Solve H(n, lambda) = H(N, 1/sqrt(d)) for lambda on a log-spaced grid N..N_max (plus N*2^k).

    The Eq. 6 estimator with fixed normals (common random numbers over the whole grid and every
    lambda) and control variates is a smooth, decreasing function of lambda. Newton's iteration,
    vectorised over the grid and started at the large-n limit sqrt(2 (ln n - H0) / d), converges in
    a few steps. The standard error of lambda* is SE(H) / |dH/dlambda|, the target's included.
    """
    d = check_d(d)
    N, N_max = check_lengths(N, N_max)
    grid = np.unique(np.concatenate([
        np.round(np.geomspace(N, N_max, grid_points)),
        N * 2.0 ** np.arange(0, int(np.floor(np.log2(N_max / N))) + 1),
    ])).astype(np.int64)
    check_fits(f"lambda* on a grid of {len(grid)} lengths x {samples} rows",
               lambda n: eq6_bytes(len(grid), samples, n), N_max, name="N_max", low=N,
               advice="lower N_max or samples")
    target = entropy_eq6(N, 1 / math.sqrt(d), d, samples=target_samples, seed=seed + 1, control_variates=True)
    h0 = float(target.mean)
    n_t = torch.as_tensor(grid)

    def estimate(lam: torch.Tensor):
        lam = lam.clone().requires_grad_(True)
        est = entropy_eq6(n_t, lam, d, samples=samples, seed=seed, control_variates=True)
        (grad,) = torch.autograd.grad(est.mean.sum(), lam)
        return (est.mean.detach() - h0).double(), grad.double(), est.se.double()

    lam = torch.as_tensor(np.sqrt(np.maximum(2 * (np.log(grid) - h0) / d, 1e-4)), dtype=torch.float64)
    for _ in range(iterations):
        f, grad, se = estimate(lam)
        step = torch.clamp(-f / grad, -lam / 2, lam / 2)
        lam = lam + step
        if float(step.abs().max()) < tol:
            break
    f, grad, se = estimate(lam)
    total_se = np.sqrt(se.numpy() ** 2 + float(target.se) ** 2) / grad.abs().numpy()
    return ExactTable(d, N, N_max, grid.astype(float), lam.numpy(), total_se, h0).check(f"the solved table (d={d}, N={N})")


def exact(table: ExactTable) -> ScalingRule:
    """The tabulated entropy-invariant lambda*(n), interpolated monotonically in log n."""
    spline = table.interpolator()
    lam_N = 1 / math.sqrt(table.d)

    def formula(n):
        values = n.detach().cpu().numpy() if torch.is_tensor(n) else np.asarray(n, dtype=np.float64)
        if np.any(values > table.N_max):
            raise ValueError(
                f"the lambda* table covers n <= {table.N_max}, got n = {values.max():g}: "
                "solve it for a larger N_max (eie.scaling.solve_exact)"
            )
        lam = np.where(values <= table.N, lam_N, spline(np.log(np.maximum(values, table.N))))
        if torch.is_tensor(n):
            return torch.as_tensor(lam, dtype=n.dtype, device=n.device)
        return lam if np.ndim(n) else float(lam)

    return ScalingRule("exact", table.d, formula)
