"""The rivals the related papers propose: distance bias and axial RoPE through the attention seam, coordinate
rescaling, the Pointer Network, the receptive-field theory and the TSPLIB reader and metric."""

import math

import numpy as np
import pandas as pd
import pytest
import torch

from eie import experiments, extrapolation, methods, receptive_field, rivals, run_checks, scaling, study, tsplib
from eie.attention import Attention, AttentionContext
from eie.evaluation import fixed_test_set, greedy_costs
from eie.evaluation_store import EvaluationStore
from eie.experiments import configure as check_parameters
from eie.position_attention import AxialRoPE, DistanceBias, alibi_slopes, rope_frequencies
from eie.problems import TSP
from eie.training import TrainConfig, build_model


def _context(positions):
    return AttentionContext("encoder", 0, torch.full((positions.shape[0],), float(positions.shape[1])), positions)


def test_distance_bias_adds_minus_slope_times_distance_per_head():
    generator = torch.Generator().manual_seed(0)
    q, k = torch.randn(2, 8, 5, 16, generator=generator), torch.randn(2, 8, 5, 16, generator=generator)
    positions = torch.rand(2, 5, 2, generator=generator) * 2 - 1
    ctx = _context(positions)
    biased = DistanceBias(scaling.inv_sqrt_d(16)).logits(q, k, ctx)
    plain = Attention(scaling.inv_sqrt_d(16)).logits(q, k, ctx)
    distance = torch.cdist(positions, positions)
    expected = plain - alibi_slopes(8).view(1, 8, 1, 1) * distance[:, None]
    torch.testing.assert_close(biased, expected)
    # PENS's unit-square slope 10 / sqrt(2)^h halved for [-1, 1]^2: the same layout, the same bias
    assert alibi_slopes(8)[0] == pytest.approx(5.0) and alibi_slopes(8)[2] == pytest.approx(2.5)
    # the glimpse has no position of its own: no bias there
    glimpse = AttentionContext("glimpse", 0, ctx.n, positions)
    assert DistanceBias(scaling.inv_sqrt_d(16)).bias(glimpse, 1) is None


def test_axial_rope_is_translation_invariant_and_sees_positions():
    generator = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, 8, 6, 16, generator=generator), torch.randn(2, 8, 6, 16, generator=generator)
    positions = torch.rand(2, 6, 2, generator=generator) * 2 - 1
    rope = AxialRoPE(scaling.inv_sqrt_d(16))
    logits = rope.logits(q, k, _context(positions))
    shifted = rope.logits(q, k, _context(positions + torch.tensor([0.3, -0.7])))
    torch.testing.assert_close(logits, shifted, atol=1e-4, rtol=1e-4)
    plain = Attention(scaling.inv_sqrt_d(16)).logits(q, k, _context(positions))
    assert (logits - plain).abs().max() > 0.1  # the positions change the logits
    rotated_q, _ = rope.rotate(q, k, _context(positions))
    torch.testing.assert_close(rotated_q.norm(dim=-1), q.norm(dim=-1))  # a rotation keeps lengths
    assert rope_frequencies(16)[0] == pytest.approx(7.0)  # 14 in the unit square, halved
    with pytest.raises(ValueError, match="multiple of 4"):
        rope_frequencies(6)


def test_rescaling_shows_the_model_stretched_coordinates_and_costs_the_originals():
    torch.manual_seed(0)
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=8)).eval()
    instance = TSP().generate(4, 32, torch.Generator().manual_seed(2))
    bound = methods.get("rescale").bind(16, N=8)
    seen = bound.seen_by_model(instance, model.problem)
    torch.testing.assert_close(seen["coords"], instance["coords"] * 2.0)  # sqrt(32 / 8)
    costs = greedy_costs(model, instance, bound)
    tours, _ = model.rollout(seen, "greedy")
    torch.testing.assert_close(costs, model.problem.cost(instance, tours))
    assert methods.get("rescale").coordinate_scale(8, 8) == 1.0  # equal to the model at N


