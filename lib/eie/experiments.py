"""The experiments: one typed configuration per notebook, its defaults declared once, here.

Each notebook runs one experiment (`EXPERIMENTS`, keyed by the notebook's name): a frozen dataclass
whose fields are the experiment's settings with their defaults, each with the check its value must
pass. An instance is validated once, when it is made, and raises one `ValueError` that names every
bad setting, what it must be, and a valid value to pass. Instances read like the parameter mappings
they replace (`config["epochs"]`, `{**config}`) as well as by attribute (`config.epochs`).

Every entry point loads an experiment the same way:

    configure("03_train_tsp", values)           # a notebook's globals(), a dict; None = the default
    load("03_train_tsp", "presets/cpu_paper.yaml", seeds=[3])   # a preset file, then overrides

A notebook's parameter cell holds `preset` and a few common overrides (None: the preset's value,
else the default); `papermill -p name value` and `-f preset.yaml` give any setting as before (names
the notebook does not declare arrive as globals, which `configure` reads). The defaults of the
training experiments are smoke-sized; the presets hold the paper's settings.

A training experiment also takes every field of `eie.training.TrainConfig` it does not declare
itself, with TrainConfig's default and a check by type: a new training option is one field there.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from . import methods
from .attention import N_MODES, SITES
from .model import NORMALIZATIONS, POINTER_CLIPS, PRECISIONS, ModelConfig
from .parameters import (
    DEVICE,
    RUN,
    SEEDS,
    SETTINGS,
    Check,
    Invalid,
    flag,
    integer,
    list_of,
    mapping,
    method_key,
    number,
    one_of,
    optional,
    read_yaml,
    yaml_flow,
)
from .paths import repo_root
from .problems import PROBLEMS
from .training import FINAL_POLICIES, TrainConfig


def setting(default, check: Check, help: str = ""):
    """A field of an experiment: its default, the check its value must pass, what it means."""
    kind = {"default_factory": (lambda: _copy(default))} if isinstance(default, (list, dict)) else {"default": default}
    return field(**kind, metadata={"check": check, "help": help})


def _copy(value):
    return [_copy(v) for v in value] if isinstance(value, list) else (
        {k: _copy(v) for k, v in value.items()} if isinstance(value, dict) else value)


def text() -> Check:
    def convert(value):
        if not isinstance(value, str):
            raise Invalid("not a string")
        return value
    return Check("a string", "", convert)


@dataclass(frozen=True)
class Experiment(Mapping):
    """What every experiment has: the run its results go to (results/<run>/)."""

    notebook: ClassVar[str] = ""
    cell: ClassVar[tuple] = ("run",)  # settings the notebook's parameter cell lists (besides `preset`)

    run: str = setting("default", RUN, "results/<run>/ to write (and read)")

    def __post_init__(self):
        problems = []
        for spec in dataclasses.fields(self):
            value = getattr(self, spec.name)
            try:
                object.__setattr__(self, spec.name, spec.metadata["check"](value))
            except Invalid as error:
                check = spec.metadata["check"]
                problems.append(f"{spec.name} = {value!r} is invalid ({error}): it must be {check.description}, "
                                f"e.g. -y \"{spec.name}: {yaml_flow(check.example)}\"")
        if not problems:
            problems = self.conditions()
        if problems:
            raise ValueError(f"notebook {self.notebook}: invalid parameters\n  - " + "\n  - ".join(problems))

    def conditions(self) -> list[str]:
        """Conditions between settings (each a message as for a single one); none by default."""
        return []

    # read like a mapping of the settings: config["epochs"], {**config}, globals().update(config)
    def __getitem__(self, name):
        if name not in self.names():
            raise KeyError(name)
        return getattr(self, name)

    def __iter__(self):
        return iter(self.names())

    def __len__(self):
        return len(self.names())

    @classmethod
    def names(cls) -> tuple:
        return tuple(spec.name for spec in dataclasses.fields(cls))

    def replace(self, **changes) -> Experiment:
        """The same experiment with `changes`, checked again."""
        return dataclasses.replace(self, **changes)


def _lengths(values) -> list[str]:
    if "n_train" in values and "n_max" in values and values["n_max"] <= values["n_train"]:
        return [f"n_max must be larger than n_train (tests run at n_train * 2^k up to n_max), got "
                f"n_train = {values['n_train']}, n_max = {values['n_max']}; e.g. -p n_max {2 * values['n_train']}"]
    return []


def _settings(values) -> list[str]:
    return [f"settings: each [d, N, N_max] needs 2 <= N < N_max, got {[d, N, N_max]}"
            for d, N, N_max in values["settings"] if not 2 <= N < N_max]


@dataclass(frozen=True)
class EntropyAnalysis(Experiment):
    """Notebook 01: H(n) under each scaling rule (Monte Carlo, Eq. 6, Eq. 21)."""

    notebook: ClassVar[str] = "01_entropy_analysis"
    settings: list[list[int]] = setting([[16, 100, 1600], [32, 120, 1920]], SETTINGS, "[d, N (training length), N_max]")
    rules: list[str] = setting(["inv_sqrt_d", "ln_sqrt_d", "ln_d", "log_N", "ssmax"],
                               list_of(method_key(None, exclude=("eie", "exact")), ["inv_sqrt_d"], unique=True))
    samples: int = setting(2048, integer(64, 2048), "Monte-Carlo rows per (n, lambda)")
    curve_points: int = setting(30, integer(2, 30), "n values per curve")
    eq21_samples: int = setting(16, integer(2, 16), "draws of (X, W_Q, W_K) for Eq. 21")
    eq21_heads: int = setting(8, integer(1, 8))
    seed: int = setting(0, integer(0))

    def conditions(self):
        return _settings(self)


@dataclass(frozen=True)
class FitEIE(Experiment):
    """Notebook 02: the EIE net (Algorithm 2) and the exact lambda*(n) per head size."""

    notebook: ClassVar[str] = "02_fit_eie"
    cell: ClassVar[tuple] = ("run", "progress")
    settings: list[list[int]] = setting([[16, 100, 1600], [32, 120, 1920]], SETTINGS, "[d, N (training length), N_max]")
    eie_epochs: int = setting(500, integer(1, 500))
    eie_batch_size: int = setting(256, integer(1, 256))
    eie_lr: float = setting(1e-3, number(above=0, example=1e-3))
    eie_lr_decay: float = setting(0.99, number(above=0, at_most=1, example=0.99))
    fit_samples: int = setting(16, integer(2, 16), "Monte-Carlo rows per n_i in each step")
    first_activation: str = setting("requr", one_of("requr", "relu"), "'requr' (text after Eq. 9) or 'relu' (Eq. 9)")
    input_scale: str = setting("gaussian", one_of("gaussian", "log", "unit", "raw"), "see eie.eie_net")
    n_sampling: str = setting("log-uniform", one_of("log-uniform", "uniform"))
    exact_samples: int = setting(4096, integer(64, 4096), "Monte-Carlo rows per n when solving for lambda*")
    entropy_samples: int = setting(2048, integer(64, 2048), "rows per point of the entropy curves")
    seed: int = setting(0, integer(0))
    progress: bool = setting(True, flag(), "progress bars")

    def conditions(self):
        problems = _settings(self)
        ds = [d for d, _, _ in self.settings]
        if len(set(ds)) != len(ds):
            problems.append(f"settings: each head size d may appear once (results are kept per d), got d = {ds}; "
                            "give one setting per d (or run the notebook again with another run name)")
        return problems


@dataclass(frozen=True)
class Training(Experiment):
    """What every training notebook shares: train one model per trained rule and seed at `n_train`,
    evaluate every method at n_train * 2^k up to `n_max` against the problem's reference solver."""

    problem: ClassVar[str] = ""  # the key of eie.problems.PROBLEMS this experiment trains
    cell: ClassVar[tuple] = ("n_train", "n_max", "seeds", "epochs", "device", "progress", "run")

    n_train: int = setting(20, integer(2, 20), "training length N")
    n_max: int = setting(160, integer(3, 160), "test at N, 2N, 4N, ... up to n_max")
    rules: list[str] = setting(["inv_sqrt_d", "ln_d", "ln_sqrt_d"],
                               list_of(method_key(trained=True), ["inv_sqrt_d"], unique=True),
                               "trained with these scales")
    training_free: list[str] = setting(["eie", "exact", "log_N"],
                                       list_of(method_key(trained=False), ["eie"], nonempty=False, unique=True),
                                       "applied to the model they name (inv_sqrt_d) at test time")
    seeds: list[int] = setting([0, 1], SEEDS)
    seeds_by_rule: dict[str, list[int]] = setting({}, mapping(method_key(trained=True), SEEDS, {"ln_d": [0]}),
                                                  "other seeds for some rules, e.g. {ln_d: [0]}; the others use seeds")
    epochs: int = setting(4, integer(1, 4))
    steps_per_epoch: int = setting(10, integer(1, 10))
    batch_size: int = setting(64, integer(1, 64))
    lr: float = setting(1e-4, number(above=0, example=1e-4))
    max_grad_norm: float = setting(1.0, number(above=0, example=1.0))
    baseline_eval_size: int = setting(256, integer(2, 256))
    lr_decay_on_p: bool = setting(False, flag(), "the paper's 'lr x 0.95 when p > 0.95'")
    precision: str = setting("float32", one_of(*PRECISIONS), "'bfloat16': the encoder's linear layers in bfloat16")
    plateau_window: int = setting(0, integer(0, example=0),
                                  "W > 0: stop once the held-out cost stops improving over W epochs")
    plateau_tolerance: float = setting(0.001, number(above=0, at_most=0.5, example=0.001),
                                       "... by this relative amount (eie.training.plateau_reached)")
    lr_drops: int = setting(0, integer(0, example=0), "K > 0: the first K plateaus lower the learning rate instead")
    lr_drop_factor: float = setting(0.25, number(above=0, at_most=0.99, example=0.25), "... multiplying it by this")
    warmup_epochs: int = setting(0, integer(0, example=0), "W > 0: the first W epochs use an exponential baseline")
    dim: int = setting(128, integer(8, 128), "the model's width (head size d = dim / heads)")
    heads: int = setting(8, integer(1, 8))
    layers: int = setting(3, integer(1, 3), "encoder layers")
    ff_hidden: int = setting(512, integer(1, 512), "the encoder's feed-forward width")
    pointer_clip: str = setting("plain", one_of(*POINTER_CLIPS), "'centred': C tanh(u - mean u) (eie.model)")
    normalization: str = setting("layer", one_of(*NORMALIZATIONS),
                                 "the encoder's: 'layer' (the paper's) or 'batch' (Kool et al.'s code)")
    final_policy: str = setting("last", one_of(*FINAL_POLICIES), "what a finished model keeps: 'last' or 'baseline'")
    sites: list[str] = setting(list(SITES), list_of(one_of(*SITES), list(SITES), unique=True),
                               "which softmaxes take lambda(n)")
    n_mode: str = setting("instance", one_of(*N_MODES), "n the rules see while decoding")
    test_size: int = setting(256, integer(1, 256))
    test_seed: int = setting(1234, integer(0, 1234))
    reference_size: int = setting(32, integer(0, 32), "the reference solver on the first instances of each n")
    eval_chunk: int = setting(256, integer(1, 256))
    device: str = setting("auto", DEVICE)
    progress: bool = setting(True, flag(), "progress bars")

    def conditions(self):
        problems = _lengths(self)
        for key in [*self.rules, *self.training_free]:
            if key in methods.keys() and not methods.applies_to(key, self.problem):
                problems.append(f"{key!r} does not apply to {self.problem} (only to {', '.join(methods.problems_for(key))}):"
                                f" drop it from {'rules' if key in self.rules else 'training_free'} for {self.notebook}")
        if self.dim % self.heads:
            problems.append(f"dim = {self.dim} must be a multiple of heads = {self.heads} (head size d = dim / heads)")
        for key in self.seeds_by_rule:
            if key not in self.rules:
                problems.append(f"seeds_by_rule names {key!r}, which rules does not include: add {key!r} to rules or "
                                f"drop its entry (the rules it does not name are trained with every seed of seeds)")
        for key in self.training_free:
            base = methods.get(key).applied_to
            if base not in self.rules:
                problems.append(f"training_free: {key!r} is applied to the model trained with {base!r}, which rules "
                                f"does not include: add {base!r} to rules or drop {key!r}")
        return problems

    def problem_settings(self) -> list[tuple[dict, float]]:
        """The problem settings this experiment trains, each (the problem's constructor options, its
        learning rate). Default: one setting, no options, `lr`."""
        return [({}, self.lr)]

    def reference_options(self) -> dict:
        """The keyword arguments of the problem's `reference_costs` this experiment sets."""
        return {}

    def problem_class(self):
        return PROBLEMS[self.problem]


