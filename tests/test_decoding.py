"""Decoding modes: best of K samples and the 8 symmetries of the square."""

import numpy as np
import pandas as pd
import pytest
import torch

from eie import methods
from eie.decoding import SYMMETRIES, constant_factor, mode_costs, parse_mode, sampled_costs, symmetric
from eie.decoding_modes import (
    COLUMNS,
    _check_reproduced,
    mode_gaps,
    modes_markdown,
    read_costs,
    read_modes,
    store_costs,
)
from eie.evaluation import greedy_costs
from eie.plotting import decoding_modes_figure
from eie.problems.base import CheckedInstance
from eie.training import TrainConfig, build_model


@pytest.fixture(scope="module")
def tsp_model():
    torch.manual_seed(0)
    return build_model(TrainConfig(problem="tsp", n_train=8), "cpu").eval()


def test_modes_are_parsed_and_refused_by_name():
    assert parse_mode("greedy") == ("greedy", 1) and parse_mode("sample16") == ("sample", 16)
    assert parse_mode("augment8") == ("augment", 8)
    for bad in ("sample0", "sample", "beam4", "augment4"):
        with pytest.raises(ValueError, match="decoding mode"):
            parse_mode(bad)


def test_the_symmetries_preserve_every_distance():
    x = torch.rand(2, 9, 2) * 2 - 1
    distances = torch.cdist(x, x)
    assert len({s for s in SYMMETRIES}) == 8
    for s in SYMMETRIES:
        assert torch.allclose(torch.cdist(symmetric({"coords": x}, *s)["coords"], symmetric({"coords": x}, *s)["coords"]),
                              distances, atol=1e-6)


def test_best_of_k_and_augmentation_never_lose_to_their_parts_and_sampling_reproduces(tsp_model):
    instance = dict(tsp_model.problem.generate(6, 12, torch.Generator().manual_seed(3)))
    greedy = greedy_costs(tsp_model, instance)
    augmented = mode_costs(tsp_model, instance, None, "augment8")
    assert torch.all(augmented <= greedy + 1e-5)  # the identity is one of the 8
    one, many = mode_costs(tsp_model, instance, None, "sample1", seed=5), mode_costs(tsp_model, instance, None,
                                                                                       "sample32", seed=5)
    assert torch.all(many <= one + 1e-5)  # the first draw of each instance is among the 32
    assert torch.equal(many, mode_costs(tsp_model, instance, None, "sample32", seed=5))  # seeded


def test_every_sample_is_kept_with_its_likelihood_in_the_rollouts_layout(tsp_model):
    instance = dict(tsp_model.problem.generate(5, 12, torch.Generator().manual_seed(4)))
    costs, log_likelihood = sampled_costs(tsp_model, instance, None, 16, seed=9)  # one chunk: 80 solutions
    assert costs.shape == log_likelihood.shape == (16, 5)
    with torch.no_grad():  # the same draws made directly: rows are copy-major (copy j of instance i at j * 5 + i)
        tours, direct = tsp_model.rollout(instance, "sample", torch.Generator().manual_seed(9), copies=16)
    coords = instance["coords"]
    for j, i in ((0, 0), (3, 2), (15, 4)):
        tour = coords[i][tours[j * 5 + i]]
        length = (tour - tour.roll(-1, 0)).norm(dim=-1).sum()
        assert costs[j, i] == pytest.approx(float(length), rel=1e-5)
        assert log_likelihood[j, i] == direct[j * 5 + i]
    assert torch.all(log_likelihood < 0) and costs.std(0).min() > 0  # an untrained policy samples different tours
    chunked = sampled_costs(tsp_model, instance, None, 16, seed=9, chunk=32)[0]  # two instances a chunk: other draws
    assert torch.equal(chunked.min(0).values, mode_costs(tsp_model, instance, None, "sample16", seed=9, chunk=32))


