"""Keep a run's stored evaluation pieces readable after an edit to the decoding modules that does not
change any value, after checking on a sample that it does not.

    python scripts/rekey_evaluation_pieces.py PRESET NOTEBOOK [--samples 6] [--max-factor 2] [--fill]

A stored piece is named by a hash of its key and of the source of the modules that compute it
(`eie.evaluation_store`), so any edit to those modules, a new input check say, makes every piece
miss and an evaluation of hours starts again. This script first recomputes `--samples` entries of
the run's committed per-instance results (random method, seed and n up to `--max-factor` x N, every
setting of the notebook) with today's code and requires each to equal the committed values exactly
(a run whose evaluation has not finished has none: then its stored reference pieces at those n are
recomputed, the smallest first, and compared);
only then does it rename every stale piece of the run (results/<run>/checkpoints/evaluation/ and
carry/evaluation/) to the name today's code looks up, rewriting the piece's key where the function that
builds pieces (`eie.extrapolation.evaluate`, `eie.tsplib.evaluate_tsplib`) was edited. A mismatch renames nothing
and exits 1.

With `--fill` it also writes, under today's keys, the method pieces that the store lacks but the
committed per-instance results hold (models whose pieces were never kept, evaluated on another
machine): the notebook's evaluation then reads them instead of decoding those models again, and
decodes only models the committed results do not cover. Filling follows the same sample check.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie import experiments, extrapolation, study  # noqa: E402
from eie.comparison import load_instance_objectives  # noqa: E402
from eie.evaluation import fixed_test_set, greedy_costs  # noqa: E402
from eie.evaluation_store import EvaluationStore, function_fingerprint, model_fingerprint  # noqa: E402
from eie.files import load_tensors  # noqa: E402
from eie.problems import make_problem  # noqa: E402


def verify(params: dict, notebook: str, samples: int, max_factor: int, seed: int = 0) -> bool:
    """Recompute `samples` committed per-instance entries with today's code; True if all are equal."""
    run, n_train = params["run"], params["n_train"]
    setups = study.training_setups(notebook, params)
    problem_name = setups[0]["config"]["problem"]
    results = study.results_dir(run, create=False) / make_problem(problem_name).result_files[1]
    if not results.exists():
        return verify_references(params, setups, samples, max_factor)
    committed = load_instance_objectives(results)
    by_setting = {setup["setting"]: setup for setup in setups}
    candidates = [key for key in committed if key[0] in by_setting and key[3] <= max_factor * n_train]
    if not candidates:
        print(f"no committed entries of {notebook} at n <= {max_factor} N to check against")
        return False
    net, table = study.ensure_scales(16, n_train, params["n_max"], run=run)
    rng = random.Random(seed)
    ok = True
    for setting, method_key, model_seed, n in rng.sample(candidates, min(samples, len(candidates))):
        setup = by_setting[setting]
        problem = make_problem(problem_name, **setup["config"].get("problem_options", {}))
        (method,) = extrapolation.bind_methods([method_key], 16, n_train, net, table)
        name = study.model_name(problem_name, method.model_key, n_train, model_seed, setup["tag"])
        model = study.load_policies([name], run=run)[name]
        instances = fixed_test_set(problem, n, params["test_size"], params["test_seed"])
        sign = -1.0 if problem.maximise else 1.0
        with torch.no_grad():
            values = sign * greedy_costs(model, instances, method, chunk=params["eval_chunk"]).cpu().numpy()
        same = np.array_equal(values, committed[(setting, method_key, model_seed, n)])
        ok &= same
        print(f"{setting or problem_name} {method_key} seed {model_seed} n = {n}: "
              f"{'equal' if same else 'DIFFERENT'} ({len(values)} instances)", flush=True)
    return ok


def verify_references(params: dict, setups: list, samples: int, max_factor: int) -> bool:
    """For a run whose evaluation has not finished (no per-instance results committed): recompute up to
    `samples` of its stored reference pieces at n <= `max_factor` x N (the smallest first) with today's
    reference solver, and compare each with the stored values. True if all are equal."""
    import json

    by_setting = {setup["setting"]: setup for setup in setups}
    pieces = []
    for folder in (study.results_dir(params["run"], create=False) / "checkpoints" / "evaluation",
                   study.carry_folder(params["run"]) / "evaluation"):
        for path in EvaluationStore(folder).stale_pieces():
            payload = load_tensors(path, "evaluation piece")
            key = json.loads(payload["key"])
            if key.get("kind") == "reference" and key["setting"] in by_setting \
                    and key["n"] <= max_factor * params["n_train"]:
                pieces.append((key["n"], key, payload["values"].numpy()))
    if not pieces:
        print(f"no committed per-instance results and no reference piece at n <= {max_factor} N to check against")
        return False
    ok = True
    for n, key, stored in sorted(pieces, key=lambda piece: piece[0])[:samples]:
        setup = by_setting[key["setting"]]
        problem = make_problem(setup["config"]["problem"], **setup["config"].get("problem_options", {}))
        instances = fixed_test_set(problem, n, key["test_size"], key["test_seed"])
        sign = -1.0 if problem.maximise else 1.0
        k = key["reference_size"]
        values = sign * problem.reference_costs({name: v[:k] for name, v in instances.items()}, **key["reference_options"])
        same = np.array_equal(values, stored)
        ok &= same
        print(f"{key['setting']} reference n = {n}: {'equal' if same else 'DIFFERENT'} ({len(values)} instances)", flush=True)
    return ok


