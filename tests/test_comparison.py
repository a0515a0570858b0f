import numpy as np
import pandas as pd
import pytest
from script_module import script_module

from eie import comparison, extrapolation


def fake_objectives(shift_eie=-0.5, size=60, seeds=(0, 1)):
    rng = np.random.default_rng(0)
    base = rng.uniform(5, 10, size)
    out = {}
    for seed in seeds:
        noise = lambda: rng.normal(0, 0.05, size)  # noqa: E731
        out[("C10", "inv_sqrt_d", seed, 20)] = base + noise()
        out[("C10", "eie", seed, 20)] = base + shift_eie + noise()
        out[("C10", "exact", seed, 20)] = base + shift_eie + noise()
    return out


def test_save_and_load_round_trip(tmp_path):
    per_instance = {("C10", "eie", 0, 20): np.arange(3.0), ("C10", "ln_d", 1, 40): np.ones(3)}
    extrapolation.save_instance_costs(per_instance, tmp_path / "x.npz")
    loaded = comparison.load_instance_objectives(tmp_path / "x.npz")
    assert set(loaded) == {("C10", "eie", 0, 20), ("C10", "ln_d", 1, 40)}
    np.testing.assert_array_equal(loaded[("C10", "eie", 0, 20)], np.arange(3.0))
    extrapolation.save_instance_costs({("", "eie", 0, 20): np.ones(2)}, tmp_path / "y.npz")
    assert set(comparison.load_instance_objectives(tmp_path / "y.npz")) == {("", "eie", 0, 20)}
    with pytest.raises(FileNotFoundError, match="run the training notebook"):
        comparison.load_instance_objectives(tmp_path / "missing.npz")


def test_paired_comparison_finds_a_real_difference_and_not_a_null_one():
    frame = comparison.paired_comparison(fake_objectives(), "eie")
    assert list(frame.other) == ["exact", "inv_sqrt_d"]
    row = frame.set_index("other").loc["inv_sqrt_d"]
    assert row["diff"] == pytest.approx(-0.5, abs=0.05) and row.ci_low < -0.45 < row.ci_high + 0.1
    assert row.verdict == "better" and row.p_holm < 1e-6
    assert frame.set_index("other").loc["exact"].verdict == "n.s."
    maximised = comparison.paired_comparison(fake_objectives(), "eie", maximise=True)
    assert maximised.set_index("other").loc["inv_sqrt_d"].verdict == "worse"
    uneven = fake_objectives()
    uneven[("C10", "eie", 0, 20)] = uneven[("C10", "eie", 0, 20)][:10]
    uneven[("C10", "eie", 1, 20)] = uneven[("C10", "eie", 1, 20)][:10]
    with pytest.raises(ValueError, match="different numbers of instances"):
        comparison.paired_comparison(uneven, "eie")


