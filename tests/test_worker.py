"""A preset trains the same models from a background worker as from its notebook."""

import os
import shutil

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from script_module import script_module

from eie import experiments, extrapolation, stop_request, study, training, worker
from eie.checkpoints import checkpoint_epochs
from eie.evaluation_store import model_fingerprint
from eie.files import exclusive


def tiny_tsp_preset(tmp_path, monkeypatch, **settings):
    """A preset of tiny TSP models (one per seed, 1/sqrt(d), N = 6), results under tmp_path; `settings`
    replace the defaults."""
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({"run": "tiny", "n_train": 6, "n_max": 12, "seeds": [0], "rules": ["inv_sqrt_d"],
                                      "epochs": 1, "steps_per_epoch": 1, "batch_size": 4, "baseline_eval_size": 4,
                                      "device": "cpu", **settings}))
    return preset


def test_worker_trains_what_the_notebook_would(tmp_path, monkeypatch):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, steps_per_epoch=2, batch_size=8, baseline_eval_size=8)
    params = experiments.load("03_train_tsp", preset)
    assert params["n_train"] == 6 and params["lr"] == experiments.TSPTraining().lr
    worker.run_worker(preset, "03_train_tsp")
    checkpoint = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0.pt"
    assert checkpoint.is_file()
    (setup,) = study.training_setups("03_train_tsp", params)
    same, _ = study.train_models(["inv_sqrt_d"], [0], run="fresh", device="cpu", progress=False, **setup["config"])
    from eie.training import load_trained
    for p, q in zip(load_trained(checkpoint).state_dict().values(), same[("inv_sqrt_d", 0)].state_dict().values(), strict=True):
        assert torch.equal(p, q)


def test_a_busy_model_is_left_to_its_worker(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1])
    held = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed1.pt"
    calls = []

    def release_after_first_wait(seconds):
        calls.append(seconds)
        lock.__exit__(None, None, None)  # the other worker finishes
        return False  # no stop asked for while waiting

    lock = exclusive(held, "trained")
    lock.__enter__()
    monkeypatch.setattr(worker, "wait_for_stop", release_after_first_wait)
    worker.run_worker(preset, "03_train_tsp")
    assert calls and held.is_file()
    assert "held by another worker" in capsys.readouterr().out


def test_a_worker_goes_on_to_its_next_notebook_while_another_holds_the_last_model_of_this_one(
        tmp_path, monkeypatch, capsys):
    """Two notebooks, the only model of the first held by another worker: the second notebook's model
    is trained before the worker first waits (it does not idle while a model is free)."""
    preset = tiny_tsp_preset(tmp_path, monkeypatch, per_notebook={"08_rivals": {"rules": ["inv_sqrt_d", "ssmax"],
                                                                                "training_free": []}})
    checkpoints = tmp_path / "tiny" / "checkpoints"
    held, free = checkpoints / "tsp_inv_sqrt_d_n6_seed0.pt", checkpoints / "tsp_ssmax_n6_seed0.pt"
    seen_at_first_wait = []

    def release_after_first_wait(seconds):
        seen_at_first_wait.append(free.is_file())
        lock.__exit__(None, None, None)  # the other worker finishes
        return False

    checkpoints.mkdir(parents=True)
    lock = exclusive(held, "trained")
    lock.__enter__()
    monkeypatch.setattr(worker, "wait_for_stop", release_after_first_wait)
    monkeypatch.setattr(worker, "use_threads", lambda count: None)  # this test process keeps its threads
    worker.main([str(preset), "03_train_tsp", "08_rivals"])
    assert seen_at_first_wait == [True]  # one wait, after the free model of the next notebook was trained
    assert held.is_file() and free.is_file()
    out = capsys.readouterr().out
    assert out.index("held by another worker") < out.index("training 08_rivals ssmax seed 0")


def test_seeds_restricts_a_worker_to_some_of_the_presets_seeds(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1, 2])
    worker.main([str(preset), "03_train_tsp", "--seeds", "2", "0"])
    trained = sorted(path.name for path in (tmp_path / "tiny" / "checkpoints").glob("*.pt"))
    assert trained == ["tsp_inv_sqrt_d_n6_seed0.pt", "tsp_inv_sqrt_d_n6_seed2.pt"]
    # a seed one of the notebooks does not train: refused before the first notebook trains anything
    preset.write_text(yaml.safe_dump({**yaml.safe_load(preset.read_text()),
                                      "per_notebook": {"05_train_bpp": {"seeds": [0]}}}))
    with pytest.raises(SystemExit):
        worker.main([str(preset), "03_train_tsp", "05_train_bpp", "--seeds", "1"])
    assert "05_train_bpp: the preset trains seeds [0], not [1]" in capsys.readouterr().err
    assert not (tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed1.pt").exists()
    with pytest.raises(SystemExit):  # status and carrying cover every seed
        worker.main([str(preset), "03_train_tsp", "--status", "--seeds", "0"])
    # a rule trained with fewer seeds (seeds_by_rule) is skipped for the others, not refused
    preset.write_text(yaml.safe_dump({**yaml.safe_load(preset.read_text()), "run": "fewer", "rules": ["inv_sqrt_d", "ln_d"],
                                      "seeds_by_rule": {"ln_d": [0]}}))
    worker.main([str(preset), "03_train_tsp", "--seeds", "1"])
    assert [path.name for path in (tmp_path / "fewer" / "checkpoints").glob("*.pt")] == ["tsp_inv_sqrt_d_n6_seed1.pt"]
    with pytest.raises(ValueError, match="not \\[5\\]"):
        worker.run_worker(preset, "03_train_tsp", seeds=[5])


def test_rules_restricts_a_worker_to_some_of_the_presets_rules(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1])
    preset.write_text(yaml.safe_dump({**yaml.safe_load(preset.read_text()), "rules": ["inv_sqrt_d", "ln_d"]}))
    worker.main([str(preset), "03_train_tsp", "--rules", "ln_d", "--seeds", "1"])
    assert [path.name for path in (tmp_path / "tiny" / "checkpoints").glob("*.pt")] == ["tsp_ln_d_n6_seed1.pt"]
    # a rule the preset does not train: refused before anything trains, naming the preset's rules
    with pytest.raises(SystemExit):
        worker.main([str(preset), "03_train_tsp", "--rules", "ln_sqrt_d"])
    assert "the preset trains rules ['inv_sqrt_d', 'ln_d'], not ['ln_sqrt_d']" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # status and carrying cover every rule
        worker.main([str(preset), "03_train_tsp", "--save-carry", "--rules", "ln_d"])
    with pytest.raises(ValueError, match="not \\['rope'\\]"):
        worker.run_worker(preset, "03_train_tsp", rules=["rope"])


