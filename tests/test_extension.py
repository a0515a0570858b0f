"""The extension paths, end to end from this file: a fourth problem with its experiment and a new
test-time method go through the entry points a user calls (the configuration check, the worker,
the evaluation, notebook 06's tables); a new training option is one field of TrainConfig."""

import dataclasses
import math
from typing import ClassVar

import pytest
import yaml

from eie import comparison, experiments, findings, methods, paths, scaling, study, training, worker
from eie.paper import in_table_order
from eie.problems import PROBLEMS, TSP


class OpenTour(TSP):
    """A fourth problem: TSP without the closing edge back to the start."""

    name = "open_tour"
    objective_name = "open tour length"
    reference_name = "LKH (closed tour, an upper bound)"

    def cost(self, instance, solution):
        ordered = instance["coords"].gather(1, solution[..., None].expand(-1, -1, 2))
        return (ordered[:, 1:] - ordered[:, :-1]).norm(dim=-1).sum(1)


@dataclasses.dataclass(frozen=True)
class OpenTourTraining(experiments.Training):
    """Training on open tours (its notebook would be 99_train_open_tour)."""

    notebook: ClassVar[str] = "99_train_open_tour"
    problem: ClassVar[str] = "open_tour"


@pytest.fixture
def extended(tmp_path, monkeypatch):
    """The registries with the fourth problem, its experiment and a test-time method "sharper"
    (lambda = 1.25/sqrt(d) on the 1/sqrt(d) model); results under tmp_path."""
    monkeypatch.setitem(PROBLEMS, "open_tour", OpenTour)  # the problem's registry line
    monkeypatch.setattr(experiments, "EXPERIMENTS", dict(experiments.EXPERIMENTS))
    experiments.register(OpenTourTraining)  # its experiment
    methods.register(methods.Method("sharper", "sharper", "sharper", "#8c564b",
                                    lambda d, **_: scaling.ScalingRule("sharper", d, lambda n: n * 0 + 1.25 / math.sqrt(d)),
                                    applied_to="inv_sqrt_d", linestyle=":"))
    def results_dir(run="default", create=True):
        (tmp_path / run).mkdir(parents=True, exist_ok=True)
        return tmp_path / run

    for module in (study, paths):  # the run's folders, and where its EIE net and lambda* table are kept
        monkeypatch.setattr(module, "results_dir", results_dir)
    yield tmp_path
    methods.unregister("sharper")


def test_a_fourth_problem_and_a_new_method_reach_the_tables(extended):
    preset = extended / "open.yaml"
    preset.write_text(yaml.safe_dump({
        "run": "open", "n_train": 6, "n_max": 12, "rules": ["inv_sqrt_d"], "training_free": ["sharper", "log_N"],
        "seeds": [0, 1], "epochs": 1, "steps_per_epoch": 1, "batch_size": 4, "baseline_eval_size": 4,
        "test_size": 4, "reference_size": 2, "eval_chunk": 4, "device": "cpu", "progress": False}))
    config = experiments.load("99_train_open_tour", preset)  # the configuration check
    assert isinstance(config, OpenTourTraining) and config.training_free == ["sharper", "log_N"]
    with pytest.raises(ValueError, match=r"training_free = \['nope'\] is invalid"):
        experiments.load("99_train_open_tour", preset, training_free=["nope"])
    assert "99_train_open_tour" in experiments.training_notebooks()

    worker.main([str(preset), "99_train_open_tour", "--threads", "1"])  # the worker trains both seeds
    checkpoints = extended / "open" / "checkpoints"
    assert {p.name for p in checkpoints.glob("*.pt")} == {f"open_tour_inv_sqrt_d_n6_seed{s}.pt" for s in (0, 1)}
    worker.main([str(preset), "99_train_open_tour", "--evaluate"])  # the evaluation, into the run's store

    models, _ = study.train_problem("99_train_open_tour", config)  # what the notebook does: nothing to train
    results, _, _ = study.evaluate_problem("99_train_open_tour", config, models)
    assert set(results.problem) == {"open_tour"} and set(results.method) == {"inv_sqrt_d", "sharper", "log_N",
                                                                              "reference"}

    loaded, _ = comparison.load_run_results(extended / "open")  # notebook 06's tables
    assert "open_tour" in in_table_order(comparison.RESULT_FILES) and "open_tour" in loaded
    tables = comparison.problem_tables("open_tour", *loaded["open_tour"], source="results/open")
    assert "sharper" in tables and "open tour length" in tables
    assert "sharper" in findings.findings_table("open_tour", loaded["open_tour"][0])


def test_a_training_option_is_one_field_of_trainconfig(tmp_path, monkeypatch):
    extended = dataclasses.make_dataclass("TrainConfig", [("entropy_bonus", float, dataclasses.field(default=0.0))],
                                          bases=(training.TrainConfig,), frozen=True)
    for module in (training, experiments, study):
        monkeypatch.setattr(module, "TrainConfig", extended)
    tsp = experiments.with_training_options(experiments.TSPTraining)
    monkeypatch.setitem(experiments.EXPERIMENTS, "03_train_tsp", tsp)
    assert experiments.TSPTraining().names() != tsp.names() and tsp().entropy_bonus == 0.0
    with pytest.raises(ValueError, match=r"entropy_bonus = 'high' is invalid \(not a number\)"):
        experiments.configure("03_train_tsp", {"entropy_bonus": "high"})
    config = experiments.configure("03_train_tsp", {"entropy_bonus": 0.5, "n_train": 6, "n_max": 12,
                                                    "rules": ["inv_sqrt_d"], "training_free": [], "seeds": [0],
                                                    "epochs": 1, "steps_per_epoch": 1, "batch_size": 4,
                                                    "baseline_eval_size": 4, "device": "cpu", "progress": False})
    seen = []
    real_train = study.train

    def spy(cfg, *args, **kwargs):
        seen.append(cfg)
        return real_train(cfg, *args, **kwargs)

    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    monkeypatch.setattr(study, "train", spy)
    study.train_problem("03_train_tsp", config)  # the option reaches the training loop's configuration
    assert [cfg.entropy_bonus for cfg in seen] == [0.5]