def test_position_rescaling_stretches_what_the_bias_and_rotation_see_and_nothing_else():
    generator = torch.Generator().manual_seed(3)
    q, k = torch.randn(2, 8, 6, 16, generator=generator), torch.randn(2, 8, 6, 16, generator=generator)
    positions = torch.rand(2, 6, 2, generator=generator) * 2 - 1
    ctx = _context(positions)  # n = 6 for both instances
    for key, trained in (("bias_rescale", DistanceBias(scaling.inv_sqrt_d(16))),
                         ("rope_rescale", AxialRoPE(scaling.inv_sqrt_d(16)))):
        rescaled = methods.get(key).bind(16, N=3).attention_for(trained)
        assert type(rescaled) is type(trained) and trained.position_scale is None
        stretched = _context(positions * math.sqrt(6 / 3))
        torch.testing.assert_close(rescaled.logits(q, k, ctx), trained.logits(q, k, stretched))
        at_N = methods.get(key).bind(16, N=6).attention_for(trained)  # s = 1 at n = N
        torch.testing.assert_close(at_N.logits(q, k, ctx), trained.logits(q, k, ctx))
    # the model embeds the coordinates as they are: only the coordinate methods change what it sees
    instance = TSP().generate(2, 12, torch.Generator().manual_seed(4))
    assert methods.get("bias_rescale").bind(16, N=3).seen_by_model(instance, TSP()) is instance
    with pytest.raises(ValueError, match="needs the training length N"):
        methods.BoundMethod(methods.get("bias_rescale"), scaling.inv_sqrt_d(16)).attention_for(DistanceBias(
            scaling.inv_sqrt_d(16)))


def test_each_rival_trains_evaluates_and_reproduces_its_model_at_N(tmp_path, monkeypatch):
    from eie import paths

    monkeypatch.setattr(study, "results_dir", lambda run="default": tmp_path / run)
    monkeypatch.setattr(paths, "results_dir", lambda run="default": tmp_path / run)
    rules = ["inv_sqrt_d", "dist_bias", "rope", "ptrnet"]
    models, log = study.train_models(rules, [0], run="t", device="cpu", progress=False, problem="tsp", n_train=8,
                                     epochs=1, steps_per_epoch=2, batch_size=8, baseline_eval_size=8)
    assert type(models[("ptrnet", 0)]).__name__ == "PointerNetwork"
    assert isinstance(models[("dist_bias", 0)].attention, DistanceBias)
    net, table = study.ensure_scales(16, 8, 16, run="t")
    keys = rules + ["eie", "rescale", "eie_rescale", "rescale_dist_bias", "eie_dist_bias", "eie_rope", "bias_rescale",
                    "eie_bias_rescale", "rope_rescale"]
    bound = extrapolation.bind_methods(keys, 16, 8, net, table)
    results, _, _ = extrapolation.evaluate(models, bound, 8, 16, test_size=4, reference_size=2, device="cpu", progress=False)
    assert set(results.method) == set(keys) | {"reference"}
    assert "reproduce" in run_checks.check_extrapolation(results, 8)
    # a test-time method keeps the kind of attention of the model it is applied to
    on_bias = methods.get("eie_dist_bias").bind(16, N=8, net=net).attention_for(models[("dist_bias", 0)].attention)
    assert isinstance(on_bias, DistanceBias)


def test_the_pointer_network_depends_on_the_input_order_and_the_attention_model_does_not():
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval(),
              ("ptrnet", 0): build_model(TrainConfig(rule="ptrnet", n_train=10)).eval()}
    spread = rivals.permutation_spread(models, 10, 20, test_size=8, orderings=2)
    assert spread[spread.model == "inv_sqrt_d"].mean_abs_change_pct.max() < 1e-3
    assert spread[spread.model == "ptrnet"].mean_abs_change_pct.min() > 0.1
    assert "below" in run_checks.check_permutation_invariance(spread)
    with pytest.raises(run_checks.RunCheckFailed, match="reordering"):
        run_checks.check_permutation_invariance(spread, model="ptrnet")
    with pytest.raises(ValueError, match="built for the TSP"):
        build_model(TrainConfig(rule="ptrnet", problem="cvrp", n_train=10))