def test_status_says_where_each_model_stands(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    preset = tmp_path / "tiny.yaml"
    settings = {"run": "tiny", "n_train": 6, "n_max": 12, "seeds": [0, 1], "rules": ["inv_sqrt_d"], "epochs": 3,
                "steps_per_epoch": 1, "batch_size": 4, "baseline_eval_size": 4, "device": "cpu"}
    preset.write_text(yaml.safe_dump(settings))
    assert list(worker.training_status(preset, "03_train_tsp").state) == ["not started", "not started"]
    preset.write_text(yaml.safe_dump({**settings, "rules": ["inv_sqrt_d", "ln_d"], "seeds_by_rule": {"ln_d": [1]}}))
    assert list(worker.training_status(preset, "03_train_tsp").model) == \
        ["tsp_inv_sqrt_d_n6_seed0", "tsp_inv_sqrt_d_n6_seed1", "tsp_ln_d_n6_seed1"]  # ln_d only with its own seed
    preset.write_text(yaml.safe_dump(settings))
    worker.main([str(preset), "03_train_tsp", "--status"])
    assert "0 of 2 models trained; hours left unknown" in capsys.readouterr().out
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False,
                       **{**setup["config"], "epochs": 2})  # seed 0 interrupted after 2 of 3 epochs
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["in progress", "not started"] and list(status.done) == [2, 0]
    pace = status.s_per_epoch[0]
    assert pace > 0 and status.hours_left[0] == round(pace / 3600, 2)
    assert status.hours_left[1] == round(3 * pace / 3600, 2)  # not started: at the others' pace
    logged = pd.read_csv(tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0_log.csv").seconds
    assert len(logged) == 2 and list(status.hours_spent) == [pytest.approx(logged.sum() / 3600), 0.0]
    # on a new machine the unfinished model is where the carried copy left it, not "not started"
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    checkpoints = tmp_path / "tiny" / "checkpoints"
    checkpoints.rename(tmp_path / "first_machine")
    carried = worker.training_status(preset, "03_train_tsp")
    assert list(carried.state) == ["carried", "not started"] and list(carried.done) == [2, 0]
    assert carried.hours_left[0] == status.hours_left[0]
    (tmp_path / "first_machine").rename(checkpoints)
    worker.run_worker(preset, "03_train_tsp")
    assert list(worker.training_status(preset, "03_train_tsp").state) == ["finished", "finished"]
    worker.main([str(preset), "03_train_tsp", "--status"])
    printed = capsys.readouterr().out
    assert "2 of 2 models trained; at most 0.0 h" in printed
    assert "h of epoch time spent in all" in printed and "hours_spent" in printed
    # a model the plateau rule stopped is trained, with no hours left though it ran fewer epochs
    preset.write_text(yaml.safe_dump({**settings, "epochs": 50, "plateau_window": 1, "plateau_tolerance": 0.49}))
    worker.run_worker(preset, "03_train_tsp")
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["stopped", "stopped"] and (status.done < 50).all() and status.hours_left.sum() == 0


def test_status_plot_draws_the_epochs_trained_so_far(tmp_path, monkeypatch, capsys):
    from eie import plotting

    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1], epochs=3)
    monkeypatch.setattr(plotting, "figures_dir", lambda: tmp_path)
    with pytest.raises(ValueError, match="no model of run 'tiny' has run an epoch yet"):
        worker.progress_figure(preset, "03_train_tsp")
    assert worker.training_logs(preset, "03_train_tsp").empty
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False,
                       **{**setup["config"], "epochs": 2})  # seed 0 interrupted after 2 of 3 epochs
    logs = worker.training_logs(preset, "03_train_tsp")
    checkpoint_log = pd.read_csv(tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0_log.csv")
    assert list(logs.epoch) == [1, 2] and set(logs.seed) == {0} and set(logs.rule) == {"inv_sqrt_d"}
    assert list(logs.setting) == ["", ""]
    np.testing.assert_allclose(logs.eval_cost, checkpoint_log.eval_cost)
    fig, _path = worker.progress_figure(preset, "03_train_tsp")
    (line, *_) = fig.axes[0].get_lines()  # the held-out objective, not negated for a minimised problem
    np.testing.assert_allclose(line.get_ydata(), checkpoint_log.eval_cost)
    assert fig.axes[0].get_ylabel() == "held-out greedy tour length"
    worker.main([str(preset), "03_train_tsp", "--status", "--plot"])
    assert "training so far drawn to" in capsys.readouterr().out
    assert (tmp_path / "03_tsp_training_progress_tiny.png").stat().st_size > 0
    # on a new machine the curves come from the carried copy, where a worker would resume
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    shutil.rmtree(tmp_path / "tiny" / "checkpoints")
    np.testing.assert_allclose(worker.training_logs(preset, "03_train_tsp").eval_cost, checkpoint_log.eval_cost)
    for other in (["--plot"], ["--plot", "--save-carry"]):  # the figure goes with the status table
        with pytest.raises(SystemExit):
            worker.main([str(preset), "03_train_tsp", *other])
        assert "give --status --plot" in capsys.readouterr().err


def test_status_plot_shows_bin_packing_load_rate_rising(tmp_path, monkeypatch):
    from eie import plotting

    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    monkeypatch.setattr(plotting, "figures_dir", lambda: tmp_path)
    setup, *_ = study.training_setups("05_train_bpp", experiments.load("05_train_bpp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, tag=setup["tag"],
                       **{**setup["config"], "epochs": 1})
    fig, path = worker.progress_figure(preset, "05_train_bpp")
    log = worker.training_logs(preset, "05_train_bpp")
    assert list(log.setting) == [setup["setting"]] and path.name == "05_bpp_training_progress_tiny.png"
    (line, *_) = fig.axes[0].get_lines()  # the load rate in %, the negated cost
    assert line.get_ydata()[0] == pytest.approx(-log.eval_cost[0]) and 0 < line.get_ydata()[0] <= 100
    assert fig.axes[0].get_ylabel() == "held-out greedy load rate (%)"


def test_status_reads_the_checkpoints_log_where_the_csv_was_cut_off(tmp_path, monkeypatch):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=3)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **{**setup["config"], "epochs": 2})
    log_csv = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0_log.csv"
    assert len(pd.read_csv(log_csv)) == 2 and not list(log_csv.parent.glob("*.tmp"))  # written whole, no temporary left
    log_csv.write_text("")  # what a worker killed while writing it left behind before the CSV was written atomically
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["in progress"] and list(status.done) == [2]
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    assert len(pd.read_csv(tmp_path / "tiny" / "carry" / "tsp_inv_sqrt_d_n6_seed0_log.csv")) == 2


