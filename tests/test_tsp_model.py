
import pytest
import torch

from eie import scaling
from eie.eie_net import EIEConfig, EIENet
from eie.model import AttentionModel, AttentionScale
from eie.problems import TSP, make_problem
from eie.problems.base import InfeasibleSolution


def small_model(rule, **scale_options):
    torch.manual_seed(0)
    return AttentionModel(TSP(), AttentionScale(rule, **scale_options)).eval()


def instance(batch=3, n=12, seed=0):
    return TSP().generate(batch, n, torch.Generator().manual_seed(seed))


def test_generation_is_seeded_and_in_the_square():
    a, b = instance(seed=5), instance(seed=5)
    assert torch.equal(a["coords"], b["coords"])
    assert a["coords"].min() >= -1 and a["coords"].max() <= 1
    with pytest.raises(ValueError, match="n >= 2"):
        TSP().generate(2, 1)


def test_cost_of_a_square_tour():
    square = {"coords": torch.tensor([[[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]])}
    assert float(TSP().cost(square, torch.tensor([[0, 1, 2, 3]]))) == pytest.approx(4.0)
    assert float(TSP().cost(square, torch.tensor([[0, 2, 1, 3]]))) == pytest.approx(2 + 2 * 2**0.5)


def test_check_rejects_non_permutations():
    inst = instance(batch=2, n=4)
    TSP().check(inst, torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]]))
    with pytest.raises(InfeasibleSolution, match="instances \\[1\\]"):
        TSP().check(inst, torch.tensor([[0, 1, 2, 3], [3, 3, 1, 0]]))
    with pytest.raises(InfeasibleSolution, match="shape"):
        TSP().check(inst, torch.tensor([[0, 1, 2]]))


def test_unknown_problem():
    with pytest.raises(ValueError, match="unknown problem"):
        make_problem("knapsack")


@pytest.mark.parametrize("key", ["inv_sqrt_d", "ln_d", "ln_sqrt_d", "log_N", "ssmax", "eie"])
@pytest.mark.parametrize("n_mode", ["instance", "unmasked"])
def test_permutation_equivariance(key, n_mode):
    """Theorem 1: permuting the cities permutes the encoder output and the first-step probabilities."""
    net = EIENet(EIEConfig(d=16, N=10, N_max=40))
    model = small_model(scaling.make_rule(key, 16, N=10, net=net), n_mode=n_mode)
    inst = instance(n=15)
    perm = torch.randperm(15, generator=torch.Generator().manual_seed(1))
    permuted = {"coords": inst["coords"][:, perm]}
    with torch.no_grad():
        assert torch.allclose(model.encode(inst)[:, perm], model.encode(permuted), atol=1e-5)
        assert torch.allclose(model.first_step_log_probs(inst)[:, perm], model.first_step_log_probs(permuted), atol=1e-5)


def test_greedy_tours_are_permutations_and_sampling_is_seeded():
    model = small_model(scaling.inv_sqrt_d(16))
    inst = instance(batch=4, n=10)
    with torch.no_grad():
        tour, ll = model.rollout(inst)
        TSP().check(inst, tour)
        s1, _ = model.rollout(inst, "sample", generator=torch.Generator().manual_seed(3))
        s2, _ = model.rollout(inst, "sample", generator=torch.Generator().manual_seed(3))
    assert torch.equal(s1, s2)
    assert bool((ll <= 0).all())
    with pytest.raises(ValueError, match="decode must be"):
        model.rollout(inst, "beam")


def test_precomputed_decoder_matches_recomputation():
    model = small_model(scaling.ln_d(16), n_mode="unmasked")
    inst = instance(batch=3, n=14)
    with torch.no_grad():
        fast, ll_fast = model.rollout(inst)
        slow, ll_slow = model.rollout(inst, recompute_each_step=True)
    assert torch.equal(fast, slow) and torch.allclose(ll_fast, ll_slow)


def test_scale_is_injected_where_asked():
    inst = instance(n=30)
    base = small_model(scaling.inv_sqrt_d(16))
    glimpse_only = small_model(scaling.ln_d(16), sites=("glimpse",))
    both = small_model(scaling.ln_d(16))
    with torch.no_grad():
        assert torch.allclose(base.encode(inst), glimpse_only.encode(inst))
        assert not torch.allclose(base.encode(inst), both.encode(inst))
        assert not torch.allclose(base.first_step_log_probs(inst), glimpse_only.first_step_log_probs(inst))
    with pytest.raises(ValueError, match="unknown attention sites"):
        AttentionScale(scaling.ln_d(16), sites=("pointer",))
    with pytest.raises(ValueError, match="head size d=32"):
        AttentionModel(TSP(), AttentionScale(scaling.ln_d(32)))
