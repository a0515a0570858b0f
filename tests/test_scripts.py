"""Every script under scripts/ says what it does and how to call it (`--help`) without doing any work."""

import subprocess
import sys

import pytest

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