def test_several_notebooks_are_checked_before_any_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    preset = tmp_path / "two.yaml"
    settings = {"run": "two", "n_train": 6, "n_max": 12, "seeds": [0], "rules": ["inv_sqrt_d"], "epochs": 1,
                "steps_per_epoch": 1, "batch_size": 4, "baseline_eval_size": 4, "device": "cpu",
                "per_notebook": {"04_train_cvrp": {"capacities": [0]}}}  # no vehicle has capacity 0
    preset.write_text(yaml.safe_dump(settings))
    with pytest.raises(SystemExit):
        worker.main([str(preset), "03_train_tsp", "04_train_cvrp"])
    assert "capacities = [0] is invalid" in capsys.readouterr().err  # named before anything runs
    assert not (tmp_path / "two").exists()  # the TSP models were not trained first
    worker.main([str(preset), "03_train_tsp", "05_train_bpp", "--status"])
    out = capsys.readouterr().out
    assert "== 03_train_tsp" in out and "== 05_train_bpp" in out and out.count("0 of 1 models trained") == 2
    with pytest.raises(SystemExit):
        worker.main([str(preset), "03_train_tsp", "--threads", "0"])


def tiny_cvrp_preset(tmp_path, monkeypatch):
    """A preset of one tiny CVRP model (C_v = 10), HGS on 2 of 4 test instances, results under tmp_path."""
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    preset = tmp_path / "tiny.yaml"
    preset.write_text(yaml.safe_dump({"run": "tiny", "n_train": 6, "n_max": 12, "seeds": [0], "rules": ["inv_sqrt_d"],
                                      "training_free": [], "capacities": [10], "epochs": 1, "steps_per_epoch": 1,
                                      "batch_size": 4, "baseline_eval_size": 4, "test_size": 4, "reference_size": 2,
                                      "hgs_iterations": 50, "device": "cpu", "progress": False}))
    return preset


def test_references_solved_beside_the_training_are_read_back_by_the_evaluation(tmp_path, monkeypatch, capsys):
    preset = tiny_cvrp_preset(tmp_path, monkeypatch)
    worker.main([str(preset), "04_train_cvrp", "--references"])
    out = capsys.readouterr().out
    assert "04_train_cvrp C10: reference mean objective n = 6: " in out and "(2 instances)" in out
    assert not (tmp_path / "tiny" / "checkpoints" / "cvrp_C10_inv_sqrt_d_n6_seed0.pt").exists()  # nothing trained
    params = experiments.load("04_train_cvrp", preset)
    models, _ = study.train_problem("04_train_cvrp", params)
    problem_class = study.problem_for("04_train_cvrp")

    def solver_called_again(self, *args, **kwargs):
        raise AssertionError("the reference was solved again instead of read back")

    solved = study.compute_references("04_train_cvrp", params)  # what the worker stored
    monkeypatch.setattr(problem_class, "reference_costs", solver_called_again)
    assert study.compute_references("04_train_cvrp", params).keys() == solved.keys()
    results, _, references = study.evaluate_problem("04_train_cvrp", params, models)
    for n, values in solved["C10"].items():
        assert len(values) == 2 and (references["C10"][n] == values).all()
    assert set(results.method) == {"inv_sqrt_d", "reference"}
    written = pd.read_csv(tmp_path / "tiny" / "cvrp.csv")
    again = script_module("recompute_gaps").recompute_gaps("04_train_cvrp", params)  # the same reference: the same table
    assert np.allclose(again[["objective", "gap_pct"]].to_numpy(), written[["objective", "gap_pct"]].to_numpy(), atol=1e-4)


