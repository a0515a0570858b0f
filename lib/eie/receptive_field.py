"""The receptive-field condition of relative position biases, in two dimensions.

The RPE paper (Qin et al.) shows that a relative bias b extrapolates when the series of exp(b) along
the sequence converges: far keys then carry a vanishing share of every softmax row, and its
theoretical receptive field (TRF) is the smallest window holding 1 - eps of the series' sum.

For cities uniform in [-1, 1]^2 (area 4, density rho = n / 4) under the distance bias -m r, a query
away from the border sees on average

    Z(n) = 1 + rho * integral_0^inf exp(-m s r) 2 pi r dr = 1 + (n - 1) pi / (2 (m s)^2)

(s: a coordinate factor, 1 when the coordinates are left alone). For a fixed n the series over the
cities, taken by distance, converges; but its sum grows linearly with n, because the number of
cities within any given distance does: the condition holds along no sequence of growing instances.
The fraction of the bias's mass within radius R, 1 - (1 + m s R) exp(-m s R), does not depend on n,
so the TRF radius R(eps) (solving (1 + x) exp(-x) = eps, x = m s R) is fixed, and the cities inside
it, (n - 1) pi R^2 / 4, grow with n: a row spreads over more and more cities and its entropy grows
like ln n. Density-preserving rescaling, s(n) = sqrt(n / N), keeps rho / s^2, hence Z, the TRF in
cities and (for the bias alone) the entropy what they were at N: it is exactly the change of
variables that makes the 2D series the same along the sequence. EIE's lambda(n) scales the content
logits q.k only; it is derived for unbiased rows (Eq. 6), so under a bias it controls part of the
logits.

`monte_carlo` measures all three on random instances (one query city per instance, q and k standard
normal as in Eq. 6, content logits lambda(n) q.k plus the bias); `theory` gives the closed forms.
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from scipy.optimize import brentq

from .entropy import softmax_entropy


def receptive_radius(slope: float, eps: float = 0.05, scale: float = 1.0) -> float:
    """TRF radius (in the instance's units) holding 1 - eps of the bias's mass exp(-m s r) over a plane
    of uniform density: the R with (1 + x) exp(-x) = eps, x = m s R."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    x = brentq(lambda t: (1 + t) * math.exp(-t) - eps, 1e-9, 200.0)
    return x / (slope * scale)


def theory(n_values, slopes, N: int, eps: float = 0.05) -> pd.DataFrame:
    """Closed forms per (n, slope, rescaled): the bias's partition sum Z, the TRF radius and the
    expected number of cities inside it (a query away from the border; the plane approximation,
    good while the radius is well inside the square of side 2: a slope below about 3 reaches past
    the border, and its TRF is the whole instance, n - 1 cities, the cap applied here)."""
    rows = []
    for n in n_values:
        for slope in slopes:
            for rescaled in (False, True):
                s = math.sqrt(n / N) if rescaled else 1.0
                radius = receptive_radius(slope, eps, s)
                rows.append({"n": n, "slope": slope, "rescaled": rescaled,
                             "partition_sum": 1 + (n - 1) * math.pi / (2 * (slope * s) ** 2),
                             "trf_radius": radius, "trf_cities": min((n - 1) * math.pi * radius ** 2 / 4, n - 1)})
    return pd.DataFrame(rows)


@torch.no_grad()
def monte_carlo(n_values, slopes, N: int, d: int, scales: dict, radius: float, samples: int = 1024,
                seed: int = 0) -> pd.DataFrame:
    """Mean row entropy (nats), attention mass within `radius` of the query city (instance units) and
    the effective number of attended cities exp(entropy), per (n, slope, configuration).

    scales: {configuration name: (lambda rule n -> float, rescaled: bool)}; a configuration's content
    logits are lambda(n) q.k with q, k ~ N(0, I_d), its bias -m s r with s = sqrt(n / N) if rescaled.
    Slope 0 is the unbiased row (Eq. 6). The same instances and normals serve every configuration."""
    rows = []
    for n in n_values:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + n)
        points = torch.rand(samples, n, 2, generator=generator, dtype=torch.float64) * 2 - 1
        distance = (points - points[:, :1]).norm(dim=-1)  # (samples, n): from the query city 0
        q = torch.randn(samples, d, generator=generator, dtype=torch.float64)
        k = torch.randn(samples, n, d, generator=generator, dtype=torch.float64)
        dots = (k @ q[..., None])[..., 0]  # (samples, n)
        near = distance <= radius
        for name, (rule, rescaled) in scales.items():
            s = math.sqrt(n / N) if rescaled else 1.0
            lam = float(rule(float(n)))
            for slope in slopes:
                logits = lam * dots - slope * s * distance
                p = torch.softmax(logits, dim=-1)
                entropy = softmax_entropy(logits)
                rows.append({"n": n, "slope": slope, "configuration": name, "lambda": lam,
                             "entropy": float(entropy.mean()), "entropy_se": float(entropy.std() / math.sqrt(samples)),
                             "mass_within_radius": float((p * near).sum(-1).mean()),
                             "effective_cities": float(entropy.exp().mean())})
    return pd.DataFrame(rows)


def entropy_growth(measured: pd.DataFrame, N: int) -> pd.DataFrame:
    """Entropy at each n minus its value at N, per (configuration, slope): zero means invariant."""
    at_N = measured[measured.n == N].set_index(["configuration", "slope"]).entropy
    out = measured.copy()
    out["entropy_change"] = out.entropy - at_N.loc[list(zip(out.configuration, out.slope))].to_numpy()
    return out

