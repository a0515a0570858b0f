"""The Table 4 timing script: blocks resume from its csv, draw the same instances on every run, and its
table sums the blocks both methods finished."""

import pandas as pd
import pytest
import torch
from script_module import script_module

from eie import extrapolation
from eie.training import TrainConfig, build_model


@pytest.fixture(scope="module")
def script():
    return script_module("table4_at_size")


def _model_and_methods():
    model = build_model(TrainConfig(problem="cvrp", problem_options={"capacity": 10.0}, n_train=10, seed=0)).eval()
    methods = extrapolation.bind_methods(["inv_sqrt_d", "log_N"], model.config.head_dim, 10)
    return model, methods


def test_blocks_are_resumed_from_the_csv_and_draw_the_same_instances(script, tmp_path, monkeypatch):
    model, methods = _model_and_methods()
    csv = tmp_path / "table4_at_size.csv"
    first = script.time_blocks(model, methods, 12, blocks=3, size=4, chunk=2, test_seed=7, csv=csv)
    assert sorted(zip(first.block, first.method, strict=True)) == sorted((b, m.key) for b in range(3) for m in methods)
    assert first.method.tolist()[:4] == ["inv_sqrt_d", "log_N", "log_N", "inv_sqrt_d"]  # order alternates
    assert (first.instances == 4).all() and (first.n == 12).all()

    kept = pd.read_csv(csv)
    kept[kept.block < 2].to_csv(csv, index=False)  # as if stopped after two blocks
    decoded = []
    original = script.greedy_costs
    monkeypatch.setattr(script, "greedy_costs", lambda m, x, *a, **k: decoded.append(len(x["coords"])) or original(m, x, *a, **k))
    again = script.time_blocks(model, methods, 12, blocks=3, size=4, chunk=2, test_seed=7, csv=csv)
    assert decoded == [2, 2, 4, 4]  # an untimed warm-up of each method, then only the missing block
    merged = first.merge(again, on=["block", "method"], suffixes=("", "_again"))
    assert len(merged) == 6  # the csv keeps six significant digits; a block decoded again gives the same greedy
    assert merged.objective_again.tolist() == pytest.approx(merged.objective.tolist(), rel=1e-5)

    decoded.clear()
    script.time_blocks(model, methods, 12, blocks=3, size=4, chunk=2, test_seed=7, csv=csv)
    assert decoded == []  # a finished csv decodes nothing
    assert set(script.time_blocks(model, methods, 12, blocks=2, size=4, chunk=2, test_seed=7, csv=csv).block) == {0, 1}


@pytest.mark.parametrize("change", [{"n": 14}, {"size": 2}, {"test_seed": 8}, {"model_name": "another"}])
def test_a_csv_measured_with_another_setup_is_refused_not_mixed_in(script, tmp_path, change):
    model, methods = _model_and_methods()
    csv = tmp_path / "table4_at_size.csv"
    setup = {"n": 12, "blocks": 1, "size": 4, "chunk": 2, "test_seed": 7, "csv": csv, "model_name": "seed0"}
    script.time_blocks(model, methods, **setup)
    with pytest.raises(SystemExit, match=f"{next(iter(change)).replace('size', 'block_size').replace('_name', '')} "):
        script.time_blocks(model, methods, **{**setup, **change})


def test_each_block_has_its_own_instances(script):
    problem = _model_and_methods()[0].problem
    one, two = (script.block_instances(problem, 12, b, 4, 7) for b in (0, 1))
    assert not torch.equal(one["coords"], two["coords"])
    assert torch.equal(one["coords"], script.block_instances(problem, 12, 0, 4, 7)["coords"])


def test_the_table_sums_only_blocks_both_methods_finished(script):
    rows = [(0, "inv_sqrt_d", 10.0, 5.0), (0, "eie", 11.0, 4.0), (1, "eie", 13.0, 6.0), (1, "inv_sqrt_d", 10.0, 7.0),
            (2, "inv_sqrt_d", 99.0, 9.0)]  # block 2 stopped before its EIE half
    done = pd.DataFrame([{"block": b, "method": m, "instances": 8, "seconds": s, "objective": o, "threads": 1,
                          "load_1min": 1.0} for b, m, s, o in rows])
    text = script.table(done, 1600)
    line = text.splitlines()[-1].split("|")
    cells = [c.strip() for c in line[1:-1]]
    assert cells[0] == "1600" and cells[1] == "16"  # two blocks of 8 instances
    assert float(cells[2]) == pytest.approx(20 / 3600, abs=1e-3) and float(cells[3]) == pytest.approx(24 / 3600, abs=1e-3)
    assert cells[4] == "+4.0"
    assert float(cells[5]) == pytest.approx((1.1 + 1.3) / 2)  # median of the two blocks' ratios
    assert float(cells[6]) == pytest.approx(6.0) and float(cells[7]) == pytest.approx(5.0)
    assert float(cells[8]) == 8.18
