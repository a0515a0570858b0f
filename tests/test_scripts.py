"""Every script under scripts/ says what it does and how to call it (`--help`) without doing any work."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from script_module import script_module

from eie.paths import repo_root
from eie.problems import make_problem

SCRIPTS = sorted(p.relative_to(repo_root()).as_posix() for p in (repo_root() / "scripts").rglob("*.py"))


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_script_answers_help(script):
    done = subprocess.run([sys.executable, script, "--help"], cwd=repo_root(), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("usage:"), done.stdout[:500]


def test_the_tsplib_table_names_what_is_missing_before_decoding(tmp_path):
    """A preset's TSPLIB table refuses a seed the preset does not train and a run with no finished
    model, saying what to run, before any decoding (each call returns in seconds)."""
    def run(*arguments):
        return subprocess.run([sys.executable, "scripts/tsplib_table.py", *arguments], cwd=repo_root(),
                              capture_output=True, text=True, timeout=120)

    unknown = run("--preset", "presets/sensitivity_lr_rule.yaml", "--seeds", "7")
    assert unknown.returncode == 2 and "trains seeds [0, 1, 2], not [7]" in unknown.stderr
    preset = tmp_path / "untrained.yaml"
    preset.write_text("run: untrained_tsplib_check\nn_train: 100\nn_max: 1600\nseeds: [0]\n")
    untrained = run("--preset", str(preset))
    assert untrained.returncode == 2 and "no results folder" in untrained.stderr
    assert f"python -m eie.worker {preset} 03_train_tsp" in untrained.stderr
    assert not (repo_root() / "results" / "untrained_tsplib_check").exists()  # asking created no run folder


def test_bpp_pilots_draws_each_run_from_its_branch_and_summarises_the_epochs_after_it():
    """scripts/diagnostics/bpp_pilots.py: the source run drawn whole, each branched pilot from its
    branch epoch on, a pilot started from scratch whole and dashed, load rates as positive
    percentages; the summary's means are those of the logs."""
    pilots = script_module("diagnostics/bpp_pilots")
    epochs = np.arange(1, 31)
    source = pd.DataFrame({"epoch": epochs[:20], "greedy": 70.0 + 0.1 * epochs[:20], "sampled": 50.0 + epochs[:20]})
    pilot = pd.DataFrame({"epoch": epochs, "greedy": np.r_[source.greedy, np.full(10, 75.0)],
                          "sampled": np.r_[source.sampled, np.full(10, 40.0)]})
    scratch = pd.DataFrame({"epoch": epochs[:25], "greedy": np.full(25, 60.0), "sampled": np.full(25, 35.0)})
    logs = {"src": source, "pilot": pilot, "scratch": scratch}
    lines = pilots.summary(logs, branch_epoch=20, source_run="src")
    assert lines[0] == "src: epochs 1-20; last 10 epochs: greedy 71.55 %, sampled 65.50 %"
    assert lines[1] == "pilot: epochs 1-30; last 10 epochs: greedy 75.00 %, sampled 40.00 %"  # branched
    assert lines[2] == "scratch: epochs 1-25; last 10 epochs: greedy 60.00 %, sampled 35.00 % (from scratch)"
    fig = pilots.figure(logs, "src", branch_epoch=20)
    lines_drawn = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert list(lines_drawn["src: greedy, held-out"].get_xdata()) == list(range(1, 21))
    assert list(lines_drawn["pilot: sampled, training batches"].get_xdata()) == list(range(20, 31))
    assert lines_drawn["pilot: greedy, held-out"].get_ydata()[-1] == 75.0
    assert list(lines_drawn["scratch: greedy, held-out"].get_xdata()) == list(range(1, 26))
    assert lines_drawn["scratch: greedy, held-out"].get_linestyle() == "--"
    assert lines_drawn["pilot: greedy, held-out"].get_linestyle() == "-"


def test_bpp_decisions_forces_each_head_and_splits_the_likelihood_between_them():
    """scripts/diagnostics/bpp_decisions.py: greedy-greedy is the policy's greedy decoding, sampled-
    sampled its sampled decoding with the same generator (forcing the placement head changes
    nothing else), the two heads' likelihoods add up to the policy's, and the head is put back."""
    from eie.evaluation import greedy_costs
    from eie.training import TrainConfig, build_model

    decisions = script_module("diagnostics/bpp_decisions")
    torch.manual_seed(0)
    model = build_model(TrainConfig(problem="bpp", problem_options={"length": 60, "width": 50}, n_train=8)).eval()
    head = model.action_head
    instances = model.problem.generate(16, 8, torch.Generator().manual_seed(3))
    found = decisions.decision_loads(model, instances, seed=5)
    assert model.action_head is head
    assert found[("greedy", "greedy")] == pytest.approx(-float(greedy_costs(model, instances).mean()), abs=1e-4)  # costs: minus the load
    with torch.no_grad():
        solution, log_likelihood = model.rollout(instances, "sample", torch.Generator().manual_seed(5))
    assert found[("sample", "sample")] == pytest.approx(-float(model.problem.cost(instances, solution).mean()), abs=1e-4)
    assert found["nll_sequence"] + found["nll_placement"] == pytest.approx(-float(log_likelihood.mean()) / 8, rel=1e-5)
    assert found["nll_sequence"] > 0 and found["nll_placement"] > 0
    assert len({round(found[key], 4) for key in found if isinstance(key, tuple)}) > 1  # the modes differ
    assert "| greedy both |" in decisions.table([("x, epoch 1", found)])
    spread, norm = decisions.encoding_spread(model, instances)
    with torch.no_grad():
        nodes = model.encode(instances)
    assert spread == pytest.approx(float(nodes.std(dim=1).mean())) and 0 < spread < norm