def test_recompute_gaps_replaces_the_reference_and_keeps_the_methods(tmp_path, monkeypatch):
    preset = tiny_cvrp_preset(tmp_path, monkeypatch)
    params = experiments.load("04_train_cvrp", preset)
    with pytest.raises(FileNotFoundError, match="run the notebook"):
        script_module("recompute_gaps").recompute_gaps("04_train_cvrp", params)
    models, _ = study.train_problem("04_train_cvrp", params)
    before, objectives, _ = study.evaluate_problem("04_train_cvrp", params, models)
    problem_class = study.problem_for("04_train_cvrp")
    monkeypatch.setattr(problem_class, "reference_costs",  # a stand-in solver: twice the model's own cost
                        lambda self, instance, **options: 2 * np.ones(len(instance["coords"])))
    after = script_module("recompute_gaps").recompute_gaps("04_train_cvrp", {**params, "hgs_iterations": 60})
    methods = after.method != "reference"
    assert (after[~methods].objective == 2.0).all()
    assert np.allclose(after[methods].objective, before[methods].objective, atol=1e-4)
    for row in after[methods].itertuples():
        expected = 100 * (objectives[("C10", row.method, row.seed, row.n)][:2].mean() / 2 - 1)
        assert abs(row.gap_pct - expected) < 1e-3
    assert pd.read_csv(tmp_path / "tiny" / "cvrp.csv").gap_pct.round(3).tolist() == after.gap_pct.round(3).tolist()


def test_a_carried_checkpoint_resumes_exactly_on_a_machine_without_checkpoints(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1], epochs=3)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False,
                       **{**setup["config"], "epochs": 2})  # seed 0 interrupted after 2 of 3 epochs
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    out = capsys.readouterr().out
    assert "tsp_inv_sqrt_d_n6_seed0 (in progress, 2 epochs): checkpoint carried" in out
    carry = tmp_path / "tiny" / "carry"
    assert sorted(p.name for p in carry.iterdir()) == ["tsp_inv_sqrt_d_n6_seed0.pt", "tsp_inv_sqrt_d_n6_seed0_log.csv"]
    carried_bytes = [path.stat().st_size for path in carry.iterdir()]
    assert f"this carry wrote {worker.carry_size(carried_bytes)} to commit" in out and sum(carried_bytes) > 10_000
    checkpoints = tmp_path / "tiny" / "checkpoints"
    checkpoints.rename(tmp_path / "this_machine")  # the next machine has only what was committed
    worker.main([str(preset), "03_train_tsp", "--save-carry"])  # nothing here yet: the carried copy is kept
    assert (carry / "tsp_inv_sqrt_d_n6_seed0.pt").is_file()
    worker.run_worker(preset, "03_train_tsp")
    assert "resuming after epoch 2 from the checkpoint carried" in capsys.readouterr().out
    log = pd.read_csv(checkpoints / "tsp_inv_sqrt_d_n6_seed0_log.csv")
    kept = pd.read_csv(tmp_path / "this_machine" / "tsp_inv_sqrt_d_n6_seed0_log.csv")
    assert len(log) == 3 and log.head(2).drop(columns="seconds").equals(kept.drop(columns="seconds"))
    # the same model as finishing it on the first machine
    from eie.training import TrainConfig, load_trained, train
    same = train(TrainConfig(rule="inv_sqrt_d", seed=0, **setup["config"]), tmp_path / "this_machine",
                 name="tsp_inv_sqrt_d_n6_seed0", device="cpu", progress=False).model
    for p, q in zip(load_trained(checkpoints / "tsp_inv_sqrt_d_n6_seed0.pt").state_dict().values(),
                    same.state_dict().values(), strict=True):
        assert torch.equal(p, q)
    worker.main([str(preset), "03_train_tsp", "--save-carry"])  # both trained: both exported, no checkpoint carried
    out = capsys.readouterr().out
    assert "seed0 (finished, 3 epochs): policy exported" in out and "seed1 (finished, 3 epochs): policy exported" in out
    assert "seed0: carried checkpoint deleted" in out
    assert not list(carry.iterdir())  # the carried copy of seed 0 (2 epochs) is superseded by its export
    models = tmp_path / "tiny" / "models"
    assert sorted(p.name for p in models.iterdir()) == ["tsp_inv_sqrt_d_n6_seed0.pt", "tsp_inv_sqrt_d_n6_seed1.pt"]
    assert all((models / name).stat().st_size < (checkpoints / name).stat().st_size / 2 for name in os.listdir(models))
    worker.main([str(preset), "03_train_tsp", "--save-carry"])  # the same checkpoints: nothing exported again
    assert "nothing to save" in capsys.readouterr().out
    trained = {name: load_trained(checkpoints / f"{name}.pt").state_dict()
               for name in ("tsp_inv_sqrt_d_n6_seed0", "tsp_inv_sqrt_d_n6_seed1")}
    shutil.rmtree(checkpoints)  # a third machine, for the evaluation: the finished models are not trained again
    assert list(worker.training_status(preset, "03_train_tsp").state) == ["exported", "exported"]
    worker.run_worker(preset, "03_train_tsp")
    out = capsys.readouterr().out
    assert out.count("trained to the end already, read from") == 2 and "resuming" not in out
    assert not list(checkpoints.glob("*.pt"))  # nothing trained
    models_read, log = study.train_models(["inv_sqrt_d"], [0, 1], run="tiny", device="cpu", progress=False,
                                          **setup["config"])
    assert len(log) == 6  # each model's 3 epochs, from its export
    for (rule, seed), model in models_read.items():
        state = trained[f"tsp_{rule}_n6_seed{seed}"]
        assert all(torch.equal(p, q) for p, q in zip(model.state_dict().values(), state.values(), strict=True))