@dataclass(frozen=True)
class TSPTraining(Training):
    """Notebook 03: TSP, against LKH (Table 2)."""

    notebook: ClassVar[str] = "03_train_tsp"
    problem: ClassVar[str] = "tsp"
    max_gap_at_n_train: float = setting(70.0, number(above=0, example=70.0),
                                        "run check: every model within this % of LKH at N (untrained: 80-115 %)")
    lkh_runs: int = setting(1, integer(1))

    def reference_options(self):
        return {"runs": self.lkh_runs}


@dataclass(frozen=True)
class CVRPTraining(Training):
    """Notebook 04: CVRP per vehicle capacity, against HGS (Tables 3 and 4)."""

    notebook: ClassVar[str] = "04_train_cvrp"
    problem: ClassVar[str] = "cvrp"
    cell: ClassVar[tuple] = ("n_train", "n_max", "capacities", "seeds", "epochs", "device", "progress", "run")
    capacities: list[int] = setting([10, 20], list_of(integer(2, 10), [10, 20], unique=True),
                                    "vehicle capacities C_v, one set of models each")
    lr_by_capacity: dict[int, float] = setting({10: 1e-4, 15: 5e-5, 20: 5e-5},
                                               mapping(integer(2), number(above=0), {10: 1e-4, 20: 5e-5}),
                                               "the learning rate of each capacity (the paper's)")
    size_counts_depot: bool = setting(False, flag(), "whether the n the rules see counts the depot")
    test_size: int = setting(128, integer(1, 256))
    reference_size: int = setting(16, integer(0, 32), "HGS on the first instances of each n")
    max_gap_at_n_train: float = setting(150.0, number(above=0, example=150.0),
                                        "run check: every model within this % of HGS at N (untrained: 280-370 %)")
    hgs_iterations: int = setting(2000, integer(1, 2000), "HGS iterations per instance (reproducible)")
    hgs_time_limit: float | None = setting(None, optional(number(above=0, example=1.0)),
                                           "optional cap in seconds per instance (machine-dependent results)")
    time_size: int = setting(32, integer(1, 32), "Table 4: instances decoded per n and method, timed")
    time_repeats: int = setting(3, integer(1, 3), "the median of this many timings")

    def conditions(self):
        problems = super().conditions()
        missing = [c for c in self.capacities if c not in self.lr_by_capacity]
        if missing:
            problems.append(f"lr_by_capacity has no learning rate for capacities {missing}; add them, e.g. "
                            f"-y 'lr_by_capacity: {yaml_flow({**self.lr_by_capacity, missing[0]: 5e-5})}'")
        return problems

    def problem_settings(self):
        return [({"capacity": c, "size_counts_depot": self.size_counts_depot}, self.lr_by_capacity[c])
                for c in self.capacities]

    def reference_options(self):
        return {"iterations": self.hgs_iterations, "time_limit": self.hgs_time_limit}