def test_rescaling_sweep_includes_factor_one_as_the_plain_model():
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()}
    sweep = rivals.rescaling_sweep(models, ["inv_sqrt_d"], [1.0, 2.0], 10, 20, 6, progress=False)
    instances = fixed_test_set(TSP(), 20, 6)
    at_one = sweep[(sweep.n == 20) & (sweep.factor == 1.0)].objective.item()
    assert at_one == pytest.approx(float(greedy_costs(models[("inv_sqrt_d", 0)], instances).mean()))
    best = rivals.best_factors(sweep)
    assert set(best.index.get_level_values("n")) == {10, 20}


def test_rescaling_sweep_resumes_from_the_evaluation_store(tmp_path, monkeypatch):
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()}
    store = EvaluationStore(tmp_path)
    first = rivals.rescaling_sweep(models, ["inv_sqrt_d"], [1.0, 2.0], 10, 20, 6, progress=False, store=store)
    assert first.equals(rivals.rescaling_sweep(models, ["inv_sqrt_d"], [1.0, 2.0], 10, 20, 6, progress=False))

    def must_not_run(*args, **kwargs):
        raise AssertionError("a finished piece of the sweep was computed again")

    monkeypatch.setattr(extrapolation, "greedy_costs", must_not_run)
    assert rivals.rescaling_sweep(models, ["inv_sqrt_d"], [1.0, 2.0], 10, 20, 6, progress=False, store=store).equals(first)
    with pytest.raises(AssertionError, match="computed again"):  # a new factor is a new piece
        rivals.rescaling_sweep(models, ["inv_sqrt_d"], [1.5], 10, 20, 6, progress=False, store=store)


def test_receptive_field_theory_and_monte_carlo_agree_on_what_rescaling_keeps():
    eps = 0.05
    x = receptive_field.receptive_radius(2.0, eps) * 2.0
    assert (1 + x) * math.exp(-x) == pytest.approx(eps)
    theory = receptive_field.theory([50, 400], [20.0], 50, eps)
    plain, rescaled = theory[~theory.rescaled], theory[theory.rescaled]
    assert plain.partition_sum.iloc[1] - 1 == pytest.approx(399 / 49 * (plain.partition_sum.iloc[0] - 1))
    assert rescaled.partition_sum.iloc[1] == pytest.approx(rescaled.partition_sum.iloc[0], rel=0.01)
    # a steep bias stays inside the square: the plane's closed forms hold
    assert theory.partition_sum.to_numpy() == pytest.approx(theory.partition_sum_plane.to_numpy(), rel=1e-6)
    assert plain.trf_radius.iloc[0] == pytest.approx(receptive_field.receptive_radius(20.0, eps), rel=1e-6)
    # a shallow one reaches past the border: Z and the TRF stay below the whole instance, and with
    # rescaling they grow with n but stay below the plane's limit, 1 + N pi / (2 m^2)
    shallow = receptive_field.theory([50, 400, 3200], [0.5], 50, eps)
    assert (shallow.partition_sum <= shallow.n).all() and (shallow.trf_cities <= shallow.n - 1).all()
    grown = shallow[shallow.rescaled].partition_sum.to_numpy()
    assert (grown[1:] > grown[:-1]).all() and grown[-1] < 1 + 50 * math.pi / (2 * 0.5 ** 2)
    # Monte Carlo, bias alone (lambda = 0): cities attended grow with n unless rescaled
    zero = scaling.ScalingRule("zero", 16, lambda n: 0.0 * n)
    measured = receptive_field.monte_carlo([50, 400], [20.0], 50, 16, {"plain": (zero, False), "rescaled": (zero, True)},
                                           radius=0.1, samples=256)
    cities = measured.set_index(["configuration", "n"]).effective_cities
    assert cities[("plain", 400)] > 4 * cities[("plain", 50)]
    assert cities[("rescaled", 400)] == pytest.approx(cities[("rescaled", 50)], rel=0.25)
    growth = receptive_field.entropy_growth(measured, 50)
    assert (growth[growth.n == 50].entropy_change == 0).all()


