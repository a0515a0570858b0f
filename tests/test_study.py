"""The study driver the training notebooks call: settings from the problem, train and evaluate every
setting, files written where comparison (notebook 06) reads them, and a new problem served with no
edit outside its own class and its registry line."""

import numpy as np
import pandas as pd
import pytest

from eie import comparison, extrapolation, run_checks, study
from eie.checkpoints import kept_policy


def tiny_parameters(**overrides) -> dict:
    params = {"run": "tiny", "n_train": 6, "n_max": 12, "rules": ["inv_sqrt_d"], "training_free": ["log_N"],
              "seeds": [0], "seeds_by_rule": {}, "epochs": 1, "steps_per_epoch": 1, "batch_size": 4, "lr": 1e-4,
              "max_grad_norm": 1.0,
              "baseline_eval_size": 4, "lr_decay_on_p": False, "precision": "float32",
              "plateau_window": 0, "plateau_tolerance": 0.001, "lr_drops": 0, "lr_drop_factor": 0.25, "warmup_epochs": 0,
              "pointer_clip": "plain", "final_policy": "last",
              "sites": ["encoder", "glimpse"], "n_mode": "instance",
              "test_size": 4, "test_seed": 1234, "reference_size": 2, "eval_chunk": 4, "device": "cpu",
              "progress": False, "lkh_runs": 1}
    return {**params, **overrides}


@pytest.fixture
def results_in(tmp_path, monkeypatch):
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: (tmp_path / run).mkdir(
        parents=True, exist_ok=True) or tmp_path / run)
    return tmp_path


def test_each_training_notebook_has_its_problem_and_settings():
    assert {notebook: study.problem_for(notebook).name for notebook in
            ("03_train_tsp", "04_train_cvrp", "05_train_bpp")} == {"03_train_tsp": "tsp", "04_train_cvrp": "cvrp",
                                                                   "05_train_bpp": "bpp"}
    with pytest.raises(ValueError, match="03_train_tsp, 04_train_cvrp, 05_train_bpp"):
        study.problem_for("07_appendix")
    cvrp = study.training_setups("04_train_cvrp", tiny_parameters(
        capacities=[10, 20], lr_by_capacity={10: 1e-4, 20: 5e-5}, size_counts_depot=False))
    assert [(s["setting"], s["tag"], s["config"]["lr"], s["config"]["problem_options"]["capacity"]) for s in cvrp] == \
        [("C10", "_C10", 1e-4, 10), ("C20", "_C20", 5e-5, 20)]
    bpp = study.training_setups("05_train_bpp", tiny_parameters(bins=[[120, 100], [100, 100]]))
    assert [s["setting"] for s in bpp] == ["120x100", "100x100"]
    assert study.method_keys(tiny_parameters(rules=["ln_d"], training_free=["eie", "log_N"])) == ["ln_d"]
    assert study.method_keys(tiny_parameters(training_free=["eie"])) == ["inv_sqrt_d", "eie"]


def test_every_setting_is_trained_evaluated_and_written_where_comparison_reads_it(results_in):
    params = tiny_parameters(capacities=[10, 20], lr_by_capacity={10: 1e-4, 20: 5e-5}, size_counts_depot=False,
                             hgs_iterations=50, hgs_time_limit=None)
    models, logs = study.train_problem("04_train_cvrp", params)
    assert set(models) == {"C10", "C20"} and models["C20"][("inv_sqrt_d", 0)].problem.capacity == 20
    assert sorted(set(logs.setting)) == ["C10", "C20"] and len(logs) == 2
    written = pd.read_csv(results_in / "tiny" / "cvrp_training_log.csv")
    assert "seconds" not in written.columns and list(written.setting) == ["C10", "C20"]
    assert (results_in / "tiny" / "models" / "cvrp_C20_inv_sqrt_d_n6_seed0.pt").is_file()

    results, per_instance, references = study.evaluate_problem("04_train_cvrp", params, models)
    assert set(references) == {"C10", "C20"} and all(len(r) == 2 for r in references["C10"].values())
    assert set(per_instance) == {(s, m, 0, n) for s in ("C10", "C20") for m in ("inv_sqrt_d", "log_N") for n in (6, 12)}
    # log_N runs on the inv_sqrt_d model and equals it at the training length
    for setting in ("C10", "C20"):
        assert np.allclose(per_instance[(setting, "log_N", 0, 6)], per_instance[(setting, "inv_sqrt_d", 0, 6)])
    loaded, objectives = comparison.load_problem_results(results_in / "tiny", "cvrp")
    assert loaded.round(4).equals(results.round(4)) and set(objectives) == set(per_instance)
    text = comparison.problem_tables("cvrp", loaded, objectives)
    assert "### C10" in text and "### C20" in text and "HGS, mean over the instances it solved: n = 6:" in text