@dataclass(frozen=True)
class BPPTraining(Training):
    """Notebook 05: 3D bin packing per bin, against three sort-then-place heuristics (Table 1)."""

    notebook: ClassVar[str] = "05_train_bpp"
    problem: ClassVar[str] = "bpp"
    n_train: int = setting(10, integer(2, 20), "training length N (boxes)")
    n_max: int = setting(40, integer(3, 160), "test at N, 2N, 4N, ... up to n_max")
    bins: list[list[int]] = setting([[120, 100]],
                                    list_of(list_of(integer(50), [120, 100], length=2), [[120, 100]], unique=True),
                                    "bin footprints L x W, one set of models each")
    epochs: int = setting(2, integer(1, 4))
    steps_per_epoch: int = setting(3, integer(1, 10))
    batch_size: int = setting(16, integer(1, 64))
    baseline_eval_size: int = setting(32, integer(2, 256))
    test_size: int = setting(16, integer(1, 256))
    reference_size: int = setting(16, integer(0, 32), "the heuristics on the first instances of each n")
    eval_chunk: int = setting(64, integer(1, 256))

    def problem_settings(self):
        return [({"length": int(length), "width": int(width)}, self.lr) for length, width in self.bins]


@dataclass(frozen=True)
class RivalsTraining(TSPTraining):
    """Notebook 08: EIE against PENS's distance bias and RoPE, Scalable-Softmax, coordinate
    rescaling and the Pointer Network on TSP; TSPLIB."""

    notebook: ClassVar[str] = "08_rivals"
    rules: list[str] = setting(["inv_sqrt_d", "ssmax", "dist_bias", "rope", "ptrnet"],
                               list_of(method_key(trained=True), ["inv_sqrt_d"], unique=True), "trained at N")
    training_free: list[str] = setting(
             ["eie", "exact", "log_N", "rescale", "eie_rescale", "rescale_dist_bias", "eie_dist_bias", "eie_rope",
              "bias_rescale", "eie_bias_rescale", "rope_rescale"],
             list_of(method_key(trained=False), ["eie"], nonempty=False, unique=True), "applied at test time")
    test_size: int = setting(128, integer(1, 256))
    reference_size: int = setting(16, integer(0, 32), "LKH on the first instances of each n")
    max_gap_at_n_train: float = setting(150.0, number(above=0, example=90.0),
                                        "run check: within this % of LKH at N (the Pointer Network learns slowest)")
    alpha: float = setting(0.05, number(above=0, at_most=0.5, example=0.05), "paired tests, Holm-corrected")
    rescale_factors: list[float] = setting([1.0, 1.25, 1.5, 2.0, 3.0],
                                           list_of(number(above=0, example=1.5), [1.0, 1.5, 2.0], unique=True),
                                           "fixed coordinate factors of the sweep")
    sweep_models: list[str] = setting(["inv_sqrt_d", "dist_bias"],
                                      list_of(method_key(trained=True), ["inv_sqrt_d", "dist_bias"], unique=True),
                                      "the models the sweep rescales (those in rules)")
    permutation_orderings: int = setting(3, integer(1, 2), "random input orders per instance")
    permutation_instances: int = setting(32, integer(1, 32))
    probe_instances: int = setting(4, integer(1, 4), "test instances whose attention rows are measured")
    entropy_samples: int = setting(256, integer(16, 512), "Monte-Carlo instances per n (receptive field)")
    entropy_radius: float = setting(0.25, number(above=0, example=0.25), "attention mass within this distance")
    trf_eps: float = setting(0.05, number(above=0, at_most=0.5, example=0.05), "the TRF holds 1 - eps of the mass")
    tsplib_max_n: int | None = setting(200, optional(integer(51, 200)), "TSPLIB instances up to this size (None: all)")

    def conditions(self):
        problems = super().conditions()
        if "inv_sqrt_d" not in self.rules:
            problems.append("rules must include 'inv_sqrt_d': every rival is compared with the 1/sqrt(d) model, and "
                            "EIE and the rescaling sweep run on it")
        if self.sweep_models and not any(key in self.rules for key in self.sweep_models):
            problems.append(f"sweep_models names {self.sweep_models}, none of which rules trains (the sweep runs on "
                            f"those of sweep_models that rules has): add one to rules or name one of {self.rules}")
        if 1.0 not in self.rescale_factors:
            problems.append("rescale_factors must include 1.0 (the unscaled model the others are compared with)")
        return problems