def test_save_carry_replaces_an_export_that_is_not_the_models_end_and_carries_whole_where_git_ignores_models(
        tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=50, plateau_window=1, plateau_tolerance=0.49)
    worker.run_worker(preset, "03_train_tsp")  # stopped by the plateau rule
    name = "tsp_inv_sqrt_d_n6_seed0"
    checkpoints, carry, models = (tmp_path / "tiny" / folder for folder in ("checkpoints", "carry", "models"))
    (row,) = worker.training_status(preset, "03_train_tsp").itertuples()
    assert row.state == "stopped" and row.done < 50
    monkeypatch.setattr(worker, "_ignored_by_git", lambda path: True)  # models/ cannot be committed here
    capsys.readouterr()
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    assert f"{name} (stopped, {row.done} epochs): checkpoint carried" in capsys.readouterr().out
    assert (carry / f"{name}.pt").is_file() and not models.exists()
    monkeypatch.setattr(worker, "_ignored_by_git", lambda path: False)
    state = torch.load(checkpoints / f"{name}.pt", weights_only=False)
    models.mkdir()
    torch.save({key: state[key] for key in ("format", "config", "epoch", "model")}, models / f"{name}.pt")  # no log
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    out = capsys.readouterr().out
    assert "policy exported to models/ (replacing one that was not this model's end)" in out
    assert "carried checkpoint deleted" in out and not (carry / f"{name}.pt").exists()
    assert len(torch.load(models / f"{name}.pt", weights_only=False)["log"]) == row.done


def test_save_carry_keeps_a_carried_checkpoint_further_than_a_model_finished_here(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    name = "tsp_inv_sqrt_d_n6_seed0"
    checkpoints, carry = tmp_path / "tiny" / "checkpoints", tmp_path / "tiny" / "carry"
    worker.run_worker(preset, "03_train_tsp")  # finished here at 2 epochs
    shutil.copytree(checkpoints, tmp_path / "this_machine")
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **{**setup["config"], "epochs": 3})
    carry.mkdir()
    for suffix in (".pt", "_log.csv"):  # another machine went on to epoch 3 and carried it
        shutil.copy(checkpoints / f"{name}{suffix}", carry / f"{name}{suffix}")
    shutil.rmtree(checkpoints)
    shutil.copytree(tmp_path / "this_machine", checkpoints)
    capsys.readouterr()
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    assert "nothing to save" in capsys.readouterr().out
    assert checkpoint_epochs(carry / f"{name}.pt") == 3 and not (tmp_path / "tiny" / "models").exists()


def test_a_machine_that_comes_back_with_an_older_checkpoint_resumes_from_the_further_carried_one(tmp_path, monkeypatch,
                                                                                                 capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=3)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    checkpoints, carry = tmp_path / "tiny" / "checkpoints", tmp_path / "tiny" / "carry"
    name = "tsp_inv_sqrt_d_n6_seed0"
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **{**setup["config"], "epochs": 1})
    shutil.copytree(checkpoints, tmp_path / "first_machine")  # the first machine stops after epoch 1
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **{**setup["config"], "epochs": 2})
    worker.main([str(preset), "03_train_tsp", "--save-carry"])  # a second machine carries epoch 2
    shutil.rmtree(checkpoints)
    shutil.copytree(tmp_path / "first_machine", checkpoints)  # and the first machine comes back
    capsys.readouterr()
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    out = capsys.readouterr().out
    assert "nothing to save" in out and "2 epochs, this machine's 1" in out
    assert checkpoint_epochs(carry / f"{name}.pt") == 2  # not overwritten by the older one
    worker.run_worker(preset, "03_train_tsp")
    assert "resuming after epoch 2 from the checkpoint carried" in capsys.readouterr().out
    log = pd.read_csv(checkpoints / f"{name}_log.csv")
    assert len(log) == 3 and log.head(2).drop(columns="seconds").equals(
        pd.read_csv(carry / f"{name}_log.csv").drop(columns="seconds"))


def test_carried_references_are_read_back_on_a_machine_without_checkpoints(tmp_path, monkeypatch, capsys):
    preset = tiny_cvrp_preset(tmp_path, monkeypatch)
    worker.main([str(preset), "04_train_cvrp", "--references"])
    params = experiments.load("04_train_cvrp", preset)
    solved = study.compute_references("04_train_cvrp", params)
    worker.main([str(preset), "04_train_cvrp", "--save-carry"])
    assert "nothing to save" in capsys.readouterr().out  # no model in training, but the references are carried
    carried = sorted((tmp_path / "tiny" / "carry" / "evaluation").glob("*.pt"))
    assert carried
    stale = carried[0].with_name("0" * 24 + ".pt")  # a piece whose key now hashes elsewhere (its code was edited)
    stale.write_bytes(carried[0].read_bytes())
    worker.main([str(preset), "04_train_cvrp", "--save-carry"])
    assert not stale.exists() and sorted((tmp_path / "tiny" / "carry" / "evaluation").glob("*.pt")) == carried
    (tmp_path / "tiny" / "checkpoints").rename(tmp_path / "first_machine")

    def solver_called_again(self, *args, **kwargs):
        raise AssertionError("the reference was solved again instead of read from the carried pieces")

    monkeypatch.setattr(study.problem_for("04_train_cvrp"), "reference_costs", solver_called_again)
    again = study.compute_references("04_train_cvrp", params)
    for n, values in solved["C10"].items():
        assert len(values) == 2 and (again["C10"][n] == values).all()


