"""Every notebook's experiment (`eie.experiments`), as papermill injects its settings (defaults, each
preset file, bad values), is checked before any compute; the parameter cells are the experiments'."""

from pathlib import Path

import jupytext
import pytest
import yaml
from papermill.iorw import load_notebook_node
from papermill.parameterize import parameterize_notebook

from eie import experiments, paths
from eie.experiments import EXPERIMENTS
from eie.experiments import configure as check_parameters

ROOT = paths.repo_root()
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
PRESETS = sorted((ROOT / "presets").glob("*.yaml"))


def injected_parameters(notebook: Path, parameters: dict) -> dict:
    """The notebook's globals after its parameters cell and papermill's injected cell have run,
    exactly as `papermill -p/-y/-f` would set them."""
    nb = parameterize_notebook(load_notebook_node(str(notebook)), parameters, report_mode=False)
    namespace = {}
    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if "parameters" in tags or "injected-parameters" in tags:
            exec(cell.source, namespace)
    return namespace


def test_every_notebook_has_its_experiments_parameter_cell_and_checks_it_first():
    assert {nb.stem for nb in NOTEBOOKS} == set(EXPERIMENTS)
    for notebook in NOTEBOOKS:
        for book in (jupytext.read(notebook), jupytext.read(notebook.with_suffix(".py"))):
            cells = [c for c in book.cells
                     if c.cell_type == "code" and "injected-parameters" not in c.metadata.get("tags", [])]
            index = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
            assert cells[index].source == experiments.parameter_cell(notebook.stem), \
                f"{notebook.name}: its parameter cell is not eie.experiments.parameter_cell({notebook.stem!r})"
            assert f'configure("{notebook.stem}", globals())' in cells[index + 1].source, \
                f"{notebook.name}: the cell after the parameters must configure the experiment"


def test_the_cell_defaults_are_the_experiments_and_a_preset_by_name_is_a_preset_by_file():
    for notebook in NOTEBOOKS:
        cls = EXPERIMENTS[notebook.stem]
        assert check_parameters(notebook.stem, injected_parameters(notebook, {})) == cls()
    notebook = ROOT / "notebooks" / "04_train_cvrp.ipynb"
    preset = ROOT / "presets" / "cpu_paper.yaml"
    by_file = check_parameters("04_train_cvrp", injected_parameters(notebook, yaml.safe_load(preset.read_text())))
    by_name = check_parameters("04_train_cvrp", injected_parameters(notebook, {"preset": "presets/cpu_paper.yaml"}))
    assert by_file == by_name == experiments.load("04_train_cvrp", preset)
    assert (by_name.n_train, by_name.epochs, by_name["capacities"]) == (100, 500, [10])
    overridden = check_parameters("04_train_cvrp", injected_parameters(notebook, {"preset": str(preset), "epochs": 3}))
    assert overridden.epochs == 3 and overridden.replace(epochs=5).epochs == 5
    with pytest.raises(FileNotFoundError, match="no preset file presets/nope.yaml; presets: .*cpu_paper"):
        experiments.load("03_train_tsp", "presets/nope.yaml")


def test_every_experiment_describes_its_settings():
    for notebook in EXPERIMENTS:
        text = experiments.describe(notebook)
        assert all(f"  {name}: " in text for name in EXPERIMENTS[notebook].names()), notebook


@pytest.mark.parametrize("preset", [None, *PRESETS], ids=lambda p: "defaults" if p is None else p.name)
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_defaults_and_every_preset_pass_the_notebooks_check(notebook, preset):
    parameters = {} if preset is None else yaml.safe_load(preset.read_text())
    checked = check_parameters(notebook.stem, injected_parameters(notebook, parameters))
    if "lr_by_capacity" in checked:  # papermill writes mapping keys as strings; the check restores them
        assert all(isinstance(k, int) for k in checked["lr_by_capacity"])
        assert set(checked["capacities"]) <= set(checked["lr_by_capacity"])