def builders() -> dict:
    """{kind of piece: fingerprint of today's function that builds it} (the key's "code" entry)."""
    from eie import tsplib

    study_code = function_fingerprint(extrapolation.evaluate)
    return {"method": study_code, "reference": study_code, "tsplib": function_fingerprint(tsplib.evaluate_tsplib)}


def rekey(run: str) -> int:
    """Store every stale but readable piece of `run` under the name today's code looks it up by: renamed
    where only the source of the decoding modules changed, rewritten with today's "code" entry where the
    function that builds the pieces changed too."""
    import json

    code = builders()
    folders = [study.results_dir(run, create=False) / "checkpoints" / "evaluation", study.carry_folder(run) / "evaluation"]
    moved = 0
    for folder in folders:
        store = EvaluationStore(folder)
        for path in store.stale_pieces():
            try:
                payload = load_tensors(path, "evaluation piece")
                key = json.loads(payload["key"])
            except (ValueError, KeyError, TypeError):
                continue  # unreadable: left for the evaluation to compute again
            if "code" in key and key.get("kind", "reference") in code:
                key["code"] = code[key.get("kind", "reference")]
            target = store._path(key)
            if target.exists():
                path.unlink()
                continue
            if json.loads(payload["key"]) == key:
                path.rename(target)
            else:
                store.put(key, payload["values"].numpy())
                path.unlink()
            moved += 1
    return moved


class CommittedValues(EvaluationStore):
    """The run's store, where a method piece it lacks is taken from the committed per-instance results
    (matched by setting, method, n and the model's weights) and kept; nothing is decoded."""

    def __init__(self, store: EvaluationStore, committed: dict, seed_of_weights: dict):
        super().__init__(store.folder, carried=store.carried)
        self.committed, self.seed_of_weights, self.filled = committed, seed_of_weights, 0

    def get_or_compute(self, key: dict, compute) -> np.ndarray:
        values = self.get(key)
        if values is not None or key.get("kind") != "method":
            return values if values is not None else super().get_or_compute(key, compute)
        seed = self.seed_of_weights[key["model"]["weights"]]
        values = self.committed[(key["setting"], key["method"], seed, key["n"])]
        self.put(key, values)
        self.filled += 1
        return values


def fill(params: dict, notebook: str) -> int:
    """Write the method pieces of every finished model the committed results cover; returns how many."""
    committed = load_instance_objectives(study.results_dir(params["run"], create=False)
                                         / make_problem(study.training_setups(notebook, params)[0]["config"]["problem"])
                                         .result_files[1])
    covered = {(setting, seed) for setting, _, seed, _ in committed}
    params = {**params, "progress": False}
    d = study.training_setups(notebook, params)[0]["config"]["model"].head_dim
    net, table = study.ensure_scales(d, params["n_train"], params["n_max"], run=params["run"])
    methods = extrapolation.bind_methods(study.method_keys(params), d, params["n_train"], net, table)
    store = CommittedValues(study.run_evaluation_store(params["run"]), committed, {})
    for setting, models in study.finished_models(notebook, params).items():
        models = {key: model for key, model in models.items() if (setting, key[1]) in covered}
        store.seed_of_weights.update({model_fingerprint(model): seed for (_, seed), model in models.items()})
        problem = next(iter(models.values())).problem if models else None
        if problem is not None:
            for _ in study._evaluate_setting(problem, params, methods, models, store):
                pass
    return store.filled


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset")
    parser.add_argument("notebook")
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--max-factor", type=int, default=2, help="check entries at n <= this x N (cheap ones)")
    parser.add_argument("--fill", action="store_true", help="also write the missing pieces of committed results")
    args = parser.parse_args()
    params = experiments.load(args.notebook, args.preset)
    if not verify(params, args.notebook, args.samples, args.max_factor):
        print("today's code does not reproduce the committed values: no piece renamed")
        return 1
    print(f"{rekey(params['run'])} pieces of results/{params['run']}/ renamed to today's keys")
    if args.fill:
        print(f"{fill(params, args.notebook)} missing pieces written from the committed per-instance results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
