import math

import numpy as np
import pytest
import torch

from eie import entropy


def test_softmax_entropy_extremes():
    assert float(entropy.softmax_entropy(torch.zeros(7))) == pytest.approx(math.log(7))
    assert float(entropy.softmax_entropy(torch.tensor([50.0, 0.0, 0.0]))) < 1e-18
    masked = entropy.softmax_entropy(torch.zeros(5), mask=torch.tensor([True, True, False, False, False]))
    assert float(masked) == pytest.approx(math.log(2))


def brute_force_eq6(n, lam, d, samples, seed):
    """Eq. 6 literally: q, k_j ~ N(0, I_d), entropy of softmax(lam q.k_j)."""
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(samples, 1, d, generator=g, dtype=torch.float64)
    k = torch.randn(samples, n, d, generator=g, dtype=torch.float64)
    h = entropy.softmax_entropy(lam * (q * k).sum(-1))
    return float(h.mean()), float(h.std() / math.sqrt(samples))


@pytest.mark.parametrize("n,lam", [(10, 0.25), (100, 0.25), (300, 0.6)])
def test_eq6_matches_brute_force(n, lam):
    mean, se = entropy.entropy_eq6(n, lam, 16, samples=4096, seed=3).item()
    ref, ref_se = brute_force_eq6(n, lam, 16, 20000, seed=4)
    assert abs(mean - ref) < 4 * math.hypot(se, ref_se)


@pytest.mark.parametrize("control_variates", [False, True])
def test_standard_error_is_honest(control_variates):
    estimates = [entropy.entropy_eq6(400, 0.6, 16, samples=256, seed=s, control_variates=control_variates)
                 for s in range(30)]
    spread = np.std([float(e.mean) for e in estimates], ddof=1)
    reported = np.mean([float(e.se) for e in estimates])
    assert 0.6 < reported / spread < 1.8


def test_control_variates_cut_the_error_at_large_scale():
    plain = entropy.entropy_eq6(1600, 0.7, 16, samples=2048, seed=1)
    cv = entropy.entropy_eq6(1600, 0.7, 16, samples=2048, seed=1, control_variates=True)
    assert float(cv.se) < 0.5 * float(plain.se)
    assert abs(float(cv.mean) - float(plain.mean)) < 3 * float(plain.se)


def test_batch_of_lengths_and_scales():
    n = torch.tensor([50, 200, 800])
    lam = torch.tensor([0.25, 0.4, 0.6])
    est = entropy.entropy_eq6(n, lam, 16, samples=512, seed=0)
    assert est.mean.shape == (3,) and est.se.shape == (3,)
    for i in range(3):
        single = entropy.entropy_eq6(int(n[i]), float(lam[i]), 16, samples=2048, seed=9)
        assert abs(float(est.mean[i]) - float(single.mean)) < 4 * math.hypot(float(est.se[i]), float(single.se))


def test_entropy_decreases_with_scale_for_fixed_normals():
    lams = torch.linspace(0.05, 1.5, 12)
    h = entropy.entropy_eq6(torch.full((12,), 300), lams, 16, samples=128, seed=2).mean
    assert bool((h[1:] < h[:-1]).all())


def test_gradient_matches_finite_difference():
    lam = torch.tensor(0.45, dtype=torch.float64, requires_grad=True)
    h = entropy.entropy_eq6(500, lam, 16, samples=256, seed=5, dtype=torch.float64).mean
    (grad,) = torch.autograd.grad(h, lam)
    eps = 1e-5
    up = float(entropy.entropy_eq6(500, 0.45 + eps, 16, samples=256, seed=5, dtype=torch.float64).mean)
    down = float(entropy.entropy_eq6(500, 0.45 - eps, 16, samples=256, seed=5, dtype=torch.float64).mean)
    assert float(grad) == pytest.approx((up - down) / (2 * eps), rel=1e-4)
    assert float(grad) < 0


def test_expected_order_statistics():
    means = entropy.expected_top_order_statistics(50, 3)
    g = torch.Generator().manual_seed(0)
    top = torch.topk(torch.randn(20000, 50, generator=g, dtype=torch.float64), 3, dim=1).values.mean(0)
    assert np.allclose(means, top.numpy(), atol=0.02)
    assert entropy.expected_top_order_statistics(1, 3) == pytest.approx((0.0,), abs=1e-9)


def test_eq21_close_to_eq6():
    e6 = entropy.entropy_eq6(200, 0.25, 16, samples=2048, seed=0, control_variates=True)
    e21 = entropy.entropy_eq21(200, 0.25, 16, samples=24, seed=0)
    assert abs(float(e21.mean) - float(e6.mean)) < 0.05


def test_gaussian_limit_where_it_holds():
    g = entropy.entropy_given_scale(20000, 0.5, samples=64, seed=0)
    assert float(g.mean) == pytest.approx(math.log(20000) - 0.125, abs=0.01)
    assert entropy.entropy_gaussian_limit(100, 0.25, 16) == pytest.approx(math.log(100) - 0.5)


@pytest.mark.parametrize("kwargs,match", [
    (dict(n=0, lam=0.25, d=16), "n must be >= 1"),
    (dict(n=10, lam=0.0, d=16), "lambda must be > 0"),
    (dict(n=10, lam=-1.0, d=16), "lambda must be > 0"),
    (dict(n=10, lam=float("nan"), d=16), "lambda must be > 0"),
    (dict(n=10, lam=0.25, d=0), "head size d"),
    (dict(n=10, lam=0.25, d=16, samples=1), "samples must be"),
])
def test_bad_input_is_refused_with_a_clear_message(kwargs, match):
    with pytest.raises(ValueError, match=match):
        entropy.entropy_eq6(**kwargs)