@dataclass(frozen=True)
class ExtrapolationTables(Experiment):
    """Notebook 06: Tables 1-3 in the paper's layout from a run's result files."""

    notebook: ClassVar[str] = "06_extrapolation_tables"
    run: str = setting("cpu_long_v2", RUN, "results/<run>/ to read (and write the tables to)")
    alpha: float = setting(0.05, number(above=0, at_most=0.5, example=0.05),
                           "family-wise error level of the paired comparisons (Holm over each table)")


@dataclass(frozen=True)
class Appendix(Experiment):
    """Notebook 07: inside the trained TSP models (entropy per layer, Figure 6, Theorem 1)."""

    notebook: ClassVar[str] = "07_appendix"
    run: str = setting("cpu_long_v2", RUN, "results/<run>/models/ holds the trained TSP policies")
    n_train: int = setting(20, integer(2, 20), "their training length N")
    n_max: int = setting(320, integer(3, 320), "probe at N, 2N, ... up to n_max")
    seed: int = setting(0, integer(0), "which training seed's models")
    rules: list[str] = setting(["inv_sqrt_d", "ln_d", "ln_sqrt_d"],
                               list_of(one_of("inv_sqrt_d", "ln_d", "ln_sqrt_d"), ["inv_sqrt_d", "ln_d"], unique=True),
                               "the trained rules whose models the run has (inv_sqrt_d required)")
    instances: int = setting(16, integer(1, 16), "test instances per n for the entropy measurements")
    permutation_instances: int = setting(4, integer(1, 4), "test instances per n for the Theorem 1 check")
    js_instances: int = setting(64, integer(1, 64), "instances at the training length for Figure 6")
    test_seed: int = setting(4321, integer(0, 4321))

    def conditions(self):
        problems = _lengths(self)
        if "inv_sqrt_d" not in self.rules:
            problems.append("rules must include 'inv_sqrt_d': Figure 6 and the training-free methods (EIE, exact, "
                            "log_N) probe the model trained with it")
        return problems


