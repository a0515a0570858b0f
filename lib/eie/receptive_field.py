"""The receptive-field condition of relative position biases, in two dimensions.

The RPE paper (Qin et al.) shows that a relative bias b extrapolates when the series of exp(b) along
the sequence converges: far keys then carry a vanishing share of every softmax row, and its
theoretical receptive field (TRF) is the smallest window holding 1 - eps of the series' sum.

For cities uniform in [-1, 1]^2 (density (n - 1) / 4 around a query city) under the distance bias
-m s r (s: a coordinate factor, 1 when the coordinates are left alone), a query at the centre of the
square sees on average

    Z(n) = 1 + (n - 1) / 4 * integral over the square of exp(-m s r) dA
         ~ 1 + (n - 1) pi / (2 (m s)^2)      (the plane, while 1/(m s) is well inside the square).

For a fixed n the series over the cities, taken by distance, converges; but its sum grows linearly
with n, because the number of cities within any given distance does: the condition holds along no
sequence of growing instances. The share of the bias's mass within radius R does not depend on n,
so the TRF radius R(eps) is fixed and the cities inside it grow like n: a row spreads over more and
more cities and its entropy grows like ln n. Density-preserving rescaling, s(n) = sqrt(n / N),
keeps the density in the rescaled units at N / 4 on a square that grows: Z(n) and the TRF in cities
then converge (to their plane values) as n grows, and equal their values at N when the TRF at N lies
inside the square (large slopes); for small slopes the TRF at N is cut by the border, and the
rescaled ones still grow, boundedly, toward the plane value. EIE's lambda(n) scales the content
logits q.k only; it is derived for unbiased rows (Eq. 6), so under a bias it controls part of the
logits.

`theory` gives these quantities for a query at the centre (one-dimensional quadratures over the
square); `monte_carlo` measures entropy and mass on random instances with the query city at the
centre too (q and k standard normal as in Eq. 6, content logits lambda(n) q.k plus the bias).
"""

from __future__ import annotations

import math

import pandas as pd
import torch
from scipy.integrate import quad
from scipy.optimize import brentq

from .entropy import softmax_entropy


def receptive_radius(slope: float, eps: float = 0.05, scale: float = 1.0) -> float:
    """TRF radius (in the instance's units) holding 1 - eps of the bias's mass exp(-m s r) over a plane
    of uniform density: the R with (1 + x) exp(-x) = eps, x = m s R."""
    if not 0 < eps < 1:
        raise ValueError(f"eps must be in (0, 1), got {eps}")
    x = brentq(lambda t: (1 + t) * math.exp(-t) - eps, 1e-9, 200.0)
    return x / (slope * scale)


def _square_mass(rate: float, radius: float) -> float:
    """Integral of exp(-rate r) over the part of [-1, 1]^2 within `radius` of its centre (8 octants;
    in an octant at angle t the square ends at r = 1 / cos t)."""
    def octant(t):
        rho = min(radius, 1 / math.cos(t))
        return (1 - (1 + rate * rho) * math.exp(-rate * rho)) / rate ** 2

    corner = [math.acos(1 / radius)] if radius > 1 else None
    return 8 * quad(octant, 0, math.pi / 4, points=corner, limit=200)[0]


def _square_area(radius: float) -> float:
    """Area of the disc of `radius` about the centre of [-1, 1]^2 that lies inside the square."""
    corner = [math.acos(1 / radius)] if radius > 1 else None
    return 4 * quad(lambda t: min(radius, 1 / math.cos(t)) ** 2, 0, math.pi / 4, points=corner, limit=200)[0]


def theory(n_values, slopes, N: int, eps: float = 0.05) -> pd.DataFrame:
    """Per (n, slope > 0, rescaled), for a query city at the centre of [-1, 1]^2: the bias's expected
    partition sum Z (`partition_sum`; `partition_sum_plane`: the plane approximation, which ignores
    the border), the TRF radius holding 1 - eps of the bias's mass over the square (instance units)
    and the expected number of cities inside it. `rescaled`: coordinates times sqrt(n / N)."""
    if any(slope <= 0 for slope in slopes):
        raise ValueError(f"the theory is for distance biases with a slope > 0, got {list(slopes)}")
    rows = []
    for n in n_values:
        for slope in slopes:
            for rescaled in (False, True):
                rate = slope * (math.sqrt(n / N) if rescaled else 1.0)
                total = _square_mass(rate, math.sqrt(2))
                radius = brentq(lambda r, rate=rate, total=total: _square_mass(rate, r) / total - (1 - eps), 1e-12,
                                math.sqrt(2))
                rows.append({"n": n, "slope": slope, "rescaled": rescaled,
                             "partition_sum": 1 + (n - 1) / 4 * total,
                             "partition_sum_plane": 1 + (n - 1) * math.pi / (2 * rate ** 2),
                             "trf_radius": radius, "trf_cities": (n - 1) / 4 * _square_area(radius)})
    return pd.DataFrame(rows)


@torch.no_grad()
def monte_carlo(n_values, slopes, N: int, d: int, scales: dict, radius: float, samples: int = 1024,
                seed: int = 0) -> pd.DataFrame:
    """Mean row entropy (nats), attention mass within `radius` of the query city (instance units) and
    the effective number of attended cities exp(entropy), per (n, slope, configuration).

    scales: {configuration name: (lambda rule n -> float, rescaled: bool)}; a configuration's content
    logits are lambda(n) q.k with q, k ~ N(0, I_d), its bias -m s r with s = sqrt(n / N) if rescaled.
    Slope 0 is the unbiased row (Eq. 6). The query city sits at the centre of the square, the other
    n - 1 are uniform. The same instances and normals serve every configuration."""
    rows = []
    for n in n_values:
        generator = torch.Generator().manual_seed(seed * 1_000_003 + n)
        points = torch.rand(samples, n, 2, generator=generator, dtype=torch.float64) * 2 - 1
        points[:, 0] = 0.0  # the query city, at the centre (as in `theory`)
        distance = points.norm(dim=-1)  # (samples, n): from the query city
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
    out["entropy_change"] = out.entropy - at_N.loc[list(zip(out.configuration, out.slope, strict=True))].to_numpy()
    return out

