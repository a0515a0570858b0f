"""Expected attention entropy H(n, lambda): Monte-Carlo estimators of Eq. 6 and Eq. 21.

Eq. 6 (the EIE paper) is the expected entropy of one row of softmax(lambda q k_j^T), j = 1..n, with
q, k_j ~ N(0, I_d) independent. Given q, the logits lambda q.k_j are i.i.d. N(0, sigma^2) with
sigma = lambda |q|, so

    H(n, lambda) = E_{s ~ chi2_d} [ g(n, lambda sqrt(s)) ],
    g(n, sigma)  = E_{z_1..z_n ~ N(0,1)} [ entropy of softmax(sigma z) ],

and one sample costs O(n), not O(n d). The outer expectation over s = |q|^2 carries most of the
variance at the usual scales; it is integrated by stratified sampling on the chi2_d quantiles (one
sample per equal-probability stratum), a quadrature in probability space that stays unbiased. The
inner expectation is plain Monte Carlo on shared normals (common random numbers): one draw of z is
reused for every lambda and, as prefixes, for every n, so that curves over n and lambda are smooth
and differences between two rules are estimated with little noise.

At large sigma (lambda near 0.7 for d = 16) the entropy of a row is driven by its few largest
logits. `control_variates=True` regresses the row entropies on the top order statistics of z, whose
expectations are computed exactly, which cuts the standard error about four-fold there.

Eq. 21 (appendix A.3) drops the independence of q and k: X ~ N(0, I) of shape n x (h d) goes
through W_Q, W_K with entries N(0, 1/(h d)), and the row entropies of softmax(lambda X W_Q W_K^T X^T)
are averaged. It costs O(n^2 d) and serves as a check on Eq. 6.

All estimators return an `EntropyEstimate` (mean, standard error); the mean is differentiable in
lambda.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from scipy import special, stats

from .validation import check_d, check_lambda, check_n, check_samples

# Elements (batch x samples x n) processed at once; bounds memory at ~32 MB per intermediate.
_CHUNK_ELEMENTS = 1 << 22


@dataclass(frozen=True)
class EntropyEstimate:
    """A Monte-Carlo estimate: `mean` (differentiable in lambda) and its standard error `se`."""

    mean: torch.Tensor
    se: torch.Tensor

    def item(self) -> tuple[float, float]:
        return float(self.mean), float(self.se)


def softmax_entropy(logits: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    """Entropy (nats) of softmax over the last dimension; `mask` marks the entries that take part."""
    if mask is not None:
        logits = logits.masked_fill(~mask, float("-inf"))
    log_p = torch.log_softmax(logits, dim=-1)
    p = log_p.exp()
    return -(p * torch.where(p > 0, log_p, torch.zeros_like(log_p))).sum(-1)


def chi2_strata(d: int, samples: int, generator: torch.Generator | None = None) -> torch.Tensor:
    """One draw of |q|^2 ~ chi2_d from each of `samples` equal-probability strata, in order."""
    u = (torch.arange(samples, dtype=torch.float64) + torch.rand(samples, dtype=torch.float64, generator=generator)) / samples
    return torch.as_tensor(stats.chi2.ppf(u.numpy(), d), dtype=torch.float64)


# Peak bytes per element (pair x sample x node) of `_row_entropies` while autograd keeps every chunk's
# intermediates (the shifted logits, their exp, the products): measured 22-24 bytes in float32 for
# the EIE fit and lambda* (`benchmarks/bench_memory_estimates.py`), so six values of the dtype.
VALUES_PER_ELEMENT = 6


def eq6_bytes(pairs: int, samples: int, n_max: int, grad: bool = True, dtype: torch.dtype = torch.float32) -> int:
    """Estimated peak memory of `entropy_eq6` over `pairs` (n, lambda) pairs with `samples` rows up to
    n_max nodes: the shared normals and their running maxima, plus the chunks' intermediates (all of
    them kept when a gradient is wanted, one chunk's worth otherwise)."""
    itemsize = torch.empty((), dtype=dtype).element_size()
    rows = pairs if grad else min(pairs, max(1, _CHUNK_ELEMENTS // (samples * n_max)))
    return int(itemsize * samples * n_max * (2 + VALUES_PER_ELEMENT * rows))


def _row_entropies(n: torch.Tensor, sigma: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
    """Entropy of softmax(sigma[b, m] * z[m, :n[b]]) for every (b, m): shape (B, M).

    One exp per element: H = log S0 - sigma (S1 / S0 - z_max), with S0 = sum exp(sigma (z - z_max))
    and S1 = sum z exp(sigma (z - z_max)) over the first n[b] entries of row m.
    """
    n_max = int(n.max())
    z = z[:, :n_max].to(sigma.dtype)
    if bool((n == n_max).all()):
        prefix_max = z.max(dim=1, keepdim=True).values.expand(-1, n_max)
    else:
        prefix_max = torch.cummax(z, dim=1).values  # (M, n_max)
    out = []
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // (z.shape[0] * n_max))
    for start in range(0, n.shape[0], rows_per_chunk):
        nb = n[start:start + rows_per_chunk]
        sb = sigma[start:start + rows_per_chunk]  # (b, M)
        z_top = prefix_max[:, nb - 1].T  # (b, M)
        mask = torch.arange(n_max) < nb[:, None, None]  # (b, 1, n_max)
        zero = torch.zeros((), dtype=z.dtype)
        # Entries past the prefix are zeroed after the exp (a -inf before it would make NaN gradients).
        shifted = torch.where(mask, z[None] - z_top[..., None], zero)
        weights = torch.where(mask, torch.exp(sb[..., None] * shifted), zero)
        s0 = weights.sum(-1)
        s1 = (weights * z[None]).sum(-1)
        out.append(torch.log(s0) - sb * (s1 / s0 - z_top))
    return torch.cat(out, dim=0)


@lru_cache(maxsize=4096)
def expected_top_order_statistics(n: int, k: int) -> tuple[float, ...]:
    """E[z_(1)], ..., E[z_(k)]: the expected k largest of n i.i.d. N(0, 1), by quadrature on a fine grid."""
    x = np.linspace(-9.0, 9.0, 36001)
    log_phi = stats.norm.logpdf(x)
    log_cdf = special.log_ndtr(x)
    log_sf = special.log_ndtr(-x)
    means = []
    for r in range(1, min(k, n) + 1):
        log_coef = special.gammaln(n + 1) - special.gammaln(r) - special.gammaln(n - r + 1)
        density = np.exp(log_coef + log_phi + (n - r) * log_cdf + (r - 1) * log_sf)
        means.append(float(np.trapezoid(x * density, x)))
    return tuple(means)


def _stratified_se(h: torch.Tensor) -> torch.Tensor:
    """Standard error of the mean over the last axis of stratified samples (adjacent strata paired).

    E[(h_a - h_b)^2] = v_a + v_b + (mu_a - mu_b)^2, so the sum over pairs bounds the sum of the
    within-stratum variances from above: the standard error is conservative.
    """
    m = h.shape[-1] - h.shape[-1] % 2
    diff = h[..., 0:m:2] - h[..., 1:m:2]
    return torch.sqrt((diff**2).sum(-1)) / m


def _control_variate_adjust(h: torch.Tensor, sigma: torch.Tensor, n: torch.Tensor, z: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Regress row entropies on centred top-k order statistics (and their products with sigma).

    Returns (adjusted mean, standard error), per batch entry. sigma-polynomials enter the
    regression too, centred on their sample means: they do not move the estimate (their sample
    mean is zero by construction) but absorb the between-strata variation, so that the residuals,
    and hence the standard error, reflect only the within-stratum noise.
    """
    means, ses = [], []
    samples = h.shape[1]
    for b in range(h.shape[0]):
        nb = int(n[b])
        kb = min(k, nb)
        top = torch.topk(z[:, :nb], kb, dim=1).values.to(torch.float64)  # (M, kb)
        centred = top - torch.tensor(expected_top_order_statistics(nb, kb), dtype=torch.float64)
        s = sigma[b].detach().to(torch.float64)[:, None]
        strata = torch.cat([s, s**2, s**3], dim=1)
        strata = strata - strata.mean(0)
        features = torch.cat([centred, centred * s, strata], dim=1)
        design = torch.cat([torch.ones(samples, 1, dtype=torch.float64), features], dim=1)
        target = h[b].detach().to(torch.float64)
        beta = torch.linalg.lstsq(design, target[:, None]).solution[:, 0]
        residual = target - design @ beta
        dof = max(samples - design.shape[1], 1)
        adjustment = (features.mean(0) @ beta[1:]).to(h.dtype)
        means.append(h[b].mean() - adjustment)
        ses.append(torch.sqrt((residual**2).sum() / dof / samples))
    return torch.stack(means), torch.stack(ses).to(h.dtype)


def entropy_eq6(
    n,
    lam,
    d: int,
    samples: int = 1024,
    generator: torch.Generator | None = None,
    seed: int | None = 0,
    control_variates: bool = False,
    top_k: int = 8,
    dtype: torch.dtype = torch.float32,
) -> EntropyEstimate:
    """Expected entropy H(n, lambda) of Eq. 6 for one or many (n, lambda) pairs.

    n: int or 1-D integer tensor; lam: float or tensor broadcastable to n (may require grad).
    samples: rows per pair, one per chi2_d stratum. dtype: float32 by default (sums of a few thousand
    terms lose ~1e-6, far below the Monte-Carlo error); float64 for reference values. The normals are shared by all pairs (common
    random numbers); give `generator` to draw them from a running stream, else they come from
    `seed`. control_variates: regress on the top-`top_k` order statistics (needs samples >= 64).
    """
    d = check_d(d)
    samples = check_samples(samples)
    n_t = torch.as_tensor(n).reshape(-1).to(torch.long)
    lam_t = torch.as_tensor(lam, dtype=dtype) if not torch.is_tensor(lam) else lam.to(dtype)
    scalar = torch.as_tensor(n).dim() == 0 and lam_t.dim() == 0
    n_t, lam_t = torch.broadcast_tensors(n_t, lam_t.reshape(-1))
    check_n(n_t)
    check_lambda(lam_t)
    if generator is None:
        generator = torch.Generator().manual_seed(0 if seed is None else seed)
    q_norm2 = chi2_strata(d, samples, generator).to(dtype)
    z = torch.randn(samples, int(n_t.max()), generator=generator, dtype=dtype)
    sigma = lam_t[:, None] * torch.sqrt(q_norm2)[None, :]  # (B, M)
    h = _row_entropies(n_t, sigma, z)
    if control_variates and samples >= 64:
        mean, se = _control_variate_adjust(h, sigma, n_t, z, top_k)
    else:
        mean, se = h.mean(-1), _stratified_se(h.detach())
    if scalar:
        mean, se = mean[0], se[0]
    return EntropyEstimate(mean, se.detach())


def entropy_given_scale(n: int, sigma: float, samples: int = 1024, seed: int = 0) -> EntropyEstimate:
    """g(n, sigma): expected entropy of softmax over n i.i.d. N(0, sigma^2) logits (|q| fixed)."""
    n_t = torch.as_tensor([check_n(n)])
    generator = torch.Generator().manual_seed(seed)
    z = torch.randn(check_samples(samples), int(n), generator=generator, dtype=torch.float64)
    h = _row_entropies(n_t, torch.full((1, samples), float(sigma), dtype=torch.float64), z)[0]
    return EntropyEstimate(h.mean(), h.std() / math.sqrt(samples))


def entropy_gaussian_limit(n, lam, d: int):
    """The large-n limit H ~ ln n - lambda^2 |q|^2 / 2, averaged over |q|^2 ~ chi2_d: ln n - lambda^2 d / 2.

    It holds when the softmax normaliser concentrates, i.e. exp(lambda^2 |q|^2) << n.
    """
    check_n(n)
    check_lambda(lam)
    d = check_d(d)
    return np.log(n) - np.asarray(lam) ** 2 * d / 2.0


def entropy_eq21(
    n: int,
    lam: float,
    d: int,
    heads: int = 8,
    samples: int = 32,
    rows: int | None = 64,
    seed: int = 0,
) -> EntropyEstimate:
    """Expected row entropy of Eq. 21: q and k from one X ~ N(0, I_{n x hd}) via W_Q, W_K ~ N(0, 1/(hd)).

    rows: number of query rows used per sample (all n when None); the standard error is taken over
    the `samples` independent draws of (X, W_Q, W_K), so correlation between rows is accounted for.
    """
    n, d = check_n(n), check_d(d)
    check_lambda(torch.as_tensor(lam))
    samples = check_samples(samples)
    width = heads * d
    generator = torch.Generator().manual_seed(seed)
    per_sample = []
    for _ in range(samples):
        x = torch.randn(n, width, generator=generator, dtype=torch.float64)
        w_q = torch.randn(width, d, generator=generator, dtype=torch.float64) / math.sqrt(width)
        w_k = torch.randn(width, d, generator=generator, dtype=torch.float64) / math.sqrt(width)
        keys = x @ w_k
        queries = x[: (n if rows is None else min(rows, n))] @ w_q
        per_sample.append(softmax_entropy(lam * queries @ keys.T).mean())
    h = torch.stack(per_sample)
    return EntropyEstimate(h.mean(), h.std() / math.sqrt(samples))
