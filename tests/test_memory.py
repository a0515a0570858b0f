"""Calls whose memory grows with n are refused before they start when they cannot fit, with the
largest length that would."""

import re
import time

import pytest
import torch

from eie import extrapolation, memory, study
from eie.eie_net import fit_eie
from eie.entropy import eq6_bytes
from eie.evaluation import decoding_bytes, fixed_test_set, greedy_costs
from eie.problems import make_problem
from eie.scaling import solve_exact
from eie.training import TrainConfig, build_model, train

GIB = 2**30


@pytest.fixture
def one_gib(monkeypatch):
    monkeypatch.setattr(memory, "available_bytes", lambda device="cpu": GIB)


def largest_named(error) -> int:
    return int(re.search(r"the largest \w+ that fits is (\d+)", str(error)).group(1))


@pytest.mark.parametrize("call, need", [
    (lambda: fit_eie(16, 10, 100_000, epochs=1, progress=False), lambda n: eq6_bytes(256, 16, n)),
    (lambda: solve_exact(16, 10, 100_000), None),
])
def test_the_eie_fit_and_lambda_star_refuse_an_n_max_that_does_not_fit_and_name_the_largest_that_does(one_gib, call, need):
    start = time.perf_counter()
    with pytest.raises(memory.NotEnoughMemory, match="at N_max = 100000 needs about .* GiB; 1.0 GiB is available") as caught:
        call()
    assert time.perf_counter() - start < 1.0
    largest = largest_named(caught.value)
    if need is not None:
        assert need(largest) <= memory.USABLE_SHARE * GIB < need(largest + 1)
    assert 10 < largest < 100_000


def test_an_impossible_length_is_refused_on_any_machine_without_allocating():
    start = time.perf_counter()
    with pytest.raises(memory.NotEnoughMemory, match="the largest N_max that fits is"):
        fit_eie(16, 10, 10**8, epochs=1, progress=False)
    with pytest.raises(memory.NotEnoughMemory, match="lower test_size"):
        fixed_test_set(make_problem("tsp"), 100, 10**12)
    assert time.perf_counter() - start < 1.0


def test_greedy_decoding_refuses_a_chunk_that_does_not_fit(one_gib):
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    instance = make_problem("tsp").generate(64, 4000, torch.Generator().manual_seed(0))
    with pytest.raises(memory.NotEnoughMemory, match="chunk of 64 instances at n = 4000 .* largest n that fits is") as caught:
        greedy_costs(model, instance, chunk=64)
    assert decoding_bytes(model, largest_named(caught.value), 64) <= memory.USABLE_SHARE * GIB
    small = make_problem("tsp").generate(2, 20, torch.Generator().manual_seed(0))
    assert greedy_costs(model, small, chunk=64).shape == (2,)  # what fits runs


def test_a_distance_bias_counts_its_pairs():
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    (plain, biased) = extrapolation.bind_methods(["inv_sqrt_d", "dist_bias"], 16, 10)
    assert decoding_bytes(model, 1000, 8, biased) - decoding_bytes(model, 1000, 8, plain) == 8 * 1000**2 * 8 * 6


def test_the_evaluation_of_a_run_is_refused_before_its_first_length(one_gib, monkeypatch):
    params = {"n_train": 10, "n_max": 100_000, "eval_chunk": 256, "test_size": 1024, "device": "cpu"}
    model = build_model(TrainConfig(rule="inv_sqrt_d", n_train=10)).eval()
    methods = extrapolation.bind_methods(["inv_sqrt_d"], 16, 10)
    monkeypatch.setattr(study, "evaluate", lambda *a, **k: pytest.fail("evaluation started"))
    with pytest.raises(memory.NotEnoughMemory, match="at n = 81920 .* the largest n that fits is"):
        next(study._evaluate_setting(make_problem("tsp"), params, methods, {("inv_sqrt_d", 0): model}, None))


def test_training_refuses_a_batch_that_does_not_fit_before_writing_anything(tmp_path):
    config = TrainConfig(rule="inv_sqrt_d", n_train=100, batch_size=10**9, epochs=1)
    with pytest.raises(memory.NotEnoughMemory, match="training step of 1000000000 instances .* largest batch_size"):
        train(config, tmp_path / "run", progress=False, device="cpu")
    assert not (tmp_path / "run").exists()
