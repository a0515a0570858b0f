
import pytest
import torch

from eie import methods, scaling
from eie.attention import Attention
from eie.eie_net import EIEConfig, EIENet
from eie.model import AttentionModel
from eie.problems import TSP, make_problem
from eie.problems.base import InfeasibleSolution


def small_model(rule, **scale_options):
    torch.manual_seed(0)
    return AttentionModel(TSP(), Attention(rule, **scale_options)).eval()


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
    model = small_model(methods.get(key).rule(16, N=10, net=net), n_mode=n_mode)
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


def naive_greedy_rollout(model, inst):
    """Greedy decoding written out from the model's description, one instance and one head at a time,
    with an explicit masked softmax: the reference the fast decoder must match."""
    decoder, (heads, dim) = model.decoder, (model.config.heads, model.config.dim)
    d = dim // heads
    tours, log_likelihoods = [], []
    nodes_all = model.encode(inst)
    for b in range(nodes_all.shape[0]):
        nodes = nodes_all[b]  # (n, D)
        n = nodes.shape[0]
        w = decoder.project_nodes.weight  # (3D, D): glimpse keys, glimpse values, logit keys
        keys, values, logit_keys = nodes @ w[:dim].T, nodes @ w[dim:2 * dim].T, nodes @ w[2 * dim:].T
        graph = decoder.project_graph(nodes.mean(0))
        state = model.problem.initial_state({k: v[b:b + 1] for k, v in inst.items()})
        total = 0.0
        while not state.done:
            visited = state.mask()[0]
            query = graph + decoder.step_context(state, nodes[None])[0]
            lam = float(model.attention.rule(float(n) if model.attention.n_mode == "instance" else float((~visited).sum())))
            glimpse = []
            for h in range(heads):
                part = slice(h * d, (h + 1) * d)
                scores = lam * keys[:, part] @ query[part]
                weights = torch.softmax(scores.masked_fill(visited, float("-inf")), 0)
                glimpse.append(weights @ values[:, part])
            out = decoder.project_out(torch.cat(glimpse))
            logits = model.config.tanh_clip * torch.tanh(logit_keys @ out / dim ** 0.5)
            log_p = torch.log_softmax(logits.masked_fill(visited, float("-inf")), 0)
            action = int(log_p.argmax())
            total += float(log_p[action])
            state = state.update(torch.tensor([action]))
        tours.append(state.solution()[0])
        log_likelihoods.append(total)
    return torch.stack(tours), torch.tensor(log_likelihoods)


@pytest.mark.parametrize("n_mode", ["instance", "unmasked"])
def test_fast_decoder_matches_a_naive_one(n_mode):
    model = small_model(scaling.ln_d(16), n_mode=n_mode)
    inst = instance(batch=3, n=14)
    with torch.no_grad():
        fast, ll_fast = model.rollout(inst)
        naive, ll_naive = naive_greedy_rollout(model, inst)
        slow, ll_slow = model.rollout(inst, recompute_each_step=True)
    assert torch.equal(fast, naive) and torch.allclose(ll_fast, ll_naive, atol=1e-4)
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
        Attention(scaling.ln_d(16), sites=("pointer",))
    with pytest.raises(ValueError, match="head size d=32"):
        AttentionModel(TSP(), Attention(scaling.ln_d(32)))
