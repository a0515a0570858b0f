"""Malformed instances are refused at the library's boundary with a ValueError that names the instance,
the field and the value; decoding never runs on without end; a bad box never reaches the compiled
placement kernel."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
import torch

from eie.evaluation import greedy_costs
from eie.problems.base import CheckedInstance
from eie.training import TrainConfig, build_model

PROBLEMS = [("tsp", {}), ("cvrp", {"capacity": 10.0}), ("bpp", {"length": 60, "width": 50})]


@contextmanager
def at_most(seconds: float):
    """Fail (instead of hanging) when the block runs longer than `seconds`."""
    def expired(*_):
        raise TimeoutError(f"took longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def model_for(problem, options):
    torch.manual_seed(0)
    return build_model(TrainConfig(problem=problem, problem_options=options, n_train=8), "cpu").eval()


def test_a_demand_above_the_capacity_is_refused_by_name():
    model = model_for("cvrp", {"capacity": 10.0})
    instance = dict(model.problem.generate(2, 8, torch.Generator().manual_seed(0)))
    instance["demand"] = instance["demand"].clone()
    instance["demand"][0, 3] = 5.0  # 50 units on a vehicle of 10
    with at_most(5), pytest.raises(ValueError, match=r"instance 0, field 'demand' at node 3: 5 is outside \[0, 1\]"):
        greedy_costs(model, instance)


def test_decoding_with_no_allowed_action_stops_with_an_error():
    """Even past the check (an instance passed off as generated), the loop has a step limit."""
    model = model_for("cvrp", {"capacity": 10.0})
    instance = model.problem.generate(2, 8, torch.Generator().manual_seed(0))
    instance["demand"][0, 3] = 5.0
    with at_most(20), torch.no_grad(), pytest.raises(RuntimeError, match="no allowed action"):
        model.rollout(CheckedInstance(instance))


def test_a_zero_sized_box_is_refused_before_the_compiled_kernel():
    """In a fresh interpreter (a crash in the kernel would kill it): a ValueError, exit status 0."""
    script = """
import torch
from eie.evaluation import greedy_costs
from eie.training import TrainConfig, build_model
model = build_model(TrainConfig(problem="bpp", problem_options={"length": 60, "width": 50}, n_train=8), "cpu")
x = dict(model.problem.generate(2, 6, torch.Generator().manual_seed(0)))
x["dims"] = x["dims"].clone(); x["dims"][0, 2, 0] = 0
for call in (lambda: greedy_costs(model, x), lambda: model.problem.reference_costs(x)):
    try:
        call()
    except ValueError as error:
        print("refused:", error)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.count("refused: bin-packing instance 0, field 'dims' at box 2, edge 0: 0 is outside") == 2


def malformed(problem, instance: dict, generator: torch.Generator):
    """(what, instance) pairs: one field of a valid batch made wrong in one way."""
    out = []
    for key, value in instance.items():
        floats = value.dtype.is_floating_point
        for what in ("nan", "inf", "negative", "zero", "dtype", "shape", "missing", "list"):
            bad = {k: v.clone() for k, v in instance.items()}
            b = int(torch.randint(value.shape[0], (1,), generator=generator))
            i = 1 + int(torch.randint(value.shape[1] - 1, (1,), generator=generator))  # never the CVRP depot
            if what in ("nan", "inf"):
                if not floats:
                    continue
                bad[key][b, i] = float(what)
            elif what == "negative":
                if key == "coords":
                    continue  # negative coordinates are valid on [-1, 1]^2
                bad[key][b, i] = -bad[key][b, i].abs() - 1
            elif what == "zero":
                if key == "coords" or (problem == "cvrp" and key == "demand"):
                    continue  # a city at the origin is valid, and so is a destination of zero demand
                bad[key][b, i] = 0
            elif what == "dtype":
                bad[key] = value.double() if floats else value.float()
            elif what == "shape":
                bad[key] = value[..., :1] if value.dim() == 3 else value[:, :, None]
            elif what == "missing":
                del bad[key]
            elif what == "list":
                bad[key] = value.tolist()
            out.append((f"{key}:{what}", bad))
    return out


@pytest.mark.parametrize("problem,options", PROBLEMS, ids=[p for p, _ in PROBLEMS])
def test_every_entry_point_refuses_random_malformed_instances_within_a_second(problem, options):
    model = model_for(problem, options)
    generator = torch.Generator().manual_seed(7)
    valid = dict(model.problem.generate(3, 7, generator))
    cases = malformed(problem, valid, generator)
    assert len(cases) >= 5
    entry_points = {"check_instance": model.problem.check_instance, "greedy_costs": lambda x: greedy_costs(model, x),
                    "rollout": lambda x: model.rollout(x), "reference_costs": model.problem.reference_costs}
    for what, instance in cases:
        for name, call in entry_points.items():
            started = time.perf_counter()
            with at_most(5), torch.no_grad(), pytest.raises(ValueError):
                call(instance)
            assert time.perf_counter() - started < 1.0, f"{problem} {what} via {name}: refused too slowly"
    model.problem.check_instance(valid)  # the valid batch passes


def test_the_error_names_the_instance_field_and_value():
    model = model_for("tsp", {})
    x = dict(model.problem.generate(4, 5, torch.Generator().manual_seed(0)))
    x["coords"] = x["coords"].clone()
    x["coords"][2, 1, 0] = float("nan")
    with pytest.raises(ValueError, match=r"tsp instance 2, field 'coords' at \(1, 0\): nan is not finite"):
        model.problem.check_instance(x)
