"""The notebooks' parameters, checked once before any compute.

Papermill injects parameters as Python literals (`-p name value`, `-y "name: value"`, `-f file.yaml`),
and on the way a few shapes change: integer keys of a mapping become strings, `-p seeds 0` gives a
number where a list is meant, `-p epochs abc` a string. Each notebook's first cell after its
parameters calls

    globals().update(check_parameters("03_train_tsp", globals()))

which checks every parameter the notebook declares (`NOTEBOOK_PARAMETERS`), normalises what has a
safe normal form (mapping keys "10" -> 10, 5.0 -> 5 for integers) and raises one `ValueError` that
names every bad parameter, what it must be, and a valid value to pass. Names the notebook does not
declare (a preset file's values for other notebooks) are left alone.

A preset file gives one notebook its own values under `per_notebook` (papermill injects it as one
more parameter; the check applies the entry of its own notebook over the shared values):

    batch_size: 256
    per_notebook:
      05_train_bpp: {batch_size: 64}
"""

from __future__ import annotations

import difflib
import math
import numbers
from pathlib import Path

import yaml

from . import methods
from .attention import N_MODES, SITES
from .model import POINTER_CLIPS, PRECISIONS
from .paths import check_run_name
from .problems import problem_trained_by
from .training import FINAL_POLICIES


class Invalid(ValueError):
    """One parameter's value does not fit its description."""


class Check:
    """A parameter's description (what the message says it must be), an example, and its check."""

    def __init__(self, description: str, example, convert):
        self.description, self.example, self.convert = description, example, convert

    def __call__(self, value):
        return self.convert(value)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(minimum: int | None = None, example=None) -> Check:
    def convert(value):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not _is_number(value) or not float(value).is_integer():
            raise Invalid("not an integer")
        if minimum is not None and value < minimum:
            raise Invalid(f"below {minimum}")
        return int(value)

    where = "" if minimum is None else f" >= {minimum}"
    return Check(f"an integer{where}", example if example is not None else max(minimum or 0, 1), convert)


def number(above: float | None = None, at_most: float | None = None, example=None) -> Check:
    def convert(value):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise Invalid("not a number") from None
        if not _is_number(value) or not math.isfinite(value):
            raise Invalid("not a finite number")
        if above is not None and value <= above:
            raise Invalid(f"not above {above}")
        if at_most is not None and value > at_most:
            raise Invalid(f"above {at_most}")
        return value

    bounds = " and ".join(([f"> {above}"] if above is not None else []) + ([f"<= {at_most}"] if at_most is not None else []))
    return Check(f"a number {bounds}".strip(), example, convert)


def flag() -> Check:
    def convert(value):
        if not isinstance(value, bool):
            raise Invalid("not True or False")
        return value

    return Check("True or False", False, convert)


def one_of(*options) -> Check:
    def convert(value):
        if value not in options:
            raise Invalid("not one of the choices")
        return value

    return Check(f"one of {', '.join(map(repr, options))}", options[0], convert)


def method_key(trained: bool | None, exclude=()) -> Check:
    """A key of the method registry (read when checked, so methods registered later count)."""
    def convert(value):
        if value not in methods.keys(trained) or value in exclude:
            raise Invalid("not a registered method of this kind")
        return value

    kind = {True: "a trained method", False: "a test-time method", None: "a method"}[trained]
    return Check(f"{kind} of eie.methods (e.g. {', '.join(k for k in methods.keys(trained) if k not in exclude)})",
                 None, convert)


def optional(check: Check) -> Check:
    return Check(f"None or {check.description}", check.example, lambda v: None if v is None else check(v))


def list_of(item: Check, example, nonempty: bool = True, unique: bool = False, length: int | None = None) -> Check:
    def convert(value):
        if not isinstance(value, (list, tuple)):
            raise Invalid("not a list")
        if nonempty and not value:
            raise Invalid("empty")
        if length is not None and len(value) != length:
            raise Invalid(f"not {length} values")
        out = []
        for entry in value:
            try:
                out.append(item(entry))
            except Invalid as error:
                raise Invalid(f"entry {entry!r}: {error}") from None
        if unique and len({repr(v) for v in out}) != len(out):
            raise Invalid("has repeated entries")
        return out

    if length is not None:
        description = f"a list of {length} values, each {item.description}"
    else:
        description = f"a {'non-empty ' if nonempty else ''}list, each entry {item.description}"
    return Check(description + (", without repeats" if unique else ""), example, convert)