def test_tsplib_reader_and_metric_give_the_published_optimum():
    import elkai

    (berlin,) = tsplib.load_tsplib(["berlin52"])
    assert berlin.n == 52 and berlin.best_known == 7542 and berlin.band == "n <= 200"
    coords = berlin.coords
    distances = np.floor(np.sqrt(((coords[:, None] - coords[None]) ** 2).sum(-1)) + 0.5).astype(int)
    tour = elkai.DistanceMatrix(distances.tolist()).solve_tsp(runs=3)[:-1]
    assert tsplib.euc_2d_length(coords, tour) == 7542  # the optimum, in TSPLIB's rounded metric
    unit = berlin.for_model()["coords"][0].numpy()
    assert unit.min() >= -1 - 1e-6 and unit.max() <= 1 + 1e-6 and np.abs(unit).max() == pytest.approx(1.0)
    spans = coords.max(0) - coords.min(0)
    np.testing.assert_allclose(unit.max(0) - unit.min(0), 2 * spans / spans.max(), rtol=1e-5)  # aspect kept
    assert len(tsplib.load_tsplib()) == 48 and max(i.n for i in tsplib.load_tsplib()) == 2392


def test_tsplib_evaluation_checks_and_scores_every_tour():
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()}
    instances = tsplib.load_tsplib(max_n=52)
    bound = extrapolation.bind_methods(["inv_sqrt_d", "rescale"], 16, 10)
    results = tsplib.evaluate_tsplib(models, bound, instances, progress=False)
    assert len(results) == 2 * len(instances) and (results.gap_pct > 0).all()
    per_instance, by_band = tsplib.tsplib_tables(results)
    assert list(by_band.columns) == ["n <= 200", "all"] and per_instance.shape == (len(instances), 2)


def test_tsplib_tours_kept_in_the_store_are_read_back_and_a_new_model_decodes_only_its_own(tmp_path, monkeypatch):
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()}
    instances = tsplib.load_tsplib(max_n=52)
    bound = extrapolation.bind_methods(["inv_sqrt_d", "log_N"], 16, 10)
    store = EvaluationStore(tmp_path / "evaluation")
    first = tsplib.evaluate_tsplib(models, bound, instances, progress=False, store=store)
    assert len(list((tmp_path / "evaluation").glob("*.pt"))) == 2 * len(instances)
    decoded = []
    real = tsplib.greedy_solutions
    monkeypatch.setattr(tsplib, "greedy_solutions", lambda model, batch, method: decoded.append(method.key) or
                        real(model, batch, method))
    again = tsplib.evaluate_tsplib(models, bound, instances, progress=False, store=store)
    assert decoded == [] and again.equals(first)  # every tour read back
    models[("inv_sqrt_d", 1)] = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10, seed=1)).eval()
    with_seed1 = tsplib.evaluate_tsplib(models, bound, instances, progress=False, store=store)
    assert len(decoded) == 2 * len(instances)  # only the new model's tours
    assert with_seed1[with_seed1.seed == 0].reset_index(drop=True).equals(first)
    fresh = tsplib.evaluate_tsplib(models, bound, instances, progress=False)  # without a store: the same tours
    assert np.array_equal(fresh.length.to_numpy(), with_seed1.length.to_numpy())


