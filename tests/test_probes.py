import math

import numpy as np
import pytest
import torch

from eie import methods, probes, scaling
from eie.attention import Attention
from eie.checkpoints import export_policy
from eie.entropy import entropy_given_scale
from eie.model import AttentionModel
from eie.problems import BPP, CVRP
from eie.problems.tsp import TSP
from eie.training import TrainConfig, load_trained, train


def small_model(rule=None):
    torch.manual_seed(0)
    return AttentionModel(TSP(), Attention(rule or scaling.inv_sqrt_d(16))).eval()


def tsp_instance(batch=3, n=12, seed=0):
    return TSP().generate(batch, n, torch.Generator().manual_seed(seed))


def test_probe_records_each_layer_and_chains_to_the_encoder_output():
    model, inst = small_model(), tsp_instance(n=12)
    probe = probes.probe_encoder(model, inst)
    assert len(probe.inputs) == len(probe.entropies) == len(probe.logit_spread) == 3
    assert probe.inputs[0].shape == (3, 12, 128)
    assert probe.entropies[0].shape == probe.logit_spread[0].shape == (3, 8, 12)
    assert bool((probe.entropies[1] >= 0).all()) and bool((probe.entropies[1] <= math.log(12) + 1e-5).all())
    with torch.no_grad():
        ctx = [model.encoder_context(inst, i, 3, "cpu") for i in range(3)]
        assert torch.allclose(model.encoder[0](probe.inputs[0], model.attention, ctx[0]), probe.inputs[1], atol=1e-5)
        assert torch.allclose(model.encoder[2](probe.inputs[2], model.attention, ctx[2]), model.encode(inst), atol=1e-5)


def test_probe_uses_the_injected_rule_and_restores_the_model():
    model, inst = small_model(), tsp_instance(n=40)
    own = probes.probe_encoder(model, inst)
    sharper = probes.probe_encoder(model, inst, methods.get("ln_sqrt_d").bind(16))  # ln 40 / 4 > 1/4: lower entropy
    assert float(sharper.entropies[0].mean()) < float(own.entropies[0].mean())
    assert torch.allclose(sharper.logit_spread[0], own.logit_spread[0] * math.log(40), atol=1e-4)
    assert model.attention.rule.key == "inv_sqrt_d"


def test_js_divergence_separates_normal_from_other_distributions():
    rng = np.random.default_rng(0)
    normal = rng.standard_normal((20000, 3))
    others = np.column_stack([rng.uniform(-2, 2, 20000), 2 * rng.standard_normal(20000), rng.standard_normal(20000) + 1])
    divergence, floor = probes.js_divergence_to_normal(np.hstack([normal, others]))
    assert divergence.shape == (6,)
    assert 0 < floor < 0.01
    assert bool((divergence[:3] < 3 * floor).all())
    assert bool((divergence[3:] > 10 * floor).all())
    assert bool((divergence <= math.log(2)).all())
    with pytest.raises(ValueError, match="samples must be"):
        probes.js_divergence_to_normal(np.zeros(5))


def test_gaussian_row_entropy_limits_and_agreement():
    assert probes.gaussian_row_entropy(50, torch.zeros(10)) == pytest.approx(math.log(50))
    spread = torch.full((4000,), 1.5)
    estimate = probes.gaussian_row_entropy(50, spread, seed=1)
    mean, se = entropy_given_scale(50, 1.5, samples=4000, seed=2).item()
    assert abs(estimate - mean) < 5 * se + 1e-3


def test_permutation_check_on_a_model_and_on_a_cvrp_instance():
    model, inst = small_model(), tsp_instance(n=15)
    result = probes.permutation_check(model, inst, seed=3)
    assert set(result) == {"encoder", "first_step_log_p", "greedy_cost"}
    assert max(result.values()) < 1e-4


@pytest.mark.parametrize("problem", [CVRP(10), BPP(60, 50)], ids=["cvrp", "bpp"])
def test_permutation_check_permutes_the_nodes_of_every_problem(problem):
    """The check must move the nodes (a CVRP instance's destinations, not its depot) and still find
    the model equivariant; a model that is not (node order leaking in) must fail it."""
    torch.manual_seed(0)
    model = AttentionModel(problem, Attention(scaling.inv_sqrt_d(16))).eval()
    instance = problem.generate(2, 9, torch.Generator().manual_seed(1))
    permuted, order = problem.permute(instance, torch.Generator().manual_seed(3))
    key = next(iter(instance))
    assert not torch.equal(permuted[key], instance[key]) and torch.equal(permuted[key], instance[key][:, order])
    if problem.name == "cvrp":
        assert order[0] == 0 and sorted(order.tolist()) == list(range(10))  # the depot stays node 0
    assert max(probes.permutation_check(model, instance, seed=3).values()) < 1e-4
    embed = model.embed.forward
    model.embed.forward = lambda inst: embed(inst) + torch.linspace(0, 1, embed(inst).shape[1])[None, :, None]
    assert probes.permutation_check(model, instance, seed=3)["encoder"] > 1e-3  # order-dependent: caught


def test_exported_policy_loads_like_its_checkpoint(tmp_path):
    config = TrainConfig(problem="tsp", n_train=8, epochs=1, steps_per_epoch=1, batch_size=8, baseline_eval_size=16)
    result = train(config, tmp_path, name="run", progress=False, device="cpu")
    exported = export_policy(result.checkpoint, tmp_path / "models" / "run.pt")
    assert exported.stat().st_size < result.checkpoint.stat().st_size
    loaded = load_trained(exported)
    for (name, p), q in zip(result.model.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    (tmp_path / "junk.pt").write_bytes(b"junk")
    with pytest.raises(ValueError, match="cannot be read"):
        export_policy(tmp_path / "junk.pt", tmp_path / "out.pt")
    with pytest.raises(FileNotFoundError, match="train the model first"):
        export_policy(tmp_path / "missing.pt", tmp_path / "out.pt")