def test_cvrp_decodes_under_every_mode_and_the_best_never_loses_to_greedy():
    torch.manual_seed(0)
    model = build_model(TrainConfig(problem="cvrp", n_train=8), "cpu").eval()
    instance = dict(model.problem.generate(4, 10, torch.Generator().manual_seed(1)))
    greedy = greedy_costs(model, instance)
    for mode in ("augment8", "sample8"):  # each solution passes CVRP's feasibility check inside mode_costs
        costs = mode_costs(model, instance, None, mode, seed=2)
        assert costs.shape == (4,) and torch.all(torch.isfinite(costs))
    assert torch.all(mode_costs(model, instance, None, "augment8") <= greedy + 1e-5)


@pytest.mark.parametrize("problem", ["tsp", "cvrp"])
def test_sampling_copies_of_an_encoding_draws_what_encoding_every_copy_draws(problem):
    torch.manual_seed(0)
    model = build_model(TrainConfig(problem=problem, n_train=8), "cpu").eval()
    instance = CheckedInstance(model.problem.generate(3, 9, torch.Generator().manual_seed(4)))
    repeated = CheckedInstance({key: value.repeat(5, *([1] * (value.dim() - 1))) for key, value in instance.items()})
    with torch.no_grad():
        each, likelihood_each = model.rollout(repeated, "sample", torch.Generator().manual_seed(7))
        once, likelihood_once = model.rollout(instance, "sample", torch.Generator().manual_seed(7), copies=5)
    assert torch.equal(each, once) and torch.allclose(likelihood_each, likelihood_once)
    assert len(set(map(tuple, once.tolist()))) > 1  # the copies are sampled, not one tour repeated
    with pytest.raises(ValueError, match="copies must be a positive integer"):
        model.rollout(instance, "sample", copies=0)


def test_a_constant_factor_scales_the_rule(tsp_model):
    (plain,) = methods.bind(["inv_sqrt_d"], 16, 8)
    doubled = constant_factor(plain, 2.0)
    assert doubled.rule(100) == pytest.approx(2 * plain.rule(100))
    instance = dict(tsp_model.problem.generate(3, 10, torch.Generator().manual_seed(0)))
    assert mode_costs(tsp_model, instance, doubled, "greedy").shape == (3,)


def test_the_decoding_modes_figure_draws_each_seeds_effect_and_their_mean():
    rows = []
    for seed, eie_effect in enumerate((-2.0, -1.0, 0.0)):
        for mode, level in (("greedy", 10.0), ("sample16", 11.0)):
            rows.append({"problem": "tsp", "setting": "", "seed": seed, "n": 200, "mode": mode, "method": "inv_sqrt_d",
                         "mean": level})
            rows.append({"problem": "tsp", "setting": "", "seed": seed, "n": 200, "mode": mode, "method": "eie",
                         "mean": level * (1 + eie_effect / 100)})
    fig = decoding_modes_figure(pd.DataFrame(rows))
    mode_itself, greedy, sampled = fig.axes
    assert [ax.get_title() for ax in fig.axes] == ["the mode itself", "greedy (3 seeds)", "sample16 (3 seeds)"]
    seeds = greedy.get_lines()[0].get_ydata()  # the per-seed points come first
    assert np.allclose(sorted(seeds), [-2.0, -1.0, 0.0])
    mean_line = next(line for line in greedy.get_lines() if line.get_marker() == "s")
    assert np.allclose(mean_line.get_ydata(), [-1.0])
    mode_mean = next(line for line in mode_itself.get_lines() if line.get_marker() == "s")
    assert np.allclose(mode_mean.get_ydata(), [10.0])  # sampling 11 against greedy 10: +10 %
    # a problem without one of the modes gets its panel marked, not left blank
    rows += [{**row, "problem": "cvrp", "setting": "C10"} for row in rows if row["mode"] == "greedy"]
    titles = [ax.get_title() for ax in decoding_modes_figure(pd.DataFrame(rows)).axes]
    assert titles[3:] == ["CVRP C10: the mode itself", "CVRP C10: greedy (3 seeds)", "CVRP C10: sample16 (0 seeds)"]


