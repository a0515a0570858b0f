import math

import numpy as np
import pytest
import torch

from eie import entropy, methods, scaling


def test_rule_values_and_types():
    d, N = 16, 100
    assert scaling.inv_sqrt_d(d)(500) == pytest.approx(0.25)
    assert scaling.ln_sqrt_d(d)(500) == pytest.approx(math.log(500) / 4)
    assert scaling.ln_d(d)(500) == pytest.approx(math.log(500) / 16)
    assert scaling.ssmax(d)(500) == pytest.approx(math.log(501) / 4)
    assert scaling.log_N(d, N)(N) == pytest.approx(0.25)
    assert scaling.log_N(d, N)(N * N) == pytest.approx(0.5)
    arr = scaling.ln_d(d)(np.array([10, 20]))
    assert isinstance(arr, np.ndarray) and arr.shape == (2,)
    ten = scaling.inv_sqrt_d(d)(torch.tensor([10, 20]))
    assert torch.is_tensor(ten) and torch.allclose(ten, torch.full((2,), 0.25, dtype=torch.float64))


def test_which_rules_need_retraining():
    assert methods.keys(trained=True) == ["inv_sqrt_d", "ln_d", "ln_sqrt_d", "ssmax", "dist_bias", "rope", "ptrnet"]
    assert {methods.get(k).applied_to for k in methods.keys(trained=False)} == {"inv_sqrt_d", "dist_bias", "rope"}
    for key in ("eie", "exact", "log_N"):  # test-time rules equal 1/sqrt(d) at N: the same model serves them
        assert methods.get(key).model_key == "inv_sqrt_d"


def test_registry_errors():
    with pytest.raises(ValueError, match="unknown method 'nope'"):
        methods.get("nope")
    with pytest.raises(ValueError, match="needs a fitted net"):
        methods.get("eie").rule(16)
    with pytest.raises(ValueError, match="needs the training length"):
        methods.get("log_N").rule(16)
    with pytest.raises(ValueError, match="already registered"):
        methods.register(methods.get("eie"))
    with pytest.raises(ValueError, match="n must be >= 1"):
        scaling.ln_d(16)(0)


@pytest.fixture(scope="module")
def small_table():
    return scaling.solve_exact(16, 20, 160, grid_points=6, samples=1024, target_samples=8192, seed=0)


def test_exact_lambda_solves_entropy_invariance(small_table):
    table = small_table
    assert table.lam[0] == pytest.approx(0.25, abs=0.01)
    assert np.all(np.diff(table.lam) > 0)
    # An independent estimate at the solved scale lands on the target entropy.
    est = entropy.entropy_eq6(table.n.astype(int), torch.as_tensor(table.lam), 16, samples=4096, seed=123,
                              control_variates=True)
    assert np.all(np.abs(est.mean.numpy() - table.target_entropy) < 5 * est.se.numpy() + 0.01)


def test_exact_rule_interpolates_and_guards_its_range(small_table, tmp_path):
    rule = scaling.exact(small_table)
    assert rule(10) == pytest.approx(0.25)  # below N: the training scale
    assert rule(20) == pytest.approx(0.25)
    assert small_table.lam[0] < rule(50) < small_table.lam[-1]
    with pytest.raises(ValueError, match="covers n <= 160"):
        rule(161)
    path = small_table.save(tmp_path / "t.csv")
    loaded = scaling.ExactTable.load(path, d=16)
    assert np.allclose(loaded.lam, small_table.lam) and loaded.N == 20
    with pytest.raises(ValueError, match="d=16, not d=32"):
        scaling.ExactTable.load(path, d=32)
    with pytest.raises(FileNotFoundError):
        scaling.ExactTable.load(tmp_path / "missing.csv")
    (tmp_path / "bad.csv").write_text("garbage")
    with pytest.raises(ValueError, match="not a readable"):
        scaling.ExactTable.load(tmp_path / "bad.csv")