def test_a_model_exported_after_its_training_ended_is_not_trained_again_where_its_checkpoint_is_gone(tmp_path,
                                                                                                      monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    name, checkpoints = "tsp_inv_sqrt_d_n6_seed0", tmp_path / "tiny" / "checkpoints"
    trained, log = study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    (exported,) = study.export_policies([name], run="tiny")
    shutil.rmtree(checkpoints)  # a new machine: the checkpoints are gone, the exported policy was committed
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["exported"] and list(status.done) == [2] and status.hours_left.sum() == 0
    capsys.readouterr()
    again, again_log = study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False,
                                          **setup["config"])
    assert f"{name}: trained to the end already, read from {exported}" in capsys.readouterr().out
    assert not (checkpoints / f"{name}.pt").exists()  # nothing trained
    assert again_log.drop(columns="seconds").equals(log.drop(columns="seconds"))
    assert all(torch.equal(p, q) for p, q in zip(again[("inv_sqrt_d", 0)].state_dict().values(),
                                                 trained[("inv_sqrt_d", 0)].state_dict().values(), strict=True))
    assert study.export_policies([name], run="tiny") == [exported]  # left as it is
    # a longer run of the same model cannot continue from a policy without its optimiser: it trains
    longer = {**setup["config"], "epochs": 3}
    assert training.finished_training(exported, training.TrainConfig(rule="inv_sqrt_d", seed=0, **longer)) is None
    # a policy exported before the log was kept is not taken for a finished training
    payload = torch.load(exported, weights_only=True)
    del payload["log"]
    torch.save(payload, exported)
    config = training.TrainConfig(rule="inv_sqrt_d", seed=0, **setup["config"])
    assert training.finished_training(exported, config) is None


def test_a_model_finished_elsewhere_is_not_trained_on_from_an_unfinished_checkpoint_here(tmp_path, monkeypatch,
                                                                                         capsys):
    """A model this machine had started, then finished on another (a GPU machine) and exported: the export
    is what the status shows and a worker reads; the checkpoint here is behind it and is not trained on."""
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    name, checkpoints = "tsp_inv_sqrt_d_n6_seed0", tmp_path / "tiny" / "checkpoints"
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    (exported,) = study.export_policies([name], run="tiny")
    finished = torch.load(exported, weights_only=True)["model"]
    shutil.rmtree(checkpoints)
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False,
                       **{**setup["config"], "epochs": 1})  # this machine's own start, one epoch
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["exported"] and list(status.done) == [2] and status.hours_left.sum() == 0
    capsys.readouterr()
    worker.run_worker(preset, "03_train_tsp")
    assert (f"{name}: trained to the end already, read from {exported} (this machine's unfinished checkpoint, "
            "1 epochs, is left as it is)") in capsys.readouterr().out
    assert checkpoint_epochs(checkpoints / f"{name}.pt") == 1  # not trained on
    read, _ = study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    assert all(torch.equal(read[("inv_sqrt_d", 0)].state_dict()[key], value) for key, value in finished.items())
    # the notebook's export step keeps the finished export, not this machine's older checkpoint
    assert study.export_policies([name], run="tiny") == [exported]
    assert checkpoint_epochs(exported) == 2
    assert all(torch.equal(torch.load(exported, weights_only=True)["model"][key], value)
               for key, value in finished.items())


def test_a_worker_limits_the_bin_packing_kernel_to_its_threads_as_well_as_torch():
    numba = pytest.importorskip("numba")
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("one core: numba has a single thread whatever the worker asks")
    before = torch.get_num_threads(), numba.get_num_threads()
    try:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        worker.use_threads(1)
        assert torch.get_num_threads() == 1 and numba.get_num_threads() == 1
    finally:
        torch.set_num_threads(before[0])
        numba.set_num_threads(before[1])