@dataclass(frozen=True)
class Findings(Experiment):
    """Notebook 09: the verdict tables and figure from the committed result files."""

    notebook: ClassVar[str] = "09_findings"
    run: str = setting("default", RUN, "figures/verdict.png for 'default', figures/verdict_<run>.png otherwise")


@dataclass(frozen=True)
class LambdaSweeps(Experiment):
    """Notebook 10: the constant scales a trained model wants at n, per seed and over seeds."""

    notebook: ClassVar[str] = "10_lambda_sweeps"
    run: str = setting("cpu_paper", RUN, "results/<run>/ whose sweeps are read")


# TrainConfig fields an experiment does not pass as such: the problem and its options come from the
# experiment's problem settings (with their learning rate), the rule and seed from the model's place
# in the grid, the model from the experiment's `ModelConfig` settings (`model_config`); `alpha` (the
# baseline's test level) keeps TrainConfig's value.
_NOT_OPTIONS = {"problem", "problem_options", "rule", "seed", "model", "lr", "alpha"}


def _check_by_type(default) -> Check:
    if isinstance(default, bool):
        return flag()
    if isinstance(default, int):
        return integer(example=default)
    if isinstance(default, float):
        return number(example=default)
    if isinstance(default, str):
        return text()
    raise TypeError(f"TrainConfig option of a type an experiment cannot check: {default!r}")


