"""environment.yml (conda) and pyproject.toml (pip) must describe the same environment."""

import re
import tomllib

import yaml

from eie.paths import repo_root

CONDA_NAMES = {"torch": "pytorch"}  # pip name -> conda-forge name


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[ ;]", requirement.strip(), maxsplit=1)[0].lower()


def _spec(requirement: str) -> str:
    return requirement.strip()[len(_name(requirement)):].replace(" ", "")


def test_environment_yml_matches_pyproject():
    root = repo_root()
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["dev"]
    env = yaml.safe_load((root / "environment.yml").read_text())
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict))
    listed = {}
    for item in conda:
        name, _, version = item.partition(">=")
        listed[name.split("=")[0].lower()] = f">={version}" if version else ""
    for item in pip:
        if not item.startswith("-e"):
            listed[_name(item)] = _spec(item)
    for requirement in wanted:
        name = CONDA_NAMES.get(_name(requirement), _name(requirement))
        assert name in listed, f"{name} is in pyproject.toml but not in environment.yml"
        assert listed[name] == _spec(requirement), f"{name}: {listed[name]!r} in environment.yml, {_spec(requirement)!r} in pyproject.toml"
    assert any(item.replace(" ", "").startswith("-e.") for item in pip), "environment.yml must pip-install the package (-e .[dev])"
    assert env["dependencies"][0].startswith("python=") and project["requires-python"] == ">=3.11"
