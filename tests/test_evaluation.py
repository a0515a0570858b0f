import time

import numpy as np
import pandas as pd
import pytest
import torch

from eie import comparison, extrapolation, methods, scaling
from eie.attention import Attention
from eie.evaluation import extrapolation_lengths, fixed_test_set, greedy_costs, inference_seconds, median_seconds
from eie.model import AttentionModel
from eie.problems import TSP


def test_lengths_double_up_to_n_max():
    assert extrapolation_lengths(20, 160) == [20, 40, 80, 160]
    assert extrapolation_lengths(100, 1000) == [100, 200, 400, 800]
    with pytest.raises(ValueError, match="n_max"):
        extrapolation_lengths(100, 50)


def test_test_sets_are_fixed_and_prefix_stable():
    a = fixed_test_set(TSP(), 30, 16, seed=5)
    b = fixed_test_set(TSP(), 30, 64, seed=5)
    assert torch.equal(a["coords"], b["coords"][:16])  # the reference subset is the same instances


def test_lkh_finds_the_square_and_beats_an_untrained_model():
    square = torch.tensor([[[0.0, 0.0], [1.0, 1.0], [1.0, 0.0], [0.0, 1.0]]])
    assert TSP().reference_costs({"coords": square})[0] == pytest.approx(4.0)
    inst = fixed_test_set(TSP(), 25, 6)
    torch.manual_seed(0)
    model = AttentionModel(TSP(), Attention(scaling.inv_sqrt_d(16)))
    greedy = greedy_costs(model, inst, methods.get("inv_sqrt_d").bind(16), chunk=4)
    assert np.all(TSP().reference_costs(inst) <= greedy.numpy() + 1e-6)


def test_greedy_costs_restore_the_trained_scale():
    model = AttentionModel(TSP(), Attention(scaling.inv_sqrt_d(16), n_mode="unmasked"))
    greedy_costs(model, fixed_test_set(TSP(), 10, 3), methods.get("ln_d").bind(16))
    assert model.attention.rule.key == "inv_sqrt_d" and model.attention.n_mode == "unmasked"


def test_training_free_rules_use_the_base_model():
    assert [methods.get(k).model_key for k in ("eie", "exact", "log_N", "ln_d")] == \
        ["inv_sqrt_d", "inv_sqrt_d", "inv_sqrt_d", "ln_d"]


def test_table_marks_the_best_mean():
    results = pd.DataFrame({"problem": "tsp", "setting": "", "method": ["a", "a", "b", "b"], "seed": [0, 1, 0, 1],
                            "n": 10, "objective": [1.0, 1.2, 2.0, 2.2], "gap_pct": [1, 2, 3, 4]})
    table = comparison.table_by_method(results)
    assert table.loc["a", 10] == "*1.10 (0.14)" and table.loc["b", 10] == "2.10 (0.14)"


def test_inference_timing_reports_positive_medians_per_method():
    model = AttentionModel(TSP(), Attention(scaling.inv_sqrt_d(16)))
    instance = fixed_test_set(TSP(), 10, 4)
    assert 0.02 <= median_seconds(lambda: time.sleep(0.02), repeats=3) < 0.2
    assert inference_seconds(model, instance, methods.get("ln_d").bind(16), repeats=3) > 0
    with pytest.raises(ValueError, match="repeats"):
        inference_seconds(model, instance, repeats=0)
    timing = extrapolation.inference_times(model, methods.bind(["inv_sqrt_d", "ln_d"], 16, 10), 10, 20, size=4, repeats=1,
                                   device="cpu", progress=False)
    assert list(timing.columns) == ["n", "method", "instances", "seconds", "seconds_per_instance"]
    assert len(timing) == 4 and (timing.seconds > 0).all()
    assert np.allclose(timing.seconds_per_instance * 4, timing.seconds)