def test_finished_models_are_evaluated_beside_the_training_and_read_back_by_the_notebook(tmp_path, monkeypatch,
                                                                                        capsys):
    from eie import paths
    monkeypatch.setattr(paths, "results_dir", lambda run="default", create=True: tmp_path / run)  # the fitted scales
    preset = tiny_tsp_preset(tmp_path, monkeypatch, seeds=[0, 1], training_free=["log_N"], test_size=4,
                             reference_size=2, progress=False)
    params = experiments.load("03_train_tsp", preset)
    worker.run_worker(preset, "03_train_tsp", seeds=[0])  # seed 1 not trained yet
    decoded = []
    real_greedy_costs = extrapolation.greedy_costs

    def recording(model, instances, method, **options):
        decoded.append((model_fingerprint(model), method.key, next(iter(instances.values())).shape[1]))
        return real_greedy_costs(model, instances, method, **options)

    monkeypatch.setattr(extrapolation, "greedy_costs", recording)
    worker.main([str(preset), "03_train_tsp", "--evaluate"])
    out = capsys.readouterr().out
    assert "2 of 2 methods evaluated on 1 finished model(s); not finished: inv_sqrt_d seed 1" in out
    assert not (tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed1.pt").exists()  # nothing trained
    seed0 = model_fingerprint(study.finished_models("03_train_tsp", params)[""][("inv_sqrt_d", 0)])
    assert sorted(decoded) == sorted((seed0, key, n) for key in ("inv_sqrt_d", "log_N") for n in (6, 12))
    decoded.clear()
    worker.run_worker(preset, "03_train_tsp")  # seed 1 trains; the notebook decodes only its pieces
    models, _ = study.train_problem("03_train_tsp", params)
    results, _, _ = study.evaluate_problem("03_train_tsp", params, models)
    seed1 = model_fingerprint(models[""][("inv_sqrt_d", 1)])
    assert sorted(decoded) == sorted((seed1, key, n) for key in ("inv_sqrt_d", "log_N") for n in (6, 12))
    assert sorted(set(results.seed)) == [-1, 0, 1] and results.objective.notna().all()
    decoded.clear()
    worker.main([str(preset), "03_train_tsp", "--evaluate"])
    assert "every model finished" in capsys.readouterr().out and not decoded  # every piece read back
    with pytest.raises(SystemExit):  # one mode at a time
        worker.main([str(preset), "03_train_tsp", "--evaluate", "--status"])
    assert "give one of --status, --evaluate, not several" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["header", "cut", "binary"])
def test_a_damaged_epoch_log_does_not_hide_a_finished_model(tmp_path, monkeypatch, damage):
    """The checkpoint holds its own log: --status reads it, and --save-carry exports the model."""
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    log_csv = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0_log.csv"
    text = log_csv.read_text()
    damaged = {"header": text.splitlines()[0] + "\n", "cut": text[: len(text) // 2 + 3]}.get(damage)
    log_csv.write_bytes(bytes(range(256)) * 4 if damage == "binary" else damaged.encode())
    status = worker.training_status(preset, "03_train_tsp")
    assert list(status.state) == ["finished"] and list(status.done) == [2]
    worker.main([str(preset), "03_train_tsp", "--save-carry"])
    assert (tmp_path / "tiny" / "models" / "tsp_inv_sqrt_d_n6_seed0.pt").is_file()


def test_a_model_past_the_presets_epochs_is_reported_as_such(tmp_path, monkeypatch, capsys):
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=3)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    lowered = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    status = worker.training_status(lowered, "03_train_tsp")
    assert list(status.state) == ["past its epochs"] and list(status.done) == [3]
    worker.print_status(lowered, "03_train_tsp")
    out = capsys.readouterr().out
    assert "0 of 1 models trained" in out and "raise epochs to 3" in out


def test_a_checkpoint_from_elsewhere_is_installed_with_its_log_unless_one_as_far_is_here(tmp_path, monkeypatch):
    from eie.checkpoints import install_checkpoint

    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=2)
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    study.train_models(["inv_sqrt_d"], [0], run="tiny", device="cpu", progress=False, **setup["config"])
    source = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0.pt"
    target = tmp_path / "elsewhere" / "checkpoints" / source.name
    target.parent.mkdir(parents=True)
    assert "epoch 2" in install_checkpoint(source, target)
    assert target.read_bytes() == source.read_bytes()
    assert len(pd.read_csv(target.with_name("tsp_inv_sqrt_d_n6_seed0_log.csv"))) == 2
    assert "kept" in install_checkpoint(source, target)


def test_branch_from_starts_a_pilot_from_another_runs_carried_checkpoint_and_trains_it(tmp_path, monkeypatch, capsys):
    """`--branch-from RUN --at-epoch E`: each model of the pilot preset starts from RUN's checkpoint of
    the same model (its carried copy here) and trains on; the trained pilot is the pilot preset
    trained from the start. Another epoch, the preset's own run or a run without the model are refused
    before anything trains, naming what was wrong."""
    source = tiny_tsp_preset(tmp_path, monkeypatch, run="long", epochs=2, warmup_epochs=5)
    worker.main([str(source), "03_train_tsp"])  # every run here through main: the same thread count
    name = "tsp_inv_sqrt_d_n6_seed0"
    (tmp_path / "long" / "carry").mkdir()
    shutil.move(tmp_path / "long" / "checkpoints" / f"{name}.pt", tmp_path / "long" / "carry" / f"{name}.pt")
    pilot = tmp_path / "pilot.yaml"
    pilot_settings = {**yaml.safe_load(source.read_text()), "run": "pilot", "epochs": 4, "warmup_epochs": 2,
                      "lr_after_warmup": 5e-5}
    pilot.write_text(yaml.safe_dump(pilot_settings))
    with pytest.raises(SystemExit):
        worker.main([str(pilot), "03_train_tsp", "--branch-from", "long", "--at-epoch", "1"])
    assert "has run 2 epochs, not the 1 asked for" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        worker.main([str(pilot), "03_train_tsp", "--branch-from", "pilot"])
    assert "this preset's own run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        worker.main([str(pilot), "03_train_tsp", "--at-epoch", "2"])
    assert "give it with --branch-from" in capsys.readouterr().err
    assert not (tmp_path / "pilot" / "checkpoints").exists()
    worker.main([str(pilot), "03_train_tsp", "--branch-from", "long", "--at-epoch", "2"])
    assert f"{name}.pt: branched from" in capsys.readouterr().out
    branched = tmp_path / "pilot" / "checkpoints" / f"{name}.pt"
    assert checkpoint_epochs(branched) == 4
    straight = tiny_tsp_preset(tmp_path, monkeypatch, **{**pilot_settings, "run": "straight"})
    worker.main([str(straight), "03_train_tsp"])
    ours = torch.load(branched, weights_only=True)
    theirs = torch.load(tmp_path / "straight" / "checkpoints" / f"{name}.pt", weights_only=True)
    for key, value in theirs["model"].items():
        assert torch.equal(ours["model"][key], value), key
    assert [row["lr"] for row in ours["log"]] == [1e-4, 1e-4, 5e-5, 5e-5]
    # branching again keeps the pilot's own checkpoint, which has trained on
    assert "already; kept" in worker.branch_models(pilot, "03_train_tsp", "long", 2)[0]


