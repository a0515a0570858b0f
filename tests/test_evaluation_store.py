"""An interrupted evaluation resumes: finished pieces are read back, and anything that changed them
(the model's weights, the method, the test set, the solver's options) is computed again."""

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from eie import evaluation_store, extrapolation
from eie.evaluation_store import EvaluationStore, model_fingerprint
from eie.paths import repo_root
from eie.problems import TSP
from eie.training import TrainConfig, build_model


def test_a_piece_is_read_back_under_its_key_only(tmp_path):
    store = EvaluationStore(tmp_path)
    values = np.array([1.5, 2.5], dtype=np.float32)
    assert store.get({"n": 8}) is None
    store.put({"n": 8}, values)
    back = store.get({"n": 8})
    assert back.dtype == np.float32 and np.array_equal(back, values)
    assert store.get({"n": 16}) is None
    calls = []
    assert np.array_equal(store.get_or_compute({"n": 8}, lambda: calls.append(1)), values) and not calls
    for piece in tmp_path.glob("*.pt"):
        piece.write_bytes(b"truncated")
    with pytest.warns(UserWarning, match="unreadable"):
        assert np.array_equal(store.get_or_compute({"n": 8}, lambda: values * 2), values * 2)
    assert np.array_equal(store.get({"n": 8}), values * 2)  # computed again and stored
    assert EvaluationStore(None).get({"n": 8}) is None


def test_the_fingerprint_follows_the_weights():
    model = build_model(TrainConfig(n_train=6), "cpu")
    same = build_model(TrainConfig(n_train=6), "cpu")
    same.load_state_dict(model.state_dict())
    assert model_fingerprint(model) == model_fingerprint(same)
    with torch.no_grad():
        next(same.parameters())[0, 0] += 1e-6
    assert model_fingerprint(model) != model_fingerprint(same)


def _evaluate(models, store, methods=("inv_sqrt_d", "log_N"), **options):
    bound = extrapolation.bind_methods(list(methods), d=16, N=6)
    return extrapolation.evaluate(models, bound, 6, 12, test_size=4, reference_size=2, progress=False, device="cpu",
                          store=store, **options)


def test_a_rerun_reads_every_finished_piece_and_recomputes_what_changed(tmp_path, monkeypatch):
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(n_train=6), "cpu")}
    store = EvaluationStore(tmp_path)
    first, objectives, references = _evaluate(models, store)

    def must_not_run(*args, **kwargs):
        raise AssertionError("a finished piece was computed again")

    monkeypatch.setattr(extrapolation, "greedy_costs", must_not_run)
    monkeypatch.setattr(TSP, "reference_costs", must_not_run)
    again, objectives_again, references_again = _evaluate(models, store)
    assert again.equals(first)
    assert all(np.array_equal(objectives[key], objectives_again[key]) for key in objectives)
    assert all(np.array_equal(references[n], references_again[n]) for n in references)

    monkeypatch.undo()
    computed = []
    real_greedy = extrapolation.greedy_costs
    monkeypatch.setattr(extrapolation, "greedy_costs", lambda *a, **k: computed.append(1) or real_greedy(*a, **k))
    monkeypatch.setattr(TSP, "reference_costs", must_not_run)
    with torch.no_grad():  # other weights: every piece of the model is computed again, the references are read
        next(models[("inv_sqrt_d", 0)].parameters())[0, 0] += 0.1
    _evaluate(models, store)
    assert len(computed) == 4  # 2 methods x n = 6, 12
    with pytest.raises(AssertionError, match="computed again"):
        _evaluate(models, store, test_seed=99)  # another test set: its reference is computed again


def test_the_model_and_problem_settings_are_part_of_a_pieces_key(tmp_path, monkeypatch):
    """Settings that leave the weights alone but change what a method computes: the attention's
    sites and n mode (a test-time rule sees other n), and the problem's options."""
    torch.manual_seed(0)
    models = {("inv_sqrt_d", 0): build_model(TrainConfig(n_train=6), "cpu")}
    store = EvaluationStore(tmp_path)
    _evaluate(models, store)
    computed = []
    real_greedy = extrapolation.greedy_costs
    monkeypatch.setattr(extrapolation, "greedy_costs", lambda *a, **k: computed.append(1) or real_greedy(*a, **k))
    models[("inv_sqrt_d", 0)].attention.n_mode = "unmasked"
    unmasked, _, _ = _evaluate(models, store)
    assert len(computed) == 4  # 2 methods x n = 6, 12
    models[("inv_sqrt_d", 0)].attention.sites = ("encoder",)
    _evaluate(models, store)
    assert len(computed) == 8
    models[("inv_sqrt_d", 0)].attention.n_mode, models[("inv_sqrt_d", 0)].attention.sites = "instance", ("encoder", "glimpse")
    _evaluate(models, store)
    assert len(computed) == 8  # back to the first settings: read back

    torch.manual_seed(0)
    plain = build_model(TrainConfig(problem="cvrp", n_train=6), "cpu")
    depot = build_model(TrainConfig(problem="cvrp", n_train=6, problem_options={"size_counts_depot": True}), "cpu")
    depot.load_state_dict(plain.state_dict())
    _evaluate({("inv_sqrt_d", 0): plain}, store)
    before = len(computed)
    _evaluate({("inv_sqrt_d", 0): depot}, store)
    assert len(computed) == before + 4  # same weights, other problem options: computed again