def mapping(key: Check, value: Check, example) -> Check:
    """A dict; papermill writes every key as a string, so keys go through `key` (e.g. "10" -> 10)."""
    def convert(given):
        if not isinstance(given, dict):
            raise Invalid("not a mapping")
        out = {}
        for k, v in given.items():
            try:
                out[key(k)] = value(v)
            except Invalid as error:
                raise Invalid(f"entry {k!r}: {v!r}: {error}") from None
        return out

    return Check(f"a mapping of {key.description} to {value.description}", example, convert)


RUN = Check("a plain folder name (letters, digits, '_', '-', '.')", "myrun", lambda v: _run(v))


def _run(value):
    try:
        return check_run_name(value)
    except ValueError:
        raise Invalid("not a plain folder name") from None


def _device(value):
    if not isinstance(value, str) or not (value in ("auto", "cpu", "cuda", "mps") or
                                          (value.startswith("cuda:") and value[5:].isdigit())):
        raise Invalid("not a device name")
    return value


DEVICE = Check("'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'", "auto", _device)
SEEDS = list_of(integer(0), [0, 1], unique=True)
SETTINGS = list_of(list_of(integer(1), [16, 100, 1600], length=3), [[16, 100, 1600]])

# What every training notebook (03-05) shares.
TRAINING = {
    "n_train": integer(2, 20), "n_max": integer(3, 160),
    "rules": list_of(method_key(trained=True), ["inv_sqrt_d"], unique=True),
    "training_free": list_of(method_key(trained=False), ["eie"], nonempty=False, unique=True),
    "seeds": SEEDS, "seeds_by_rule": mapping(method_key(trained=True), SEEDS, {"ln_d": [0]}),
    "epochs": integer(1, 4), "steps_per_epoch": integer(1, 10), "batch_size": integer(1, 64),
    "max_grad_norm": number(above=0, example=1.0), "baseline_eval_size": integer(2, 256),
    "lr_decay_on_p": flag(), "precision": one_of(*PRECISIONS),
    "plateau_window": integer(0, example=0), "plateau_tolerance": number(above=0, at_most=0.5, example=0.001),
    "lr_drops": integer(0, example=0), "lr_drop_factor": number(above=0, at_most=0.99, example=0.25),
    "warmup_epochs": integer(0, example=0), "pointer_clip": one_of(*POINTER_CLIPS),
    "final_policy": one_of(*FINAL_POLICIES),
    "sites": list_of(one_of(*SITES), list(SITES), unique=True), "n_mode": one_of(*N_MODES),
    "test_size": integer(1, 256), "test_seed": integer(0, 1234), "reference_size": integer(0, 32),
    "eval_chunk": integer(1, 256), "device": DEVICE, "progress": flag(), "run": RUN,
}

NOTEBOOK_PARAMETERS = {
    "01_entropy_analysis": {
        "settings": SETTINGS, "rules": list_of(method_key(None, exclude=("eie", "exact")), ["inv_sqrt_d"],
                                               unique=True),
        "samples": integer(64, 2048), "curve_points": integer(2, 30), "eq21_samples": integer(2, 16),
        "eq21_heads": integer(1, 8), "seed": integer(0), "run": RUN},
    "02_fit_eie": {
        "settings": SETTINGS, "eie_epochs": integer(1, 500), "eie_batch_size": integer(1, 256),
        "eie_lr": number(above=0, example=1e-3), "eie_lr_decay": number(above=0, at_most=1, example=0.99),
        "fit_samples": integer(2, 16), "first_activation": one_of("requr", "relu"),
        "input_scale": one_of("gaussian", "log", "unit", "raw"), "n_sampling": one_of("log-uniform", "uniform"),
        "exact_samples": integer(64, 4096), "entropy_samples": integer(64, 2048), "seed": integer(0),
        "progress": flag(), "run": RUN},
    "03_train_tsp": {**TRAINING, "lr": number(above=0, example=1e-4), "lkh_runs": integer(1),
                     "max_gap_at_n_train": number(above=0, example=70.0)},
    "04_train_cvrp": {
        **TRAINING, "capacities": list_of(integer(2, 10), [10, 20], unique=True),
        "lr_by_capacity": mapping(integer(2), number(above=0), {10: 1e-4, 20: 5e-5}),
        "size_counts_depot": flag(), "hgs_iterations": integer(1, 2000),
        "hgs_time_limit": optional(number(above=0, example=1.0)), "time_size": integer(1, 32),
        "time_repeats": integer(1, 3), "max_gap_at_n_train": number(above=0, example=150.0)},
    "05_train_bpp": {**TRAINING, "lr": number(above=0, example=1e-4),
                     "bins": list_of(list_of(integer(50), [120, 100], length=2), [[120, 100]], unique=True)},
    "06_extrapolation_tables": {"run": RUN, "alpha": number(above=0, at_most=0.5, example=0.05)},
    "09_findings": {"run": RUN},
    "10_lambda_sweeps": {"run": RUN},
    "08_rivals": {
        **TRAINING, "lr": number(above=0, example=1e-4), "lkh_runs": integer(1),
        "max_gap_at_n_train": number(above=0, example=90.0), "alpha": number(above=0, at_most=0.5, example=0.05),
        "rescale_factors": list_of(number(above=0, example=1.5), [1.0, 1.5, 2.0], unique=True),
        "sweep_models": list_of(method_key(trained=True), ["inv_sqrt_d", "dist_bias"], unique=True),
        "permutation_orderings": integer(1, 2), "permutation_instances": integer(1, 32),
        "probe_instances": integer(1, 4), "entropy_samples": integer(16, 512),
        "entropy_radius": number(above=0, example=0.25), "trf_eps": number(above=0, at_most=0.5, example=0.05),
        "tsplib_max_n": optional(integer(51, 200))},
    "07_appendix": {
        "run": RUN, "n_train": integer(2, 20), "n_max": integer(3, 320), "seed": integer(0),
        "rules": list_of(one_of("inv_sqrt_d", "ln_d", "ln_sqrt_d"), ["inv_sqrt_d", "ln_d"], unique=True),
        "instances": integer(1, 16), "permutation_instances": integer(1, 4), "js_instances": integer(1, 64),
        "test_seed": integer(0, 4321)},
}


