import pytest
import torch

from eie import scaling
from eie.model import AttentionModel, AttentionScale
from eie.problems import CVRP, make_problem
from eie.problems.base import InfeasibleSolution


def instance(batch=4, n=12, capacity=10, seed=0):
    return CVRP(capacity).generate(batch, n, torch.Generator().manual_seed(seed))


def test_generation():
    inst = instance()
    assert inst["coords"].shape == (4, 13, 2) and inst["demand"].shape == (4, 13)
    assert bool((inst["demand"][:, 0] == 0).all()) and bool((inst["demand"][:, 1:] > 0).all())
    assert float(inst["demand"].max()) <= 0.1  # demand in units of C_v = 10
    assert CVRP(10).size(inst) == 12 and CVRP(10, size_counts_depot=True).size(inst) == 13
    with pytest.raises(ValueError, match="capacity"):
        CVRP(capacity=1)
    assert isinstance(make_problem("cvrp", capacity=15), CVRP)


def test_mask_rules():
    problem = CVRP(capacity=2)
    inst = {"coords": torch.zeros(1, 4, 2), "demand": torch.tensor([[0.0, 0.6, 0.5, 0.3]])}
    state = problem.initial_state(inst)
    assert state.mask().tolist() == [[True, False, False, False]]  # no depot right after the depot
    state = state.update(torch.tensor([1]))  # load 0.6, remaining 0.4
    assert state.mask().tolist() == [[False, True, True, False]]  # 0.5 no longer fits
    state = state.update(torch.tensor([3]))
    state = state.update(torch.tensor([0]))
    assert state.mask().tolist() == [[True, True, False, True]]
    state = state.update(torch.tensor([2]))
    assert not state.done and state.mask().tolist() == [[False, True, True, True]]
    state = state.update(torch.tensor([0]))
    assert state.done


def test_cost_counts_the_returns():
    inst = {"coords": torch.tensor([[[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]]]), "demand": torch.tensor([[0.0, 0.5, 0.5]])}
    two_routes = torch.tensor([[1, 0, 2, 0]])
    assert float(CVRP(2).cost(inst, two_routes)) == pytest.approx(4.0)
    one_route = torch.tensor([[1, 2, 0, 0]])
    assert float(CVRP(2).cost(inst, one_route)) == pytest.approx(2 + 2**0.5)


def test_check_catches_double_service_missing_service_and_overload():
    inst = {"coords": torch.zeros(1, 4, 2), "demand": torch.tensor([[0.0, 0.6, 0.5, 0.3]])}
    problem = CVRP(2)
    problem.check(inst, torch.tensor([[1, 3, 0, 2, 0]]))
    for bad in ([[1, 1, 0, 2, 3]], [[1, 3, 0, 0, 0]], [[1, 2, 0, 3, 0]]):
        with pytest.raises(InfeasibleSolution):
            problem.check(inst, torch.tensor(bad))


def test_model_decodes_feasible_solutions_and_is_equivariant():
    torch.manual_seed(0)
    problem = CVRP(10)
    model = AttentionModel(problem, AttentionScale(scaling.ln_d(16))).eval()
    inst = instance(n=25)
    with torch.no_grad():
        greedy, _ = model.rollout(inst)
        sampled, _ = model.rollout(inst, "sample", generator=torch.Generator().manual_seed(2))
    problem.check(inst, greedy)
    problem.check(inst, sampled)
    perm = torch.cat([torch.zeros(1, dtype=torch.long), 1 + torch.randperm(25, generator=torch.Generator().manual_seed(3))])
    permuted = {k: v[:, perm] for k, v in inst.items()}
    with torch.no_grad():
        assert torch.allclose(model.encode(inst)[:, perm], model.encode(permuted), atol=1e-5)
        a, b = model.first_step_log_probs(inst)[:, perm], model.first_step_log_probs(permuted)
    assert torch.equal(torch.isinf(a), torch.isinf(b))
    assert torch.allclose(a[~torch.isinf(a)], b[~torch.isinf(b)], atol=1e-5)


def test_hgs_reference_is_feasible_and_beats_an_untrained_model():
    from eie.evaluation import hgs_cvrp_costs

    problem = CVRP(10)
    inst = instance(batch=2, n=15)
    reference = hgs_cvrp_costs(inst, problem.capacity, time_limit=0.2)
    torch.manual_seed(0)
    model = AttentionModel(problem, AttentionScale(scaling.inv_sqrt_d(16))).eval()
    with torch.no_grad():
        greedy = problem.cost(inst, model.rollout(inst)[0])
    assert (reference <= greedy.numpy() + 1e-6).all()
    # Total demand below one vehicle's capacity: one route; HGS's tour is then at least the TSP lower
    # bound of going out to the farthest destination and back.
    far = 2 * inst["coords"][:, 1:].sub(inst["coords"][:, :1]).norm(dim=-1).max(1).values
    assert (reference >= far.numpy() - 1e-5).all()
