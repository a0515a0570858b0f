"""Seed-level statistics (eie.seed_level) against cases computed by hand.

With three seeds, Student's t has 2 degrees of freedom, whose distribution function has the closed
form F(t) = 1/2 + t / (2 sqrt(t^2 + 2)); the expected values below use it, not scipy."""

import math

import pandas as pd
import pytest

from eie.seed_level import describe, paper_effect, seed_effects, seed_level_table, summarise_effects


def t2_cdf(t):
    return 0.5 + t / (2 * math.sqrt(t * t + 2))


def test_summary_of_three_seeds_matches_the_closed_form():
    s = summarise_effects([1.0, 2.0, 3.0], margin=1.0, paper_effect=-1.0)
    se = 1 / math.sqrt(3)
    half = 4.302652729911275 * se  # t_{0.975, 2}
    assert s["seeds"] == 3 and s["mean"] == pytest.approx(2.0)
    assert (s["ci_low"], s["ci_high"]) == (pytest.approx(2 - half), pytest.approx(2 + half))
    assert s["p"] == pytest.approx(2 * (1 - t2_cdf(2 / se)))
    # TOST: the larger one-sided p, H0 effect <= -1 (t = 3/se) and H0 effect >= +1 (t = 1/se)
    assert s["p_equivalence"] == pytest.approx(max(1 - t2_cdf(3 / se), t2_cdf(1 / se)))
    assert not s["equivalent"]
    assert s["p_paper"] == pytest.approx(2 * (1 - t2_cdf(3 / se)))
    assert (s["better"], s["worse"]) == (0, 3)  # minimised: a positive effect is worse
    assert summarise_effects([1.0, 2.0, 3.0], maximise=True)["better"] == 3


def test_equivalence_is_claimed_only_inside_the_margin():
    tight = summarise_effects([0.1, -0.1, 0.05, 0.0, -0.05], margin=1.0)
    assert tight["equivalent"] and tight["p_equivalence"] < 0.05
    assert not summarise_effects([0.1, -0.1, 0.05], margin=0.05)["equivalent"]


def test_fewer_than_two_seeds_give_no_interval():
    s = summarise_effects([2.5])
    assert s["seeds"] == 1 and math.isnan(s["ci_low"]) and math.isnan(s["p"]) and not s["equivalent"]
    assert "one seed" in describe(s)


def test_per_seed_effects_and_the_table_read_the_results():
    rows = [("", m, seed, n, obj) for seed, (b, e) in enumerate([(100.0, 103.0), (200.0, 198.0), (50.0, 51.0)])
            for m, n, obj in (("inv_sqrt_d", 1600, b), ("eie", 1600, e), ("inv_sqrt_d", 100, 1.0), ("eie", 100, 1.0))]
    results = pd.DataFrame(rows, columns=["setting", "method", "seed", "n", "objective"])
    effects = seed_effects(results, "eie", 1600)
    assert list(effects.round(6)) == [3.0, -1.0, 2.0]
    table = seed_level_table("tsp", results, ["eie"])
    row = table.iloc[0]
    assert row["n"] == 1600 and row["N"] == 100 and row["per_seed"] == "+3.00, -1.00, +2.00"
    assert row["paper"] == pytest.approx(100 * (91.2 / 96.6 - 1))  # the paper's Table 2 at 1600
    assert "worse on 2 of 3 seeds" in describe(row)


def test_a_results_table_read_back_from_csv_gives_the_same_effects(tmp_path):
    rows = [("", m, seed, 1600, obj) for seed, (b, e) in enumerate([(100.0, 103.0), (200.0, 198.0)])
            for m, obj in (("inv_sqrt_d", b), ("eie", e))]
    path = tmp_path / "tsp.csv"
    pd.DataFrame(rows, columns=["setting", "method", "seed", "n", "objective"]).to_csv(path, index=False)
    read_back = pd.read_csv(path)  # the empty setting comes back as NaN
    assert list(seed_effects(read_back, "eie", 1600).round(6)) == [3.0, -1.0]


def test_paper_effect_is_none_where_the_paper_has_no_row():
    assert paper_effect("tsp", "", "log_N", 16) is None
    assert paper_effect("cvrp", "C10", "eie", 16) == pytest.approx(100 * (215.0 / 231.7 - 1))
    assert paper_effect("bpp", "120x100", "eie", 16) == pytest.approx(100 * (72.6 / 62.6 - 1))