def test_bpp_placement_crosses_orders_and_placements():
    """scripts/diagnostics/bpp_placement.py: the policy's order with its own placement is its greedy
    packing, a sorted order with the rule's placement is that heuristic, and the head-against-rule
    shares are shares; the head is put back."""
    from eie.evaluation import greedy_costs
    from eie.problems.bpp_heuristics import heuristic_load_rates
    from eie.training import TrainConfig, build_model

    placement = script_module("diagnostics/bpp_placement")
    torch.manual_seed(0)
    model = build_model(TrainConfig(problem="bpp", problem_options={"length": 60, "width": 50}, n_train=8)).eval()
    head = model.action_head
    instances = model.problem.generate(8, 8, torch.Generator().manual_seed(3))
    found = placement.crossed_loads(model, instances)
    assert model.action_head is head
    assert found[("policy", "policy")] == pytest.approx(-float(greedy_costs(model, instances).mean()), abs=1e-4)
    rates = heuristic_load_rates(model.problem, instances)
    for key in ("longest_edge", "volume", "as_generated"):
        assert found[(key, "rule")] == pytest.approx(float(rates[key].mean()), abs=1e-4)
    assert found[("longest_edge", "rule")] > found[("longest_edge", "policy")]  # an untrained head places worse
    assert 0 <= found["as_low"] < 1 and found["excess"] > 0 and 0 <= found["raising"] <= 1
    assert -1 <= found["largest_first"] <= 1
    order = torch.sort(instances["dims"].prod(-1), dim=1, descending=True, stable=True).indices
    assert placement.largest_first(order, instances["dims"]) == pytest.approx(1.0)
    assert placement.largest_first(order.flip(1), instances["dims"]) == pytest.approx(-1.0)
    assert "longest edge order, rule placement" in placement.table([("x", found)]).splitlines()[0]


def test_rekey_checks_a_run_without_results_on_its_reference_pieces(tmp_path, monkeypatch, capsys):
    """scripts/rekey_evaluation_pieces.py on a run whose evaluation has not finished: its stale
    reference pieces are recomputed (smallest n first) and compared; equal values let them be
    renamed to today's key, different ones are refused."""
    from eie import experiments, study
    from eie.evaluation import fixed_test_set
    from eie.evaluation_store import EvaluationStore

    rekey = script_module("rekey_evaluation_pieces")
    monkeypatch.setattr(study, "results_dir", lambda run="default", create=True: tmp_path / run)
    params = experiments.load("05_train_bpp", None, run="r", bins=[[60, 50]], n_train=4, n_max=8)
    setup = study.training_setups("05_train_bpp", params)[0]
    problem = make_problem("bpp", **setup["config"]["problem_options"])
    store = EvaluationStore(tmp_path / "r" / "checkpoints" / "evaluation")
    key = {"kind": "reference", "problem": "bpp", "setting": setup["setting"], "n": 4, "test_size": 8,
           "test_seed": 3, "reference_size": 5, "reference_options": {}, "code": "old"}
    instances = fixed_test_set(problem, 4, 8, 3)
    values = -problem.reference_costs({name: v[:5] for name, v in instances.items()})
    store.put(key, values)
    (piece,) = store.folder.glob("*.pt")
    piece.rename(store.folder / ("0" * 24 + ".pt"))  # as an edit to the modules leaves it: under another name
    assert rekey.verify(params, "05_train_bpp", samples=2, max_factor=1)
    assert "reference n = 4: equal (5 instances)" in capsys.readouterr().out
    store.put({**key, "n": 2}, values + 1)  # a stale piece whose values today's code does not give
    (store.folder / store._path({**key, "n": 2}).name).rename(store.folder / ("1" * 24 + ".pt"))
    assert not rekey.verify(params, "05_train_bpp", samples=2, max_factor=1)
    assert "reference n = 2: DIFFERENT" in capsys.readouterr().out


