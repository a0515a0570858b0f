"""Every script under scripts/ says what it does and how to call it (`--help`) without doing any work."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch
from script_module import script_module

from eie.paths import repo_root

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