def _signal_self_during_epoch(monkeypatch, *signums):
    """Send `signums` to this process, one after the other, from inside the first epoch's held-out test
    (only there)."""
    test = training.paired_t_test_p
    sent = []

    def test_then_signal(candidate, baseline):
        for signum in signums if not sent else ():
            sent.append(signum)
            os.kill(os.getpid(), signum)
            for _ in range(1000):  # until the handler has run (signals sent back to back may coalesce)
                if stop_request.stop_requested():
                    break
        return test(candidate, baseline)

    monkeypatch.setattr(training, "paired_t_test_p", test_then_signal)


@pytest.fixture
def own_handlers():
    """SIGTERM and SIGINT handlers of this test's own, to see the worker put them back."""
    import signal
    mine = {signum: (lambda *_: None) for signum in (signal.SIGTERM, signal.SIGINT)}
    previous = {signum: signal.signal(signum, handler) for signum, handler in mine.items()}
    yield mine
    for signum, handler in previous.items():
        signal.signal(signum, handler)


def test_the_first_sigterm_stops_a_worker_after_the_epoch_in_progress(tmp_path, monkeypatch, capfd, own_handlers):
    import signal
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=3, seeds=[0, 1])
    _signal_self_during_epoch(monkeypatch, signal.SIGTERM)
    assert worker.main([str(preset), "03_train_tsp"]) == 128 + signal.SIGTERM  # not 0: training has not ended
    out = capfd.readouterr()
    assert "SIGTERM: stopping after the current epoch" in out.err
    assert "tsp_inv_sqrt_d_n6_seed0: stopped after epoch 1, its checkpoint written" in out.out
    checkpoints = tmp_path / "tiny" / "checkpoints"
    assert checkpoint_epochs(checkpoints / "tsp_inv_sqrt_d_n6_seed0.pt") == 1
    assert len(pd.read_csv(checkpoints / "tsp_inv_sqrt_d_n6_seed0_log.csv")) == 1
    assert not (checkpoints / "tsp_inv_sqrt_d_n6_seed1.pt").exists()  # the next model is not started
    assert {signum: signal.getsignal(signum) for signum in own_handlers} == own_handlers  # put back
    assert not stop_request.stop_requested()
    # started again (the test signals only once), it resumes and ends where an uninterrupted run does
    assert worker.main([str(preset), "03_train_tsp"]) is None
    assert checkpoint_epochs(checkpoints / "tsp_inv_sqrt_d_n6_seed0.pt") == 3
    (setup,) = study.training_setups("03_train_tsp", experiments.load("03_train_tsp", preset))
    same, _ = study.train_models(["inv_sqrt_d"], [0], run="fresh", device="cpu", progress=False, **setup["config"])
    resumed = training.load_trained(checkpoints / "tsp_inv_sqrt_d_n6_seed0.pt")
    for p, q in zip(resumed.state_dict().values(), same[("inv_sqrt_d", 0)].state_dict().values(), strict=True):
        assert torch.equal(p, q)


def test_a_second_signal_of_either_kind_stops_a_worker_at_once(tmp_path, monkeypatch, own_handlers):
    import signal
    preset = tiny_tsp_preset(tmp_path, monkeypatch, epochs=3)
    _signal_self_during_epoch(monkeypatch, signal.SIGTERM, signal.SIGINT)
    with pytest.raises(KeyboardInterrupt):
        worker.main([str(preset), "03_train_tsp"])
    # nothing of the interrupted epoch is written, the handlers are put back and no stop is left pending
    assert not (tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0.pt").exists()
    assert {signum: signal.getsignal(signum) for signum in own_handlers} == own_handlers
    assert not stop_request.stop_requested()


def test_a_stop_asked_for_while_a_worker_waits_ends_the_wait(tmp_path, monkeypatch, capfd, own_handlers):
    """The only model is held by another worker: the first SIGTERM ends the wait (within a second, not
    at the 30 s poll) and nothing is trained."""
    import signal
    import threading
    import time
    preset = tiny_tsp_preset(tmp_path, monkeypatch)
    held = tmp_path / "tiny" / "checkpoints" / "tsp_inv_sqrt_d_n6_seed0.pt"
    held.parent.mkdir(parents=True)
    monkeypatch.setattr(worker, "use_threads", lambda count: None)  # this test process keeps its threads
    with exclusive(held, "trained"):
        timer = threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGTERM))
        started = time.monotonic()
        timer.start()
        status = worker.main([str(preset), "03_train_tsp"])
        waited = time.monotonic() - started
    assert status == 128 + signal.SIGTERM and waited < 5
    assert "stopped while waiting for 1 model(s) another worker trains" in capfd.readouterr().out
    assert not held.exists()