def test_weight_movement_measures_what_training_moved_against_its_rates(tmp_path):
    """scripts/diagnostics/weight_movement.py: between two checkpoints of one training, the summed
    rate is the logged rates times the steps, and an Adam step moves a weight by about its rate."""
    from eie.checkpoints import read_checkpoint
    from eie.training import TrainConfig, train

    small = dict(problem="tsp", n_train=6, steps_per_epoch=2, batch_size=8, baseline_eval_size=16, lr=1e-3)
    train(TrainConfig(epochs=1, **small), tmp_path, progress=False, device="cpu")
    earlier = read_checkpoint(tmp_path / "tsp_inv_sqrt_d_n6_seed0.pt")
    train(TrainConfig(epochs=3, **small), tmp_path, progress=False, device="cpu")
    later = read_checkpoint(tmp_path / "tsp_inv_sqrt_d_n6_seed0.pt")
    movement = script_module("diagnostics/weight_movement")
    moved = movement.weight_movement(earlier, later, steps_per_epoch=2)
    assert moved["epochs"] == "1-3" and moved["summed_rate"] == pytest.approx(2 * 2 * 1e-3)
    assert 0 < moved["largest_change"] <= 3 * moved["summed_rate"]  # Adam: about the rate per step at most
    assert 0 < moved["relative_change"] < 1
    with pytest.raises(ValueError, match="training order"):
        movement.weight_movement(later, earlier, steps_per_epoch=2)
    with pytest.raises(SystemExit):  # --run needs --model
        movement.main(["--run", "sensitivity_lr_rule", "HEAD"])


def test_decode_time_projects_an_evaluation_from_measured_decodes(tmp_path, capsys):
    """scripts/diagnostics/decode_time.py: a positive time per instance at each n, the projection
    scaled by instances and decodings, and a clear refusal of an empty batch."""
    from eie.training import TrainConfig, train

    train(TrainConfig(problem="tsp", n_train=6, epochs=1, steps_per_epoch=1, batch_size=8, baseline_eval_size=16),
          tmp_path, progress=False, device="cpu")
    decode_time = script_module("diagnostics/decode_time")
    checkpoint = tmp_path / "tsp_inv_sqrt_d_n6_seed0.pt"
    assert decode_time.main([str(checkpoint), "--n", "6", "12", "--batch", "4", "--repeats", "1",
                             "--instances", "3600", "--decodes", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    per_instance = [float(line.split(": ")[1].split(" s")[0]) for line in lines if line.startswith("n = ")]
    hours = [float(line.split("decodings ")[1].split(" h")[0]) for line in lines if line.startswith("n = ")]
    assert len(per_instance) == 2 and all(t > 0 for t in per_instance)
    assert hours == pytest.approx(per_instance, abs=0.006)  # 3600 instances x 1 decoding: s per instance = hours
    from eie.training import load_trained
    with pytest.raises(ValueError, match="--batch"):
        decode_time.seconds_per_instance(load_trained(checkpoint), 6, 0, 1)


def test_extrapolation_probe_compares_each_method_with_the_first_on_the_same_instances(tmp_path):
    """scripts/diagnostics/extrapolation_probe.py: one row per n = N * 2^k and method, the first
    method's difference from itself zero, another's the paired mean difference of greedy_costs on the
    first instances of the fixed test set; and a clear refusal of a checkpoint that was never carried."""
    from eie.evaluation import fixed_test_set, greedy_costs
    from eie.extrapolation import bind_methods
    from eie.study import committed_checkpoint
    from eie.training import TrainConfig, load_trained, train

    train(TrainConfig(problem="tsp", n_train=6, epochs=1, steps_per_epoch=1, batch_size=8, baseline_eval_size=16),
          tmp_path, progress=False, device="cpu")
    model = load_trained(tmp_path / "tsp_inv_sqrt_d_n6_seed0.pt")
    methods = bind_methods(["inv_sqrt_d", "log_N"], d=16, N=6)
    table = script_module("diagnostics/extrapolation_probe").probe(model, methods, 6, 24, test_size=8, test_seed=5,
                                                                   instances=3, chunk=4)
    assert list(zip(table.n, table.method, strict=True)) == [(n, key) for n in (6, 12, 24) for key in ("inv_sqrt_d", "log_N")]
    first = table[table.method == "inv_sqrt_d"]
    assert (first.better_pct == 0).all() and (first.se_pct == 0).all()
    test = {key: value[:3] for key, value in fixed_test_set(model.problem, 24, 8, 5).items()}
    base, other = (greedy_costs(model, test, method, chunk=4).double().numpy() for method in methods)
    row = table[(table.n == 24) & (table.method == "log_N")].iloc[0]
    assert row.objective == pytest.approx(other.mean())
    assert row.better_pct == pytest.approx(100 * (base - other).mean() / base.mean())  # shorter tours: positive
    with pytest.raises(FileNotFoundError, match="--save-carry"):
        committed_checkpoint("no_such_run", "no_such_model", None, tmp_path)
    with pytest.raises(FileNotFoundError, match="git revision HEAD"):
        committed_checkpoint("no_such_run", "no_such_model", "HEAD", tmp_path)