def test_the_decoding_modes_table_gives_each_seeds_effect_under_the_same_mode(tmp_path):
    rows = [{"problem": "tsp", "setting": "", "seed": seed, "n": 200, "mode": "sample16", "method": method,
             "instances": 4, "mean": mean, "sem": 0.1, "seconds": 1.0}
            for seed, (plain, eie) in enumerate(((10.0, 9.8), (20.0, 19.8))) for method, mean in (("inv_sqrt_d", plain), ("eie", eie))]
    path = tmp_path / "modes.csv"
    pd.DataFrame(rows, columns=COLUMNS).to_csv(path, index=False)
    text = modes_markdown(read_modes(path))
    assert "| EIE | 200 | sample16 | -2.00, -1.00 | -1.50 % [" in text  # 9.8/10 and 19.8/20
    assert "better on 2, worse on 0 of 2 seeds" in text
    pd.DataFrame(rows).drop(columns="problem").to_csv(path, index=False)
    with pytest.raises(ValueError, match="problem"):
        read_modes(path)


def test_each_modes_gap_is_taken_on_the_instances_the_reference_solved_and_a_rerun_must_agree():
    frame = pd.DataFrame([{"problem": "tsp", "setting": "", "seed": 0, "n": 200, "mode": "augment8", "method": "eie",
                           "instances": 4, "mean": 0.0, "sem": 0.0, "seconds": 0.0},
                          {"problem": "bpp", "setting": "120x100", "seed": 0, "n": 200, "mode": "greedy",
                           "method": "eie", "instances": 2, "mean": 0.0, "sem": 0.0, "seconds": 0.0}])
    costs = {("tsp", "", 0, 200, "augment8", "eie"): np.array([11.0, 13.0, 100.0, 100.0]),
             ("bpp", "120x100", 0, 200, "greedy", "eie"): np.array([60.0, 60.0])}
    references = {("tsp", ""): {200: np.array([10.0, 10.0])}, ("bpp", "120x100"): {200: np.array([75.0, 75.0])}}
    gaps = mode_gaps(frame, costs, references).set_index("problem")
    assert gaps.loc["tsp", "instances"] == 2 and np.isclose(gaps.loc["tsp", "gap_pct"], 20.0)  # 12 against 10
    assert np.isclose(gaps.loc["bpp", "gap_pct"], 20.0)  # a load of 60 against 75: 20 % worse
    assert mode_gaps(frame, costs, {}).empty  # no reference, no gap
    both = pd.DataFrame([{"problem": problem, "setting": setting, "seed": 0, "n": 200, "mode": "greedy",
                          "method": method, "instances": 2, "mean": 1.0, "sem": 0.0, "seconds": 0.0}
                         for problem, setting in (("tsp", ""), ("cvrp", "C10")) for method in ("inv_sqrt_d", "eie")])
    both_costs = {(p, s, 0, 200, "greedy", m): np.array([1.0, 1.0]) for p, s in (("tsp", ""), ("cvrp", "C10"))
                  for m in ("inv_sqrt_d", "eie")}
    refs = {("tsp", ""): {200: np.array([0.5, 0.5])}, ("cvrp", "C10"): {200: np.array([0.8, 0.8])}}
    text = modes_markdown(both, gaps=mode_gaps(both, both_costs, refs))
    assert "Gap to LKH" in text and "Gap to HGS" in text  # each problem's own reference solver
    stored = pd.Series({"eie": 12.34567})
    _check_reproduced(stored, [{"method": "eie", "mean": 12.345671}], {"eie": "key"})
    with pytest.raises(RuntimeError, match="does not reproduce"):
        _check_reproduced(stored, [{"method": "eie", "mean": 12.3}], {"eie": "key"})