def test_the_suggested_learning_rate_override_works():
    notebook = ROOT / "notebooks" / "04_train_cvrp.ipynb"
    values = injected_parameters(notebook, {"capacities": [25], "lr_by_capacity": {25: 5e-5}})
    assert check_parameters("04_train_cvrp", values)["lr_by_capacity"] == {25: 5e-5}
    with pytest.raises(ValueError, match=r"no learning rate for capacities \[25\].*-y 'lr_by_capacity: \{10: "):
        check_parameters("04_train_cvrp", injected_parameters(notebook, {"capacities": [25]}))


@pytest.mark.parametrize("notebook, parameters, match", [
    ("03_train_tsp", {"seeds": []}, r"seeds = \[\] is invalid \(empty\).*-y \"seeds: \[0, 1\]\""),
    ("03_train_tsp", {"epochs": "abc"}, r"epochs = 'abc' is invalid \(not an integer\)"),
    ("03_train_tsp", {"seeds": 0}, r"seeds = 0 is invalid \(not a list\)"),
    ("03_train_tsp", {"device": "foo"}, r"device = 'foo'.*'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'"),
    ("03_train_tsp", {"n_train": 1}, r"n_train = 1 is invalid \(below 2\)"),
    ("03_train_tsp", {"n_max": 20}, r"n_max must be larger than n_train"),
    ("03_train_tsp", {"dim": 100}, r"dim = 100 must be a multiple of heads = 8"),
    ("03_train_tsp", {"normalization": "group"}, r"normalization = 'group' is invalid.*'layer', 'batch'"),
    ("03_train_tsp", {"rules": ["eie"]}, r"rules = \['eie'\] is invalid"),
    ("03_train_tsp", {"run": "../../tmp/x"}, r"run = '../../tmp/x' is invalid"),
    ("05_train_bpp", {"bins": [120, 100]}, r"bins = \[120, 100\] is invalid \(entry 120: not a list\)"),
    ("02_fit_eie", {"settings": [[16, 100, 1600], [16, 20, 160]]}, r"each head size d may appear once"),
    ("04_train_cvrp", {"lr_by_capacity": {"10": "fast"}}, r"lr_by_capacity = .* is invalid \(entry '10'"),
    ("06_extrapolation_tables", {"alpha": 2}, r"alpha = 2 is invalid"),
    ("07_appendix", {"rules": ["ln_d"]}, r"rules must include 'inv_sqrt_d'"),
    ("08_rivals", {"seeds_by_rule": {"ln_d": [0]}}, r"seeds_by_rule names 'ln_d', which rules does not include"),
    ("08_rivals", {"seeds_by_rule": {"rope": []}}, r"seeds_by_rule = .* is invalid \(entry 'rope': \[\]: empty\)"),
    ("07_appendix", {"rules": ["inv_sqrt_d", "dist_bias"]}, r"rules = \['inv_sqrt_d', 'dist_bias'\] is invalid"),
])
def test_bad_values_are_named_with_a_valid_example(notebook, parameters, match):
    values = injected_parameters(ROOT / "notebooks" / f"{notebook}.ipynb", parameters)
    with pytest.raises(ValueError, match=match):
        check_parameters(notebook, values)


def test_all_problems_are_reported_at_once():
    values = injected_parameters(ROOT / "notebooks" / "03_train_tsp.ipynb", {"epochs": 0, "lr": -1})
    with pytest.raises(ValueError) as error:
        check_parameters("03_train_tsp", values)
    assert "epochs = 0" in str(error.value) and "lr = -1" in str(error.value)


def test_a_preset_gives_one_notebook_its_own_values():
    paper = yaml.safe_load((ROOT / "presets" / "paper.yaml").read_text())
    bpp = check_parameters("05_train_bpp", injected_parameters(ROOT / "notebooks" / "05_train_bpp.ipynb", paper))
    tsp = check_parameters("03_train_tsp", injected_parameters(ROOT / "notebooks" / "03_train_tsp.ipynb", paper))
    assert (bpp["batch_size"], tsp["batch_size"]) == (64, 256)
    bad = injected_parameters(ROOT / "notebooks" / "03_train_tsp.ipynb", {"per_notebook": {"99_nope": {"epochs": 1}}})
    with pytest.raises(ValueError, match="unknown notebooks \\['99_nope'\\]"):
        check_parameters("03_train_tsp", bad)
