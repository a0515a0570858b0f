"""Ready for a GPU without one: every tensor a training step or an evaluation creates is on
its inputs' device, and decoding does not read values back to the host at every step."""

import pytest
import torch
from device_audit import DeviceLeak, HostSyncs, device_clean

from eie import methods
from eie.eie_net import EIEConfig, EIENet
from eie.evaluation import greedy_costs
from eie.problems import heightmap
from eie.problems.cvrp import DONE_CHECK_EVERY
from eie.training import TrainConfig, build_model

PROBLEMS = [("tsp", {}), ("cvrp", {"capacity": 10.0}), ("bpp", {"length": 60, "width": 50})]


@pytest.fixture(params=["kernel", "torch"])
def placement_path(request, monkeypatch):
    """Bin packing's placement candidates by the CPU kernel, then by the torch path (the one a GPU runs)."""
    monkeypatch.setattr(heightmap, "CPU_KERNEL", request.param == "kernel" and heightmap.CPU_KERNEL)
    return request.param


def test_device_clean_fails_loudly_on_a_tensor_made_without_a_device():
    x = torch.ones(3)
    with pytest.raises(DeviceLeak, match="arange"):
        with device_clean():
            x + torch.arange(3)
    with pytest.raises(DeviceLeak):  # the default device alone would let this read garbage silently
        with device_clean():
            x[torch.arange(2)]
    with device_clean():
        y = x + torch.arange(3, device=x.device)
    assert torch.equal(y, torch.tensor([1.0, 2.0, 3.0]))


def _models(problem, options, rule="inv_sqrt_d", n_mode="instance"):
    config = TrainConfig(problem=problem, problem_options=options, rule=rule, n_train=10, n_mode=n_mode)
    torch.manual_seed(0)
    return build_model(config, "cpu"), build_model(config, "cpu").eval()


@pytest.mark.parametrize("problem,options", PROBLEMS)
def test_a_training_step_and_a_chunked_evaluation_create_no_tensor_off_the_inputs_device(problem, options,
                                                                                        placement_path):
    if problem != "bpp" and placement_path == "torch":
        pytest.skip("the placement path matters for bin packing only")
    model, baseline = _models(problem, options)
    method = methods.get("eie").bind(16, N=10, net=EIENet(EIEConfig(d=16, N=10, N_max=40)))
    generator = torch.Generator().manual_seed(0)
    with device_clean():
        instance = model.problem.generate(6, 10, generator, "cpu")
        solution, log_likelihood = model.sample_with_gradients(instance, torch.Generator().manual_seed(1))
        with torch.no_grad():
            base_solution, _ = baseline.rollout(instance)
        advantage = model.problem.cost(instance, solution) - model.problem.cost(instance, base_solution)
        (advantage * log_likelihood).mean().backward()
        costs = greedy_costs(model, instance, method, chunk=4)
    assert costs.shape == (6,) and torch.isfinite(costs).all()
    assert all(p.grad is not None for p in model.decoder.parameters())


@pytest.mark.parametrize("n_mode", ["instance", "unmasked"])
@pytest.mark.parametrize("problem,options", PROBLEMS)
def test_decoding_reads_nothing_back_to_the_host_at_each_step(problem, options, n_mode):
    """TSP and bin packing: no host synchronisation in a whole rollout (greedy or sampled, EIE's scale
    included); CVRP: "all finished?" is read once step n + 1 is reached and then every
    DONE_CHECK_EVERY steps, not at every step."""
    model, _ = _models(problem, options, n_mode=n_mode)
    model.attention = methods.get("eie").bind(16, N=10, net=EIENet(EIEConfig(d=16, N=10, N_max=40))) \
        .attention_for(model.attention)
    n = 30
    instance = model.problem.generate(8, n, torch.Generator().manual_seed(0))
    for decode in ("greedy", "sample"):
        with torch.no_grad(), HostSyncs() as syncs:
            solution, _ = model.rollout(instance, decode, torch.Generator().manual_seed(1))
        steps = solution.shape[1]
        if problem == "cvrp":
            assert steps > n + 1 and syncs.ops == {"_local_scalar_dense": (steps - (n + 1)) // DONE_CHECK_EVERY + 1}
        else:
            assert steps == n and syncs.count == 0, syncs.ops


def test_the_sync_counter_sees_a_read_back():
    with HostSyncs() as syncs:
        x = torch.arange(4)
        float(x.sum()), bool((x > 2).any()), x.nonzero()
    assert syncs.count == 3


def test_dropping_retired_nodes_reads_back_a_bounded_number_of_times(monkeypatch):
    """A long greedy or sampled rollout checks SHRINKS times per n steps whether to shrink its key
    cache (one number read back each time), however long it is."""
    from eie import model as model_module

    monkeypatch.setattr(model_module, "SHRINK_FROM", 8)
    model, _ = _models("tsp", {})
    for n in (32, 128):
        instance = model.problem.generate(4, n, torch.Generator().manual_seed(0))
        for decode in ("greedy", "sample"):
            with torch.no_grad(), HostSyncs() as syncs:
                model.rollout(instance, decode, torch.Generator().manual_seed(1))
            assert syncs.ops == {"_local_scalar_dense": model_module.SHRINKS - 1}, decode