def test_stored_costs_keep_the_groups_another_run_wrote_meanwhile(tmp_path):
    path = tmp_path / "decoding_modes_costs.npz"
    tsp = ("tsp", "", 0, 200, "greedy", "eie")
    cvrp = ("cvrp", "C10", 1, 200, "sample16", "log_N")
    store_costs({tsp: np.array([1.0, 2.0])}, path)  # the TSP run's first group
    mine = {cvrp: np.array([3.0]), tsp: np.array([9.0])}  # the CVRP run, started before, never saw it
    written = store_costs(mine, path)
    held = read_costs(path)
    assert set(held) == set(written) == {tsp, cvrp}
    assert np.array_equal(held[cvrp], [3.0]) and np.array_equal(held[tsp], [9.0])  # its own values win


def test_measure_resumes_skips_finished_groups_and_checks_what_it_decodes_again(tmp_path, monkeypatch, capsys):
    """The decoding-modes measurement end to end on a scratch run: it writes one row per method,
    decodes nothing on a rerun, decodes a group again when its per-instance objectives are lost (and
    raises if the means then differ from the csv's), and skips a seed whose model is not exported."""
    from eie import decoding_modes, experiments, paths, study
    from eie.checkpoints import export_policy
    from eie.training import train

    root = tmp_path / "root"
    (root / "lib" / "eie").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    monkeypatch.setenv(paths.ROOT_ENV_VAR, str(root))
    monkeypatch.setattr(study, "ensure_scales", lambda *args, **kwargs: (None, None))  # log_N needs neither
    params = experiments.load("03_train_tsp", run="scratch", n_train=6, n_max=12, test_size=8, seeds=[0, 1])
    config = TrainConfig(problem="tsp", n_train=6, epochs=1, steps_per_epoch=1, batch_size=4, baseline_eval_size=4)
    trained = train(config, tmp_path / "train", name="seed0", progress=False, device="cpu")
    export_policy(trained.checkpoint, study.models_folder("scratch") / f"{study.model_name('tsp', 'inv_sqrt_d', 6, 0)}.pt")

    decoded = []
    original = decoding_modes.mode_costs
    monkeypatch.setattr(decoding_modes, "mode_costs", lambda model, test, method, mode, **kw: decoded.append(
        (method.key, mode)) or original(model, test, method, mode, **kw))
    run = dict(params=params, notebook="03_train_tsp", seeds=[0, 1], lengths=[8, 12], modes=["greedy", "sample4"],
               method_keys=["inv_sqrt_d", "log_N"], factors=[1.5], instances=6, progress=False)
    csv = decoding_modes.measure(**run)
    assert "tsp_inv_sqrt_d_n6_seed1: no exported policy yet; skipped" in capsys.readouterr().out
    frame = decoding_modes.read_modes(csv)
    assert len(frame) == len(decoded) == 2 * 2 * 3 and set(frame.seed) == {0} and (frame.instances == 6).all()
    assert set(frame.method) == {"inv_sqrt_d", "log_N", "const_1.5"}
    assert len(decoding_modes.read_costs(decoding_modes.costs_path(csv))) == 12

    decoded.clear()
    decoding_modes.measure(**run)
    assert decoded == []  # every group finished: nothing decoded again
    decoding_modes.measure(**{**run, "factors": []})  # a stored method not asked for again
    assert decoded == [] and len(decoding_modes.read_modes(csv)) == 12

    decoding_modes.costs_path(csv).unlink()  # objectives lost: decoded again, means checked against the csv
    decoding_modes.measure(**{**run, "lengths": [8], "modes": ["sample4"]})
    assert len(decoded) == 3 and len(decoding_modes.read_modes(csv)) == 12  # no row added
    decoding_modes.costs_path(csv).unlink()
    frame.loc[(frame.n == 8) & (frame["mode"] == "greedy") & (frame.method == "log_N"), "mean"] += 1.0
    frame.to_csv(csv, index=False)
    with pytest.raises(RuntimeError, match="does not reproduce"):
        decoding_modes.measure(**{**run, "lengths": [8], "modes": ["greedy"]})