def with_training_options(cls: type[Training], config: type | None = None) -> type[Training]:
    """`cls` with a setting for every field of `config` (a TrainConfig) it does not declare: that
    field's default, checked by its type. So a new training option is one field of TrainConfig."""
    config = config or TrainConfig
    declared = set(cls.names())
    extra = [(spec.name, spec.type, setting(spec.default, _check_by_type(spec.default)))
             for spec in dataclasses.fields(config)
             if spec.name not in declared and spec.name not in _NOT_OPTIONS and spec.default is not dataclasses.MISSING]
    if not extra:
        return cls
    return dataclass(frozen=True)(type(cls.__name__, (cls,), {
        "__annotations__": {name: kind for name, kind, _ in extra}, **{name: value for name, _, value in extra},
        "__doc__": cls.__doc__, "__module__": cls.__module__, "__qualname__": cls.__qualname__}))


def model_config(experiment: Training) -> ModelConfig:
    """The model of `experiment`: its settings that are fields of `ModelConfig`, the rest at their defaults."""
    names = {spec.name for spec in dataclasses.fields(ModelConfig)}
    return ModelConfig(**{name: experiment[name] for name in experiment if name in names})


def training_options(experiment: Training, config: type | None = None) -> dict:
    """The settings of `experiment` that are fields of `config` (a TrainConfig): what the training
    loop takes from it, besides the problem, its options, the rule, the seed and the model."""
    names = {spec.name for spec in dataclasses.fields(config or TrainConfig)} - _NOT_OPTIONS
    options = {name: experiment[name] for name in experiment if name in names}
    options["sites"] = tuple(options["sites"])
    return options


