"""The CVRPLIB X reader: instances as the models see them, and solutions scored in the set's units."""

import numpy as np
import pandas as pd
import pytest
import torch
from script_module import script_module

from eie.cvrplib import load_cvrplib
from eie.decoding import SYMMETRIES, symmetric
from eie.evaluation import greedy_solutions
from eie.problems import make_problem
from eie.training import TrainConfig, build_model


def test_the_seventy_instances_load_with_their_best_known_costs():
    instances = load_cvrplib()
    assert len(instances) == 70 and instances[0].n == 100 and instances[-1].n == 1000
    assert {i.band for i in instances} == {"100-250", "251-500", "501-1000"}


def test_an_instance_as_the_model_sees_it_passes_the_problems_check():
    (x,) = load_cvrplib(["X-n101-k25"])
    batch = x.for_model()
    assert batch["coords"].shape == (1, 101, 2) and batch["coords"].abs().max() <= 1 + 1e-6
    assert torch.allclose(batch["demand"][0], torch.tensor(x.demand / x.capacity, dtype=torch.float32))
    make_problem("cvrp", capacity=10.0).check_instance(batch)


def test_the_cost_is_the_sum_of_rounded_edges_and_infeasible_solutions_are_refused():
    (x,) = load_cvrplib(["X-n101-k25"])
    one_each = np.ravel([[c, 0] for c in range(1, x.n + 1)])  # every customer on its own route
    expected = sum(2 * int(np.floor(np.hypot(*(x.coords[c] - x.coords[0])) + 0.5)) for c in range(1, x.n + 1))
    assert x.cost(one_each) == expected and expected > x.best_known
    with pytest.raises(ValueError, match="not served exactly once"):
        x.cost(one_each[:-2])
    with pytest.raises(ValueError, match="capacity"):
        x.cost(np.arange(1, x.n + 1))  # one route with every customer


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="unknown CVRPLIB instances"):
        load_cvrplib(["X-n9999-k1"])


def test_the_symmetry_mode_keeps_the_best_feasible_solution_of_the_eight_copies():
    solve = script_module("cvrplib_gaps").solve
    (x,) = load_cvrplib(["X-n101-k25"])
    model = build_model(TrainConfig(problem="cvrp", problem_options={"capacity": 10.0}, n_train=20, seed=0)).eval()
    greedy_solution, greedy_cost = solve(model, x, None, "greedy")
    best_solution, best_cost = solve(model, x, None, "augment8")
    with torch.no_grad():
        copies = [x.cost(greedy_solutions(model, symmetric(x.for_model(), *s), None)[0].numpy()) for s in SYMMETRIES]
    assert greedy_cost == copies[0] == x.cost(greedy_solution)  # the identity is the first symmetry
    assert best_cost == min(copies) == x.cost(best_solution) <= greedy_cost


def test_a_seed_the_csv_holds_in_full_is_read_back_and_a_partial_one_is_decoded_again():
    held = script_module("cvrplib_gaps")._held
    instances = load_cvrplib(["X-n101-k25", "X-n110-k13"])
    rows = [{"setting": "C10", "mode": mode, "method": method, "seed": 3, "name": x.name, "cost": 1.0}
            for mode in ("greedy", "augment8") for method in ("inv_sqrt_d", "eie") for x in instances]
    done = pd.DataFrame(rows)
    assert len(held(done, "C10", 3, ["inv_sqrt_d", "eie"], ["greedy", "augment8"], instances)) == 8
    assert len(held(done, "C10", 3, ["eie"], ["greedy"], instances)) == 2  # a subset asked for: its rows only
    assert held(done.iloc[1:], "C10", 3, ["inv_sqrt_d", "eie"], ["greedy", "augment8"], instances) is None
    assert held(done, "C10", 4, ["inv_sqrt_d"], ["greedy"], instances) is None  # another seed
    assert held(done, "C10", 3, ["log_N"], ["greedy"], instances) is None  # a method it lacks
    assert held(pd.DataFrame(), "C10", 3, ["eie"], ["greedy"], instances) is None


def test_a_csv_without_a_mode_column_is_read_as_greedy_so_only_the_symmetry_mode_is_decoded(tmp_path):
    script = script_module("cvrplib_gaps")
    instances = load_cvrplib(["X-n101-k25", "X-n110-k13"])
    old = pd.DataFrame([{"setting": "C2", "method": method, "seed": 0, "name": x.name, "n": x.n, "cost": 7}
                        for method in ("inv_sqrt_d", "eie") for x in instances])
    old.to_csv(tmp_path / "cvrplib.csv", index=False)
    done = script.read_done(tmp_path / "cvrplib.csv")
    assert list(done.columns[:2]) == ["setting", "mode"] and set(done["mode"]) == {"greedy"}
    assert done.setting.tolist() == ["C2"] * 4  # read as text, as the settings are named
    assert len(script._held(done, "C2", 0, ["inv_sqrt_d", "eie"], ["greedy"], instances)) == 4
    assert script._held(done, "C2", 0, ["inv_sqrt_d", "eie"], ["augment8"], instances) is None
    assert script.read_done(tmp_path / "absent.csv").empty and script.read_done(None).empty