def test_tsplib_and_the_rescaling_sweep_run_each_model_on_its_own_seeds():
    torch.manual_seed(0)
    models = {(rule, seed): build_model(TrainConfig(rule=rule, n_train=10, seed=seed)).eval()
              for rule, seed in [("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("ln_d", 1)]}
    instances = tsplib.load_tsplib(max_n=52)
    bound = extrapolation.bind_methods(["inv_sqrt_d", "ln_d", "log_N"], 16, 10)
    results = tsplib.evaluate_tsplib(models, bound, instances, progress=False)
    assert results.groupby("method").seed.agg(lambda s: sorted(set(s))).to_dict() == \
        {"inv_sqrt_d": [0, 1], "ln_d": [1], "log_N": [0, 1]}
    assert len(results) == 5 * len(instances)
    sweep = rivals.rescaling_sweep(models, ["inv_sqrt_d", "ln_d"], [1.0, 2.0], 10, 20, 4, progress=False)
    assert sorted(set(zip(sweep.model, sweep.seed, strict=True))) == [("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("ln_d", 1)]
    assert len(sweep) == 3 * 2 * 2  # models x lengths x factors
    with pytest.raises(ValueError, match=r"no trained model for \['ssmax'\]"):
        tsplib.evaluate_tsplib(models, extrapolation.bind_methods(["ssmax"], 16, 10), instances, progress=False)
    with pytest.raises(ValueError, match=r"no trained model for \['rope'\]"):
        rivals.rescaling_sweep(models, ["rope"], [1.0], 10, 20, 4, progress=False)
    # ln_d has no seed 0, and still comes before log_N, as in `bound`
    assert list(tsplib.tsplib_tables(results)[1].index) == ["inv_sqrt_d", "ln_d", "log_N"]


def test_tsplib_reader_names_what_is_wrong(tmp_path):
    with pytest.raises(FileNotFoundError, match="best_known.csv"):
        tsplib.load_tsplib(folder=tmp_path)
    (tmp_path / "best_known.csv").write_text("name,n,best_known\nbroken,3,10\n")
    (tmp_path / "broken.tsp").write_text("NAME : broken\nTYPE : TSP\nDIMENSION : 3\nEDGE_WEIGHT_TYPE : GEO\n"
                                         "NODE_COORD_SECTION\n1 0 0\n2 1 0\n3 0 1\nEOF\n")
    with pytest.raises(ValueError, match="broken.tsp.*EUC_2D"):
        tsplib.load_tsplib(folder=tmp_path)
    with pytest.raises(ValueError, match="not in"):
        tsplib.load_tsplib(["nowhere"])


def test_notebook_08_parameters_are_checked():
    defaults = {**experiments.RivalsTraining()}
    assert check_parameters("08_rivals", defaults)["rules"] == defaults["rules"]
    with pytest.raises(ValueError, match="rescale_factors must include 1.0"):
        check_parameters("08_rivals", {**defaults, "rescale_factors": [1.5, 2.0]})
    assert "08_rivals" in study.training_notebooks() and study.problem_for("08_rivals") is TSP


@pytest.mark.parametrize("rule", ["dist_bias", "rope"])
def test_the_position_methods_apply_to_cvrp_unchanged(rule):
    """CVRP's nodes (depot and destinations) have positions: the same attention classes train on it,
    and rescaling stretches its coordinates like TSP's."""
    torch.manual_seed(0)
    model = build_model(TrainConfig(rule=rule, problem="cvrp", problem_options={"capacity": 10}, n_train=6))
    instance = model.problem.generate(4, 6, torch.Generator().manual_seed(0))
    solution, log_likelihood = model.sample_with_gradients(instance, torch.Generator().manual_seed(1))
    log_likelihood.sum().backward()
    model.problem.check(instance, solution)
    assert all(p.grad is not None for p in model.encoder.parameters())
    larger = model.problem.generate(4, 24, torch.Generator().manual_seed(2))
    seen = methods.get("rescale").bind(16, N=6).seen_by_model(larger, model.problem)
    torch.testing.assert_close(seen["coords"], larger["coords"] * 2.0)  # sqrt(24 / 6)
    assert torch.equal(seen["demand"], larger["demand"])


def test_tsplib_seed_level_effects_weigh_every_instance_the_same():
    rows = []
    # two instances of different size; EIE is 10 % longer on the small one and equal on the large one (seed 0),
    # 2 % shorter on both (seed 1)
    for seed, (small, large) in enumerate(((1.10, 1.00), (0.98, 0.98))):
        for name, n, band, base, factor in (("a", 100, "n <= 200", 100.0, small), ("b", 2000, "n > 1000", 10000.0, large)):
            rows += [{"name": name, "n": n, "band": band, "method": "inv_sqrt_d", "seed": seed, "length": base},
                     {"name": name, "n": n, "band": band, "method": "eie", "seed": seed, "length": base * factor}]
    table = tsplib.seed_level_by_band(pd.DataFrame(rows)).set_index("band")
    assert list(table.index) == ["n <= 200", "n > 1000", "all"] and set(table.method) == {"eie"}
    assert np.allclose(table.loc["n <= 200", "per_seed"], [10.0, -2.0])
    assert np.allclose(table.loc["all", "per_seed"], [5.0, -2.0])  # not the length-weighted 0.1 %
    assert table.loc["all", "better"] == 1 and table.loc["all", "worse"] == 1
