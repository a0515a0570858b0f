"""Paths resolve from the repository root wherever the code runs; notebooks stay paired with .py."""

from pathlib import Path

import jupytext
import pytest

from eie import paths

ROOT = paths.repo_root()


def test_repo_root_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ROOT_ENV_VAR, raising=False)
    monkeypatch.chdir(ROOT / "notebooks")
    assert paths.repo_root() == ROOT
    monkeypatch.chdir(tmp_path)  # outside the checkout: the editable install's location
    assert paths.repo_root() == ROOT


def test_bad_root_override_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.ROOT_ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="not the study's repository root"):
        paths.repo_root()


def test_run_names_are_plain_folders():
    with pytest.raises(ValueError, match="plain folder name"):
        paths.results_dir("../elsewhere")


NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_paired_and_in_sync(notebook: Path):
    script = notebook.with_suffix(".py")
    assert script.is_file(), f"{notebook.name} has no paired {script.name}: run `make sync`"
    cells_nb = [c.source for c in jupytext.read(notebook).cells
                if "injected-parameters" not in c.metadata.get("tags", [])]  # papermill's, from `make notebooks`
    cells_py = [c.source for c in jupytext.read(script).cells]
    assert cells_nb == cells_py, f"{notebook.name} and {script.name} differ: run `make sync`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_stored_executed_with_a_parameters_cell(notebook: Path):
    nb = jupytext.read(notebook)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert any("parameters" in c.metadata.get("tags", []) for c in code), "no cell tagged 'parameters'"
    assert all(c.get("execution_count") is not None for c in code), f"{notebook.name} is not stored executed: run `make notebooks`"


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_papermill_sees_every_parameter(notebook: Path):
    """papermill must parse each assignment of the parameters cell (a comment holding '=' hides one),
    or `-p name value` warns and the help lists the notebook's parameters incompletely."""
    from papermill.translators import PythonTranslator

    nb = jupytext.read(notebook)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    assigned = [line.split("=")[0].strip() for line in cell.source.splitlines() if line and not line.startswith("#")]
    parsed = [p.name for p in PythonTranslator.inspect({"source": cell.source})]
    assert parsed == assigned, f"papermill cannot parse {sorted(set(assigned) - set(parsed))} in {notebook.name}"
    assert "run" in parsed, f"{notebook.name} has no `run` parameter"


def test_every_notebook_parameter_declares_its_type_for_papermill():
    """`papermill --help-notebook` lists each parameter with its type (a `# type:` comment: an annotation
    such as `run: str` would be read by IPython as the %run magic)."""
    import nbformat
    from papermill.translators import PythonTranslator

    for path in sorted((paths.repo_root() / "notebooks").glob("0*.ipynb")):
        cell = next(c for c in nbformat.read(path, as_version=4).cells if "parameters" in c.metadata.get("tags", []))
        inferred = PythonTranslator.inspect(cell)
        assert inferred, path.name
        untyped = [p.name for p in inferred if p.inferred_type_name in ("None", None)]
        assert not untyped, f"{path.name}: {untyped} have no type"
