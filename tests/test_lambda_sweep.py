"""The lambda sweep: a constant scale against EIE's and log_N's, the optimum per seed and over seeds."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from eie import extrapolation, lambda_sweep
from eie.training import TrainConfig, build_model


def frame(costs, sems, eie=(2.5, 101.0)):
    """One n = 400 sweep with the given mean costs at f = 0.75 ... 3 and EIE at (factor, cost)."""
    rows = [{"n": 400, "method": f"f = {f:g}", "factor": f, "objective": c, "sem": s}
            for f, c, s in zip(lambda_sweep.FACTORS, costs, sems, strict=True)]
    rows.append({"n": 400, "method": "eie", "factor": eie[0], "objective": eie[1], "sem": 0.1})
    out = pd.DataFrame(rows)
    out["vs_inv_sqrt_d_pct"] = 100 * (out.objective / 100.0 - 1)
    return out


def test_the_optimum_per_seed_is_the_best_factor_with_those_within_two_standard_errors():
    costs = [101.0, 100.0, 99.0, 99.1, 99.5, 100.2, 101.0, 102.0]  # f = 1 costs 100
    best = lambda_sweep.best_factors({0: frame(costs, [0.1] * 8)})
    row = best.iloc[0]
    # within 2 * hypot(0.1, 0.1) = 0.283 of 99.0: f = 1.25 and 1.5 (99.1), not 1.75 (99.5)
    assert (row.best_f, row.f_low, row.f_high) == (1.25, 1.25, 1.5)
    assert row.best_vs_inv_sqrt_d_pct == pytest.approx(-1.0) and row.eie_f == 2.5
    load = lambda_sweep.best_factors({0: frame([90.0 + i for i in range(8)], [0.1] * 8)}, maximise=True)
    assert load.iloc[0].best_f == 3.0  # a load rate: the largest is best


def test_the_mean_best_factor_over_seeds_has_scipys_t_interval():
    sweeps = {seed: frame([101.0, 100.0, *(99.0 + (i == seed) * -1 for i in range(3)), 100.2, 101.0, 102.0],
                          [0.01] * 8) for seed in range(3)}
    best = lambda_sweep.best_factors(sweeps)
    assert list(best.best_f) == [1.25, 1.5, 1.75]
    over = lambda_sweep.optimum_over_seeds(best).iloc[0]
    interval = stats.ttest_1samp([1.25, 1.5, 1.75], 0).confidence_interval(0.95)
    assert over.seeds == 3 and over.best_f_mean == pytest.approx(1.5)
    assert (over.best_f_low, over.best_f_high) == pytest.approx((interval.low, interval.high))
    assert over.seeds_with_eie_above_f_high == 3  # EIE's 2.5 beyond every seed's range


def test_a_sweep_of_a_model_measures_every_factor_and_rule_against_f_1():
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    plain, log_n = extrapolation.bind_methods(["inv_sqrt_d", "log_N"], 16, 10)
    out = lambda_sweep.sweep(model, plain, [log_n], [20, 40], factors=(0.5, 1.0, 2.0), instances=4, progress=False)
    assert list(out.method[:4]) == ["f = 0.5", "f = 1", "f = 2", "log_N"] and len(out) == 8
    assert (out[out.method == "f = 1"].vs_inv_sqrt_d_pct == 0).all()
    assert np.isclose(out[(out.method == "log_N") & (out.n == 20)].factor, np.log(20) / np.log(10)).all()
    with pytest.raises(ValueError, match="including 1"):
        lambda_sweep.sweep(model, plain, [], [20], factors=(0.5, 2.0), instances=4, progress=False)


def test_older_sweeps_name_their_objective_column_after_the_problem(tmp_path):
    path = tmp_path / "lambda_sweep_tsp_seed0.csv"
    frame([100.0] * 8, [0.1] * 8).rename(columns={"objective": "tour_length"}).to_csv(path, index=False)
    assert "objective" in lambda_sweep.read_sweep(path)
    assert lambda_sweep.sweep_name("cvrp", "_C10", 2) == "lambda_sweep_cvrp_C10_seed2"


def test_a_sweep_extended_by_a_length_equals_the_sweep_computed_at_once():
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    plain, log_n = extrapolation.bind_methods(["inv_sqrt_d", "log_N"], 16, 10)
    factors = (0.5, 1.0, 2.0)
    whole = lambda_sweep.sweep(model, plain, [log_n], [20, 30, 40], factors=factors, instances=4, progress=False)
    held = lambda_sweep.sweep(model, plain, [log_n], [20, 40], factors=factors, instances=4, progress=False)
    methods = {"f = 0.5", "f = 1", "f = 2", "log_N"}
    assert lambda_sweep.holds(held, 40, methods, 4) and not lambda_sweep.holds(held, 30, methods, 4)
    assert not lambda_sweep.holds(held, 40, methods, 8) and not lambda_sweep.holds(held, 40, methods | {"eie"}, 4)
    extra = lambda_sweep.sweep(model, plain, [log_n], [30], factors=factors, instances=4, progress=False)
    pd.testing.assert_frame_equal(lambda_sweep.merged(held, extra), whole)
    pd.testing.assert_frame_equal(lambda_sweep.merged(held, None), held)
    with pytest.raises(ValueError, match="nothing to merge"):
        lambda_sweep.merged(None, None)
