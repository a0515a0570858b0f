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