def test_holm_adjustment():
    np.testing.assert_allclose(comparison.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
    assert comparison.holm([]).shape == (0,)


def test_markdown_table_with_bold_best():
    results = pd.DataFrame({"method": ["a", "a", "b", "b"], "seed": [0, 1, 0, 1], "n": [20] * 4,
                            "objective": [1.0, 1.2, 2.0, 2.0]})
    cells = comparison.table_by_method(results, mark="**{}**")
    text = comparison.markdown_table(cells, "method")
    assert text.splitlines()[0] == "| method | 20 |"
    assert "| a | **1.10 (0.14)** |" in text and "| b | 2.00 (0.00) |" in text


def test_relative_tables_line_up_by_extrapolation_factor():
    results = pd.DataFrame({"method": ["inv_sqrt_d", "eie"] * 2, "seed": [0] * 4, "n": [20, 20, 40, 40],
                            "objective": [10.0, 10.0, 20.0, 18.0]})
    ours = comparison.relative_to_base(results)
    assert list(ours.columns) == ["x1", "x2"] and ours.loc["eie", "x2"] == pytest.approx(-10.0)
    theirs = comparison.paper_relative({"n": [100, 200], "inv_sqrt_d": [(5.0, 0.1), (8.0, 0.1)],
                                        "eie": [(5.0, 0.1), (6.0, 0.2)], "ln_d": [(5.0, 0.1), (9.0, 0.1)]})
    both = comparison.side_by_side(ours, theirs)
    assert both.loc["eie", "x2"] == "-10.0 / -25.0" and both.loc["inv_sqrt_d", "x1"] == "0.0 / 0.0"
    assert comparison.side_by_side(ours, theirs.drop("eie")).loc["eie", "x2"] == "-10.0 / -"


def write_run(folder, objectives, reference=7.0):
    """A results folder as notebook 04 writes it, from per-instance objectives."""
    folder.mkdir()
    rows = [{"problem": "cvrp", "setting": s, "method": m, "seed": seed, "n": n, "objective": v.mean(),
             "gap_pct": 100 * (v.mean() / reference - 1)} for (s, m, seed, n), v in objectives.items()]
    rows.append({"problem": "cvrp", "setting": "C10", "method": "reference", "seed": -1, "n": 20,
                 "objective": reference, "gap_pct": 0.0})
    pd.DataFrame(rows).to_csv(folder / "cvrp.csv", index=False)
    extrapolation.save_instance_costs(objectives, folder / "cvrp_instance_costs.npz")


def test_two_runs_are_compared_instance_by_instance(tmp_path):
    first = fake_objectives(shift_eie=-0.5)
    second = {key: values + (0.2 if key[1] == "inv_sqrt_d" else 0.0) for key, values in first.items()}
    second[("C10", "exact", 0, 20)] = first[("C10", "exact", 0, 20)] + np.random.default_rng(1).normal(0, 0.05, 60)
    write_run(tmp_path / "a", first)
    write_run(tmp_path / "b", second)
    frame = script_module("compare_runs").compare_runs(tmp_path / "a", tmp_path / "b", "cvrp").set_index("method")
    assert list(frame.index) == ["inv_sqrt_d", "eie", "exact"]
    shifted = frame.loc["inv_sqrt_d"]
    assert shifted["diff"] == pytest.approx(-0.2) and shifted.verdict == "better" and shifted.instances == 60
    assert shifted.objective_second - shifted.objective_first == pytest.approx(0.2)
    assert shifted.gap_second > shifted.gap_first and shifted.objective_std_first > 0
    assert frame.loc["eie"].p == 1.0 and frame.loc["eie"].verdict == "n.s."  # identical instances
    assert frame.loc["exact"].verdict == "n.s."
    only_first = script_module("compare_runs").compare_runs(tmp_path / "a", tmp_path / "b", "cvrp", methods=["eie"])
    assert list(only_first.method) == ["eie"]
    with pytest.raises(FileNotFoundError, match="04_train_cvrp"):
        script_module("compare_runs").compare_runs(tmp_path / "a", tmp_path / "missing", "cvrp")


def test_verdict_sentence_reads_its_numbers_from_the_tables():
    objectives = {}
    rng = np.random.default_rng(1)
    base = {n: rng.uniform(5, 10, 40) * n / 20 for n in (20, 40)}
    for seed in (0, 1):
        for n in (20, 40):
            objectives[("C10", "inv_sqrt_d", seed, n)] = base[n] + rng.normal(0, 0.01, 40)
            objectives[("C10", "eie", seed, n)] = base[n] * (0.9 if n == 40 else 1.0) + rng.normal(0, 0.01, 40)
    rows = [{"problem": "cvrp", "setting": "C10", "method": m, "seed": s, "n": n, "objective": v.mean(),
             "gap_pct": 100 * (v.mean() / (0.8 * base[n].mean()) - 1)} for (_, m, s, n), v in objectives.items()]
    rows += [{"problem": "cvrp", "setting": "C10", "method": "reference", "seed": -1, "n": n,
              "objective": 0.8 * base[n].mean(), "gap_pct": 0.0} for n in (20, 40)]
    results = pd.DataFrame(rows)
    paired = comparison.paired_comparison(objectives, "eie")
    [sentence] = comparison.verdict_sentences("cvrp", results, paired)
    assert sentence.startswith("CVRP C10, trained at N = 20, tested at n = 40 (2×N): EIE without retraining is ")
    means = results[results.n == 40].groupby("method").objective.mean()
    assert f"{100 * (1 - means.eie / means.inv_sqrt_d):.2f} % better than the 1/sqrt(d) model" in sentence
    assert "paired over 40 instances" in sentence and ": significant)" in sentence
    assert "Best at n = 40: EIE" in sentence and "Gap to HGS at n = 40 (% worse): EIE +12.5, 1/sqrt(d) +25.0." in sentence
    per_seed = results[results.n == 40].pivot_table(index="seed", columns="method", values="objective")
    changes = 100 * (per_seed.eie - per_seed.inv_sqrt_d) / per_seed.inv_sqrt_d
    assert (f"Per seed (0, 1): {changes[0]:+.2f}, {changes[1]:+.2f} % of the 1/sqrt(d) model's objective; "
            "EIE better on 2, worse on 0 of 2 seeds.") in sentence
    one_seed = comparison.verdict_sentences("cvrp", results[results.seed != 1], paired)[0]
    assert "Per seed" not in one_seed
    level = comparison.paired_comparison({k: v for k, v in objectives.items() if k[3] == 20}, "eie")
    [tie] = comparison.verdict_sentences("cvrp", results[results.n == 20], level)
    assert ": not significant)" in tie