def test_the_logs_say_which_policy_each_model_keeps(results_in):
    """`policy_epoch` in the training logs: the last epoch by default; with final_policy = "baseline"
    the epoch the kept (exported) policy became the rollout baseline; `kept_held_out` reads that row."""
    models, logs = study.train_problem("03_train_tsp", tiny_parameters(epochs=3))
    assert list(logs.policy_epoch) == [3, 3, 3]
    assert study.kept_held_out(logs, ["rule", "seed"]).loc["inv_sqrt_d", 0] == logs.eval_cost.iloc[-1]
    models, logs = study.train_problem("03_train_tsp", tiny_parameters(epochs=3, final_policy="baseline", run="kept"))
    exported = results_in / "kept" / "models" / "tsp_inv_sqrt_d_n6_seed0.pt"
    updates = list(logs.epoch[logs.baseline_updated])
    assert kept_policy(exported) == {"policy": "baseline", "epoch": updates[-1] if updates else 0}
    assert (logs.policy_epoch == kept_policy(exported)["epoch"]).all()
    made_up = pd.DataFrame({"rule": ["a"] * 3 + ["b"] * 3, "seed": 0, "epoch": [1, 2, 3] * 2,
                            "eval_cost": [5.0, 4.0, 6.0, 7.0, 8.0, 9.0], "policy_epoch": [2] * 3 + [3] * 3})
    assert study.kept_held_out(made_up, ["rule", "seed"])[0].to_dict() == {"a": 4.0, "b": 9.0}


def test_a_rule_may_have_fewer_seeds_than_the_others(results_in):
    params = tiny_parameters(rules=["inv_sqrt_d", "ln_d"], seeds=[0, 1], seeds_by_rule={"ln_d": [1]},
                             training_free=["log_N"])
    assert study.seeds_by_rule(params) == {"inv_sqrt_d": [0, 1], "ln_d": [1]}
    assert study.model_pairs(params["rules"], study.seeds_by_rule(params)) == \
        [("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("ln_d", 1)]
    assert study.model_pairs(["a", "b"], [1, 0]) == [("a", 1), ("b", 1), ("a", 0), ("b", 0)]  # as given

    models, logs = study.train_problem("03_train_tsp", params)
    assert set(models[""]) == {("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("ln_d", 1)}
    assert "inv_sqrt_d x 2 seeds + ln_d x 1 seed x 1 epochs" in run_checks.check_training_log(
        logs, params["rules"], study.seeds_by_rule(params), 1)
    with pytest.raises(run_checks.RunCheckFailed, match="ln_d, seed 0"):  # a model the log does not have
        run_checks.check_training_log(logs, params["rules"], [0, 1], 1)
    with pytest.raises(run_checks.RunCheckFailed, match="not asked for"):
        run_checks.check_training_log(logs, ["inv_sqrt_d"], [0, 1], 1)
    assert (results_in / "tiny" / "models" / "tsp_ln_d_n6_seed1.pt").is_file()  # each rule's first seed exported

    results, per_instance, references = study.evaluate_problem("03_train_tsp", params, models)
    seeds = results[results.method != "reference"].groupby("method").seed.agg(lambda s: sorted(set(s)))
    assert seeds.to_dict() == {"inv_sqrt_d": [0, 1], "log_N": [0, 1], "ln_d": [1]}
    assert (results.method == "reference").sum() == 2  # once per n, not once per group of methods
    assert list(zip(results.method[:6], results.seed[:6], strict=True)) == [  # by n, then method in the declared order
        ("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("ln_d", 1), ("log_N", 0), ("log_N", 1), ("reference", -1)]
    assert set(per_instance) == {("", m, s, n) for m, s in [("inv_sqrt_d", 0), ("inv_sqrt_d", 1), ("log_N", 0),
                                                            ("log_N", 1), ("ln_d", 1)] for n in (6, 12)}
    assert "3 methods x 1-2 seeds" in run_checks.check_extrapolation(results, 6)
    # the same pieces as one evaluation of the ln_d model alone
    ln_d_only = {key: model for key, model in models[""].items() if key[0] == "ln_d"}
    alone, _, _ = extrapolation.evaluate(ln_d_only, extrapolation.bind_methods(["ln_d"], 16, 6), 6, 12, test_size=4, reference_size=2,
                                 device="cpu", progress=False)
    assert np.allclose(alone[alone.method == "ln_d"].objective, results[results.method == "ln_d"].objective)
    text = comparison.problem_tables("tsp", results, per_instance)
    assert "1-2 seeds per method" in text
