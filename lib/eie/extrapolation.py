"""The extrapolation evaluation: every method on the fixed test sets at n = N * 2^k up to N_max,
each on its trained models, with the reference solver on the first instances, into one long table
(`RESULT_COLUMNS`) and per-instance objectives; and Table 4's inference timings. Finished pieces are
kept in an evaluation store (`eie.evaluation_store`), so an interrupted evaluation resumes.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from . import methods as registry
from .evaluation import extrapolation_lengths, fixed_test_set, greedy_costs, inference_seconds, median_seconds
from .evaluation_store import (
    EvaluationStore,
    function_fingerprint,
    model_fingerprint,
    rule_fingerprint,
    tensors_fingerprint,
)
from .methods import BoundMethod
from .paper import PAPER_CVRP_TIME_H
from .training import resolve_device

RESULT_COLUMNS = ["problem", "setting", "method", "seed", "n", "objective", "gap_pct"]


def bind_methods(method_keys, d: int, N: int, net=None, table=None) -> list[BoundMethod]:
    """The registered methods `method_keys` ready to evaluate: rules built for head size d, training
    length N, the fitted EIE net and the lambda* table (`eie.methods.bind`)."""
    return registry.bind(method_keys, d, N, net=net, table=table)


def evaluate(models: dict, methods: list[BoundMethod], n_train: int, n_max: int, test_size: int, setting: str = "",
             test_seed: int = 1234, reference_size: int = 32, reference_options: dict | None = None,
             chunk: int = 256, device: str = "auto", progress: bool = True, store: EvaluationStore | None = None):
    """Every method (`bind_methods`) on the fixed test sets at n = N * 2^k <= n_max; each runs on
    `models[(method.model_key, seed)]` for every seed of `models`.

    `objective` is the cost (tour length, distance), or for a problem with `maximise = True` (bin
    packing) minus the cost (the load rate); `gap_pct` is positive where the method is worse than the
    reference either way. With a `store` (`eie.evaluation_store`) each finished piece is kept, and a
    rerun reads it back: an interrupted evaluation resumes. Returns (long table with RESULT_COLUMNS,
    per-instance objectives {(setting, method, seed, n): array}, reference objectives {n: array}).
    """
    device = resolve_device(device)
    any_model = next(iter(models.values()))
    problem = any_model.problem
    sign = -1.0 if problem.maximise else 1.0  # objective = sign * cost
    seeds = sorted({seed for _, seed in models})
    lengths = extrapolation_lengths(n_train, n_max)
    rows, per_instance, references = [], {}, {}
    bar = tqdm(total=len(lengths) * (1 + len(seeds) * len(methods)), desc=f"evaluate {problem.name}",
               disable=not progress, mininterval=1.0)
    store = store or EvaluationStore(None)
    models_key = {key: {"weights": model_fingerprint(model), "sites": list(model.attention.sites),
                        "n_mode": model.attention.n_mode, "precision": model.encoder_precision}
                  for key, model in models.items()}
    code = function_fingerprint(evaluate)
    for n in lengths:
        instances = fixed_test_set(problem, n, test_size, test_seed, device)
        k = min(reference_size, test_size)
        piece = {"problem": problem.name, "options": {name: repr(value) for name, value in vars(problem).items()},
                 "setting": setting, "n": n, "test_size": test_size, "test_seed": test_seed,
                 "instances": tensors_fingerprint(instances), "code": code}
        reference = store.get_or_compute(
            {**piece, "kind": "reference", "reference_size": k, "reference_options": reference_options or {}},
            lambda k=k, instances=instances: sign * problem.reference_costs(
                {key: v[:k] for key, v in instances.items()}, **(reference_options or {})) if k > 0 else np.array([]))
        references[n] = reference
        bar.update()
        for seed in seeds:
            for method in methods:
                model_key = (method.model_key, seed)
                objective = store.get_or_compute(
                    {**piece, "kind": "method", "method": method.key, "model": models_key[model_key], "N": method.N,
                     "lambda_n": float(method.rule(n)), "lambdas": rule_fingerprint(method.rule, n),
                     "device": device.type},
                    lambda model=models[model_key], instances=instances, method=method: sign * greedy_costs(
                        model.to(device), instances, method, chunk=chunk).cpu().numpy())
                per_instance[(setting, method.key, seed, n)] = objective
                gap = 100 * sign * (objective[:k].mean() / reference.mean() - 1) if k > 0 else float("nan")
                rows.append({"problem": problem.name, "setting": setting, "method": method.key, "seed": seed, "n": n,
                             "objective": float(objective.mean()), "gap_pct": float(gap)})
                bar.update()
        rows.append({"problem": problem.name, "setting": setting, "method": "reference", "seed": -1, "n": n,
                     "objective": float(reference.mean()) if k > 0 else float("nan"), "gap_pct": 0.0})
    bar.close()
    return pd.DataFrame(rows, columns=RESULT_COLUMNS), per_instance, references


def inference_times(model, methods: list[BoundMethod], n_train: int, n_max: int, size: int, test_seed: int = 1234,
                    repeats: int = 3, chunk: int = 256, device: str = "auto", progress: bool = True) -> pd.DataFrame:
    """Table 4: median seconds to decode `size` test instances greedily at each n with each method,
    all on the same model and instances, measured in one run (columns n, method, instances,
    seconds, seconds_per_instance)."""
    device = resolve_device(device)
    model = model.to(device)
    problem = model.problem
    rows = []
    lengths = extrapolation_lengths(n_train, n_max)
    for n in tqdm(lengths, desc="inference time", disable=not progress):
        instances = fixed_test_set(problem, n, size, test_seed, device)
        for method in methods:
            seconds = inference_seconds(model, instances, method, chunk, repeats)
            rows.append({"n": n, "method": method.key, "instances": size, "seconds": seconds,
                         "seconds_per_instance": seconds / size})
    return pd.DataFrame(rows)


def inference_time_table(timing: pd.DataFrame, base: str = "inv_sqrt_d", method: str = "eie") -> pd.DataFrame:
    """Table 4's layout from `inference_times`: by n, seconds for `base` and `method` on the timed
    instances, their difference, the hours 16384 instances would take at `base`'s rate, and the
    paper's hours (`eie.paper.PAPER_CVRP_TIME_H`)."""

    size = int(timing.instances.iloc[0])
    wide = timing.pivot(index="n", columns="method", values="seconds")
    return pd.DataFrame({
        f"{registry.label(base)}, {size} inst. (s)": wide[base], f"{registry.label(method)}, {size} inst. (s)": wide[method],
        f"{registry.label(method)} - {registry.label(base)} (s)": wide[method] - wide[base],
        "16384 inst. at this rate (h)": wide[base] / size * 16384 / 3600,
        "paper, Table 4 (h)": [PAPER_CVRP_TIME_H.get(n, float("nan")) for n in wide.index]})


def eie_net_seconds(net, n: float, repeats: int = 101) -> float:
    """Median seconds of one evaluation lambda(n) of the EIE net (what EIE adds to a decoding run)."""
    with torch.no_grad():
        return median_seconds(lambda: net(float(n)), repeats)


def save_instance_costs(per_instance: dict, path) -> None:
    """Per-instance objectives {(setting, method, seed, n): array} (what `evaluate` returns, merged over
    settings) as one .npz, entries 'setting/method|seed|n' ('method|seed|n' without a setting), the
    layout `comparison.load_instance_objectives` reads back."""
    np.savez_compressed(path, **{f"{setting + '/' if setting else ''}{m}|{s}|{n}": v
                                 for (setting, m, s, n), v in per_instance.items()})
