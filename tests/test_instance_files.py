"""The readers of real instances (TSPLIB, CVRPLIB X) refuse malformed tables and files by row and value."""

import shutil

import numpy as np
import pytest
import torch

from eie import cvrplib, extrapolation, tsplib
from eie.training import TrainConfig, build_model

GOOD_TSP = "name,n,best_known\nberlin52,52,7542\neil51,51,426\n"


def tsplib_folder(tmp_path, table=GOOD_TSP, files=("berlin52", "eil51")):
    folder = tmp_path / "tsplib"
    folder.mkdir()
    for name in files:
        shutil.copy(tsplib.tsplib_dir() / f"{name}.tsp", folder)
    (folder / "best_known.csv").write_text(table)
    return folder


@pytest.mark.parametrize("table, match", [
    ("name,n,best_known\nberlin52,52,-5\n", r"line 2 \(berlin52\): best_known '-5' is not a positive integer"),
    ("name,n,best_known\nberlin52,52,7542.9\n", "'7542.9' is not a positive integer"),
    ("name,n,best_known\nberlin52,52,\n", "best_known '' is not"),
    ("name,n,best_known\nberlin52,52,0\n", "best_known '0' is not"),
    ("name,n,best_known\nberlin52,x,7542\n", "n 'x' is not"),
    ("", "is empty: it needs a header line"),
    ("berlin52,52,7542\n", r"lacks the column\(s\)"),
    ("name,n,best_known\nberlin52,52,7542\nberlin52,52,7542\n", r"\['berlin52'\] listed more than once"),
    ("name,n,best_known\n../evil,52,7542\n", "'../evil' is not a plain file name"),
])
def test_a_malformed_tsplib_table_is_refused_by_row_and_value(tmp_path, table, match):
    folder = tsplib_folder(tmp_path, table)
    with pytest.raises(ValueError, match=match):
        tsplib.load_tsplib(folder=folder)


def test_tsplib_files_that_disagree_with_themselves_or_hold_non_finite_coordinates_are_refused(tmp_path):
    folder = tsplib_folder(tmp_path)
    text = (folder / "berlin52.tsp").read_text()
    (folder / "berlin52.tsp").write_text(text.replace("DIMENSION: 52", "DIMENSION: 60"))
    with pytest.raises(ValueError, match="DIMENSION is 60 but the file lists 52 coordinates"):
        tsplib.load_tsplib(["berlin52"], folder=folder)
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip() == "NODE_COORD_SECTION") + 1
    lines[first + 2] = "3 nan 1"
    (folder / "berlin52.tsp").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match="city 3 has a coordinate that is not finite"):
        tsplib.load_tsplib(["berlin52"], folder=folder)


def test_an_instance_file_without_a_row_is_reported_and_a_listed_file_missing_is_an_error(tmp_path):
    folder = tsplib_folder(tmp_path, "name,n,best_known\nberlin52,52,7542\n")
    with pytest.warns(UserWarning, match=r"\['eil51'\] have no row in best_known.csv"):
        assert [i.name for i in tsplib.load_tsplib(folder=folder)] == ["berlin52"]
    (folder / "berlin52.tsp").unlink()
    with pytest.raises(FileNotFoundError, match="berlin52.tsp is listed"):
        tsplib.load_tsplib(folder=folder)


def test_a_best_known_below_a_checked_tour_is_flagged(tmp_path):
    folder = tsplib_folder(tmp_path, "name,n,best_known\neil51,51,100000\n", files=("eil51",))
    (instance,) = tsplib.load_tsplib(folder=folder)
    torch.manual_seed(0)
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    methods = extrapolation.bind_methods(["inv_sqrt_d"], 16, 10)
    with pytest.raises(ValueError, match="eil51: a checked tour of length .* is shorter than the optimum 100000"):
        tsplib.evaluate_tsplib({("inv_sqrt_d", 0): model}, methods, [instance], progress=False)


def test_a_malformed_cvrplib_table_or_file_is_refused(tmp_path):
    folder = tmp_path / "cvrplib"
    folder.mkdir()
    name = cvrplib.load_cvrplib()[0].name
    shutil.copy(cvrplib.cvrplib_dir() / f"{name}.vrp", folder)
    (folder / "best_known.csv").write_text(f"name,best_known\n{name},27591.5\n")
    with pytest.raises(ValueError, match=f"line 2 \\({name}\\): best_known '27591.5' is not a positive integer"):
        cvrplib.load_cvrplib(folder=folder)
    (folder / "best_known.csv").write_text(f"name,best_known\n{name},1000\n")
    (folder / f"{name}.vrp").write_text("NAME : broken\nNODE_COORD_SECTION\n1 0 nan\n")
    with pytest.raises(ValueError, match=f"{name}.vrp"):
        cvrplib.load_cvrplib(folder=folder)
    assert np.isfinite([i.best_known for i in cvrplib.load_cvrplib()]).all()