def _flow(value) -> str:
    """A value as one would write it after `-y "name: ..."` (YAML flow style)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _across(notebook: str, values: dict) -> list[str]:
    """Conditions between parameters; messages as for single ones."""
    problems = []
    if "n_train" in values and "n_max" in values and values["n_max"] <= values["n_train"]:
        problems.append(f"n_max must be larger than n_train (tests run at n_train * 2^k up to n_max), got "
                        f"n_train = {values['n_train']}, n_max = {values['n_max']}; e.g. -p n_max {2 * values['n_train']}")
    for d, N, N_max in values.get("settings", []):
        if not 2 <= N < N_max:
            problems.append(f"settings: each [d, N, N_max] needs 2 <= N < N_max, got {[d, N, N_max]}")
    ds = [d for d, _, _ in values.get("settings", [])]
    if notebook == "02_fit_eie" and len(set(ds)) != len(ds):
        problems.append(f"settings: each head size d may appear once (results are kept per d), got d = {ds}; "
                        "give one setting per d (or run the notebook again with another run name)")
    if "capacities" in values and "lr_by_capacity" in values:
        missing = [c for c in values["capacities"] if c not in values["lr_by_capacity"]]
        if missing:
            problems.append(f"lr_by_capacity has no learning rate for capacities {missing}; add them, e.g. "
                            f"-y 'lr_by_capacity: {_flow({**values['lr_by_capacity'], missing[0]: 5e-5})}'")
    problem = getattr(problem_trained_by(notebook), "name", None)
    for key in [*values.get("rules", []), *values.get("training_free", [])]:
        if problem is not None and key in methods.keys() and not methods.applies_to(key, problem):
            problems.append(f"{key!r} does not apply to {problem} (only to {', '.join(methods.problems_for(key))}): drop it from "
                            f"{'rules' if key in values.get('rules', []) else 'training_free'} for {notebook}")
    if notebook == "07_appendix" and "inv_sqrt_d" not in values.get("rules", ["inv_sqrt_d"]):
        problems.append("rules must include 'inv_sqrt_d': Figure 6 and the training-free methods (EIE, exact, "
                        "log_N) probe the model trained with it")
    if notebook == "08_rivals":
        if "rules" in values and "inv_sqrt_d" not in values["rules"]:
            problems.append("rules must include 'inv_sqrt_d': every rival is compared with the 1/sqrt(d) model, and "
                            "EIE and the rescaling sweep run on it")
        swept = values.get("sweep_models", [])
        if "rules" in values and swept and not any(key in values["rules"] for key in swept):
            problems.append(f"sweep_models names {swept}, none of which rules trains (the sweep runs on those of "
                            f"sweep_models that rules has): add one to rules or name one of {values['rules']}")
        if 1.0 not in values.get("rescale_factors", [1.0]):
            problems.append("rescale_factors must include 1.0 (the unscaled model the others are compared with)")
    for key in values.get("seeds_by_rule", {}):
        if "rules" in values and key not in values["rules"]:
            problems.append(f"seeds_by_rule names {key!r}, which rules does not include: add {key!r} to rules or "
                            f"drop its entry (the rules it does not name are trained with every seed of seeds)")
    for key in values.get("training_free", []):
        base = methods.get(key).applied_to
        if "rules" in values and base not in values["rules"]:
            problems.append(f"training_free: {key!r} is applied to the model trained with {base!r}, which rules "
                            f"does not include: add {base!r} to rules or drop {key!r}")
    return problems


def check_parameters(notebook: str, values: dict) -> dict:
    """The parameters of `notebook` from `values` (a notebook's globals()), checked and normalised.

    Raises one ValueError listing every parameter that is missing or invalid, each with what it must
    be and a valid example."""
    if notebook not in NOTEBOOK_PARAMETERS:
        raise ValueError(f"unknown notebook {notebook!r}; choose from {', '.join(NOTEBOOK_PARAMETERS)}")
    per_notebook = values.get("per_notebook", {})
    if not isinstance(per_notebook, dict) or not all(isinstance(v, dict) for v in per_notebook.values()):
        raise ValueError(f"notebook {notebook}: per_notebook must map notebook names to their values, e.g. "
                         f"per_notebook: {{05_train_bpp: {{batch_size: 64}}}}; got {per_notebook!r}")
    unknown = sorted(set(per_notebook) - set(NOTEBOOK_PARAMETERS))
    if unknown:
        raise ValueError(f"notebook {notebook}: per_notebook names unknown notebooks {unknown}; "
                         f"choose from {', '.join(NOTEBOOK_PARAMETERS)}")
    values = {**values, **per_notebook.get(notebook, {})}
    checked, problems = {}, []
    for name, check in NOTEBOOK_PARAMETERS[notebook].items():
        if name not in values:
            problems.append(f"{name} is missing: it must be {check.description}")
            continue
        try:
            checked[name] = check(values[name])
        except Invalid as error:
            problems.append(f"{name} = {values[name]!r} is invalid ({error}): it must be {check.description}, "
                            f"e.g. -y \"{name}: {_flow(check.example)}\"")
    if not problems:
        problems = _across(notebook, checked)
    if problems:
        raise ValueError(f"notebook {notebook}: invalid parameters\n  - " + "\n  - ".join(problems))
    return checked


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's SafeLoader, refusing a mapping with a key given twice (plain YAML keeps the last)."""


def _unique_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def load_preset(path) -> dict:
    """A preset file's values, checked for what papermill would silently drop: unreadable YAML, a key
    given twice, a name no notebook declares (at the top level) or that its notebook does not declare
    (under `per_notebook`), each error naming the file and the nearest valid name."""
    path = Path(path)
    try:
        values = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"preset {path} is not valid YAML: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"preset {path} must be a YAML mapping of parameter names to values, got "
                         f"{type(values).__name__}")
    known = {name for declared in NOTEBOOK_PARAMETERS.values() for name in declared}

    def unknown(names, allowed, where):
        problems = []
        for name in names:
            if name not in allowed:
                close = difflib.get_close_matches(str(name), sorted(allowed), n=1)
                problems.append(f"{where}{name!r} is not a parameter{' (did you mean ' + repr(close[0]) + '?)' if close else ''}")
        return problems

    problems = unknown([k for k in values if k != "per_notebook"], known, "")
    per_notebook = values.get("per_notebook", {}) or {}
    if not isinstance(per_notebook, dict):
        problems.append(f"per_notebook must map notebook names to their values, got {per_notebook!r}")
        per_notebook = {}
    for notebook, own in per_notebook.items():
        if notebook not in NOTEBOOK_PARAMETERS:
            close = difflib.get_close_matches(str(notebook), sorted(NOTEBOOK_PARAMETERS), n=1)
            problems.append(f"per_notebook: {notebook!r} is not a notebook"
                            f"{' (did you mean ' + repr(close[0]) + '?)' if close else ''}")
        elif not isinstance(own, dict):
            problems.append(f"per_notebook: {notebook}'s entry must be a mapping, got {own!r}")
        else:
            problems += unknown(own, NOTEBOOK_PARAMETERS[notebook], f"per_notebook: {notebook}: ")
    if problems:
        raise ValueError(f"preset {path}: " + "; ".join(problems))
    return values