def test_an_edit_to_one_problems_modules_keeps_the_other_problems_pieces(tmp_path):
    package = tmp_path / "eie"
    shutil.copytree(Path(evaluation_store.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    real_package = evaluation_store._PACKAGE
    evaluation_store._PACKAGE = package
    try:
        evaluation_store.source_hash.cache_clear()
        store = EvaluationStore(tmp_path / "store")
        pieces = {problem: {"kind": "reference", "problem": problem, "n": 20} for problem in ("tsp", "cvrp", "bpp")}
        for key in pieces.values():
            store.put(key, np.arange(3.0))
        written = {problem: store._path(key) for problem, key in pieces.items()}
        assert store.stale_pieces() == []
        heuristics = package / "problems" / "bpp_heuristics.py"
        heuristics.write_text(heuristics.read_text() + "\n# an edit\n")
        evaluation_store.source_hash.cache_clear()
        assert store.get(pieces["tsp"]) is not None and store.get(pieces["cvrp"]) is not None
        assert store.get(pieces["bpp"]) is None  # bin packing's heuristics changed: its reference is computed again
        assert store.stale_pieces() == [written["bpp"]]  # what no lookup reads any more, to delete
        base = package / "problems" / "base.py"
        base.write_text(base.read_text() + "\n# an edit\n")
        evaluation_store.source_hash.cache_clear()
        assert store.get(pieces["tsp"]) is None and store.get(pieces["cvrp"]) is None  # shared by every problem
        (tmp_path / "store" / "unreadable.pt").write_bytes(b"not a piece")
        assert set(store.stale_pieces()) == {*written.values(), tmp_path / "store" / "unreadable.pt"}
    finally:
        evaluation_store._PACKAGE = real_package
        evaluation_store.source_hash.cache_clear()


def test_the_modules_that_key_a_piece_are_read_from_the_imports(tmp_path):
    """No hand-kept list: a module the decoding reaches only through an import (the entropy module,
    through the methods registry) keys the method pieces; one it never runs (the worker) does not."""
    modules = evaluation_store.source_modules("method", "tsp")
    assert {"eie.evaluation", "eie.model", "eie.attention", "eie.entropy", "eie.problems.tsp"} <= set(modules)
    assert "eie.worker" not in modules and "eie.problems.cvrp" not in modules
    package = tmp_path / "eie"
    shutil.copytree(Path(evaluation_store.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    real_package = evaluation_store._PACKAGE
    try:
        evaluation_store._PACKAGE = package
        evaluation_store.source_hash.cache_clear()
        before = evaluation_store.source_hash("method", "tsp")
        (package / "worker.py").write_text((package / "worker.py").read_text() + "\n# an edit\n")
        evaluation_store.source_hash.cache_clear()
        assert evaluation_store.source_hash("method", "tsp") == before
        (package / "entropy.py").write_text((package / "entropy.py").read_text() + "\n# an edit\n")
        evaluation_store.source_hash.cache_clear()
        assert evaluation_store.source_hash("method", "tsp") != before
    finally:
        evaluation_store._PACKAGE = real_package
        evaluation_store.source_hash.cache_clear()


@pytest.mark.parametrize("run", sorted(p.parent.parent.name for p in (repo_root() / "results").glob("*/carry/evaluation")))
def test_the_committed_pieces_are_found_by_todays_code(run):
    """An edit to the decoding or solver modules renames every stored piece; a run's committed pieces
    must then be re-keyed (after checking the edit changes no value: scripts/rekey_evaluation_pieces.py),
    or its notebooks decode again for hours."""
    store = EvaluationStore(repo_root() / "results" / run / "carry" / "evaluation")
    stale = store.stale_pieces()
    assert not stale, (f"{len(stale)} committed pieces of results/{run}/ are stale: run "
                       f"scripts/rekey_evaluation_pieces.py presets/{run}.yaml NOTEBOOK")


def test_a_piece_of_the_wrong_length_or_with_nan_is_computed_again(tmp_path):
    """A piece whose key says 4 instances but which holds 2 values (or a NaN) is not used: it is
    computed again with a warning naming the file."""
    store = EvaluationStore(tmp_path)
    key = {"kind": "method", "problem": "tsp", "test_size": 4, "n": 20}
    for bad in (np.array([1.0, 2.0]), np.array([1.0, np.nan, 3.0, 4.0])):
        store.put(key, bad)
        with pytest.warns(UserWarning, match=str(store._path(key))):
            assert store.get(key) is None
        assert list(store.get_or_compute(key, lambda: np.arange(4.0))) == [0.0, 1.0, 2.0, 3.0]
        assert list(store.get(key)) == [0.0, 1.0, 2.0, 3.0]


def test_a_piece_is_keyed_by_the_versions_of_the_packages_that_compute_it(monkeypatch):
    """Another torch (every kind) or another LKH / HGS release (the reference) gives another name, so
    values computed by other versions are not read back as if they were today's."""
    method, reference = {"kind": "method", "problem": "tsp", "n": 20}, {"kind": "reference", "problem": "tsp", "n": 20}
    store = EvaluationStore(Path("/nowhere"))
    names = {kind: store._path(key) for kind, key in (("method", method), ("reference", reference))}
    real = evaluation_store.package_versions
    assert set(real("reference")) == {"torch", "numpy", "elkai", "pyvrp"} and "pyvrp" not in real("method")
    try:
        for package in ("torch", "pyvrp"):
            monkeypatch.setattr(evaluation_store, "package_versions",
                                lambda kind, package=package: {name: "0.0.0" if name == package else version
                                                                   for name, version in real(kind).items()})
            evaluation_store.source_hash.cache_clear()
            assert store._path(reference) != names["reference"]
            assert (store._path(method) != names["method"]) == (package == "torch")
    finally:
        monkeypatch.undo()
        evaluation_store.source_hash.cache_clear()
    assert store._path(method) == names["method"]