EXPERIMENTS: dict[str, type[Experiment]] = {}


def register(cls: type[Experiment]) -> type[Experiment]:
    """Declare an experiment under its notebook's name (a training one takes TrainConfig's options)."""
    if issubclass(cls, Training):
        if cls.problem not in PROBLEMS:
            raise ValueError(f"{cls.__name__}.problem = {cls.problem!r} is not a problem of eie.problems.PROBLEMS "
                             f"({', '.join(PROBLEMS)})")
        cls = with_training_options(cls)
    EXPERIMENTS[cls.notebook] = cls
    return cls


for _cls in (EntropyAnalysis, FitEIE, TSPTraining, CVRPTraining, BPPTraining, ExtrapolationTables, Appendix,
             RivalsTraining, Findings, LambdaSweeps):
    register(_cls)


def get(notebook: str) -> type[Experiment]:
    """The experiment class of `notebook`."""
    if notebook not in EXPERIMENTS:
        raise ValueError(f"unknown notebook {notebook!r}; choose from {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[notebook]


def training_notebooks() -> list[str]:
    """Every notebook that trains models, in the order of `EXPERIMENTS`."""
    return [name for name, cls in EXPERIMENTS.items() if issubclass(cls, Training)]


def training_notebook(problem: str) -> str:
    """The notebook of `problem`'s own training experiment (the first declared that trains it)."""
    for name, cls in EXPERIMENTS.items():
        if issubclass(cls, Training) and cls.problem == problem:
            return name
    raise ValueError(f"no training experiment trains {problem!r}; register one (eie.experiments.register)")


def configure(notebook: str, values: Mapping) -> Experiment:
    """The experiment of `notebook` from `values` (a notebook's globals(), a dict, a preset's values):
    the values of its settings over its defaults, with `preset` (a preset file's path) and
    `per_notebook` applied first. Names it does not declare are left alone; a value of None for a
    setting that does not take None means "not given". Raises one ValueError for every bad value."""
    cls = get(notebook)
    if isinstance(values, cls):
        return values
    values = dict(values)
    given = {}
    preset = values.get("preset")
    if preset:
        path = Path(preset)
        if not path.is_file() and (repo_root() / path).is_file():
            path = repo_root() / path
        if not path.is_file():
            known = sorted(p.stem for p in (repo_root() / "presets").glob("*.yaml"))
            raise FileNotFoundError(f"no preset file {preset}; presets: {', '.join(known)} (presets/NAME.yaml)")
        given.update(load_preset(path))
    takes_none = {spec.name for spec in dataclasses.fields(cls) if spec.default is None} - set(cls.cell)
    given.update({k: v for k, v in values.items() if k != "preset" and (v is not None or k in takes_none)})
    per_notebook = given.get("per_notebook", {}) or {}
    if not isinstance(per_notebook, dict) or not all(isinstance(v, dict) for v in per_notebook.values()):
        raise ValueError(f"notebook {notebook}: per_notebook must map notebook names to their values, e.g. "
                         f"per_notebook: {{05_train_bpp: {{batch_size: 64}}}}; got {per_notebook!r}")
    unknown = sorted(set(per_notebook) - set(EXPERIMENTS))
    if unknown:
        raise ValueError(f"notebook {notebook}: per_notebook names unknown notebooks {unknown}; "
                         f"choose from {', '.join(EXPERIMENTS)}")
    given.update(per_notebook.get(notebook, {}))
    chosen = {name: given[name] for name in cls.names()
              if name in given and (given[name] is not None or name in takes_none)}
    return cls(**chosen)


def load_preset(path) -> dict:
    """A preset file's values, checked for what papermill would silently drop: unreadable YAML, a key
    given twice, a name no experiment declares (at the top level) or that its notebook's experiment
    does not declare (under `per_notebook`), each error naming the file and the nearest valid name."""
    values = read_yaml(path)
    known = {name for cls in EXPERIMENTS.values() for name in cls.names()}

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
        if notebook not in EXPERIMENTS:
            close = difflib.get_close_matches(str(notebook), sorted(EXPERIMENTS), n=1)
            problems.append(f"per_notebook: {notebook!r} is not a notebook"
                            f"{' (did you mean ' + repr(close[0]) + '?)' if close else ''}")
        elif not isinstance(own, dict):
            problems.append(f"per_notebook: {notebook}'s entry must be a mapping, got {own!r}")
        else:
            problems += unknown(own, EXPERIMENTS[notebook].names(), f"per_notebook: {notebook}: ")
    if problems:
        raise ValueError(f"preset {path}: " + "; ".join(problems))
    return values


def load(notebook: str, preset=None, **overrides) -> Experiment:
    """The experiment of `notebook` under a preset file (as `papermill -f` gives it) and `overrides`."""
    return configure(notebook, {"preset": str(preset) if preset else "", **overrides})


def _type_name(hint) -> str:
    return hint.__name__ if isinstance(hint, type) else str(hint).replace(" ", "")


def describe(notebook: str) -> str:
    """Every setting of `notebook`'s experiment: name, type, default, what it must be, what it means."""
    cls = get(notebook)
    hints = typing.get_type_hints(cls)
    lines = [f"{notebook} ({cls.__name__}): {(cls.__doc__ or '').splitlines()[0]}"]
    for spec in dataclasses.fields(cls):
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        kind = _type_name(hints[spec.name])
        lines.append(f"  {spec.name}: {kind} = {default!r}  ({spec.metadata['check'].description})"
                     + (f"  {spec.metadata['help']}" if spec.metadata["help"] else ""))
    return "\n".join(lines)


def parameter_cell(notebook: str) -> str:
    """The source of `notebook`'s parameter cell: `preset` and the settings the experiment lists in
    `cell`, each None (the preset's value, else the default), with its type and default in a comment."""
    cls = get(notebook)
    hints = typing.get_type_hints(cls)
    specs = {spec.name: spec for spec in dataclasses.fields(cls)}
    lines = ['preset = ""  # type: str  a preset file (presets/NAME.yaml) whose values replace the defaults; '
             f'every setting: python -m eie.experiments {notebook}']
    for name in cls.cell:
        spec = specs[name]
        default = spec.default if spec.default is not dataclasses.MISSING else spec.default_factory()
        kind = _type_name(hints[name])
        lines.append(f"{name} = None  # type: {kind}  None: the preset's, else {default!r}"
                     + (f"; {spec.metadata['help']}" if spec.metadata["help"] else ""))
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Print the settings of a notebook's experiment: name, type, "
                                                 "default, what it must be.")
    parser.add_argument("notebook", nargs="?", choices=list(EXPERIMENTS), help="every notebook when left out")
    args = parser.parse_args(argv)
    print("\n\n".join(describe(name) for name in ([args.notebook] if args.notebook else EXPERIMENTS)))


if __name__ == "__main__":
    main()
