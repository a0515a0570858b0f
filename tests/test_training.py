import numpy as np
import pandas as pd
import pytest
import torch

from eie import model as model_module
from eie.checkpoints import export_policy, kept_policy
from eie.model import DecoderCache
from eie.run_checks import RunCheckFailed, check_training_log
from eie.training import (
    TrainConfig,
    build_model,
    finished_training,
    greedy_cost,
    load_trained,
    paired_t_test_p,
    plateau_action,
    plateau_reached,
    sampling_restart_seed,
    train,
)

SMALL = dict(problem="tsp", n_train=8, steps_per_epoch=2, batch_size=16, baseline_eval_size=32, lr=1e-3)


def test_resume_ends_where_an_uninterrupted_run_ends(tmp_path):
    straight = train(TrainConfig(epochs=3, **SMALL), tmp_path / "a", progress=False, device="cpu")
    train(TrainConfig(epochs=2, **SMALL), tmp_path / "b", progress=False, device="cpu")  # "interrupted" after 2
    resumed = train(TrainConfig(epochs=3, **SMALL), tmp_path / "b", progress=False, device="cpu")
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert len(resumed.log) == 3
    pd_cols = ["train_cost", "baseline_cost", "eval_cost", "p_value"]
    assert np.allclose(straight.log[pd_cols].to_numpy(), resumed.log[pd_cols].to_numpy())


def test_a_checkpoint_holding_another_devices_sampling_state_resumes_from_the_recorded_restart(tmp_path, capsys):
    """A checkpoint moved between a GPU and a CPU holds the other kind of generator's state (a CUDA
    Philox state is 16 bytes, a CPU Mersenne twister's 5056): training resumes with the sampling
    stream restarted from `sampling_restart_seed`, exactly as from a checkpoint that held that stream."""
    straight = train(TrainConfig(epochs=3, **SMALL), tmp_path / "straight", progress=False, device="cpu")
    for run, sampling in (("moved", torch.zeros(16, dtype=torch.uint8)),
                          ("restarted", torch.Generator().manual_seed(sampling_restart_seed(0, 2)).get_state())):
        train(TrainConfig(epochs=2, **SMALL), tmp_path / run, progress=False, device="cpu")
        (checkpoint,) = (tmp_path / run).glob("*.pt")
        payload = torch.load(checkpoint, weights_only=True)
        payload["sample_gen"] = sampling
        torch.save(payload, checkpoint)
    capsys.readouterr()
    moved = train(TrainConfig(epochs=3, **SMALL), tmp_path / "moved", progress=False, device="cpu")
    assert f"sampling restarted from seed {sampling_restart_seed(0, 2)}" in capsys.readouterr().out
    restarted = train(TrainConfig(epochs=3, **SMALL), tmp_path / "restarted", progress=False, device="cpu")
    assert "restarted" not in capsys.readouterr().out  # its state is a CPU generator's: set as it is
    pairs = list(zip(moved.model.state_dict().values(), restarted.model.state_dict().values(),
                     straight.model.state_dict().values(), strict=True))
    assert all(torch.equal(p, q) for p, q, _ in pairs)
    assert not all(torch.equal(p, r) for p, _, r in pairs)  # the third epoch sampled another stream


def test_the_warm_up_trains_otherwise_and_resumes_exactly(tmp_path):
    """Kool et al.'s warm-up: the first `warmup_epochs` epochs learn against an exponential baseline
    (so the parameters differ from the rollout baseline's run), its value is checkpointed (an
    interrupted run ends where an uninterrupted one ends), and 0 keeps old checkpoints' key."""
    warm = dict(SMALL, warmup_epochs=2)
    straight = train(TrainConfig(epochs=3, **warm), tmp_path / "a", progress=False, device="cpu")
    train(TrainConfig(epochs=1, **warm), tmp_path / "b", progress=False, device="cpu")  # stopped inside the warm-up
    resumed = train(TrainConfig(epochs=3, **warm), tmp_path / "b", progress=False, device="cpu")
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    assert torch.load(straight.checkpoint, weights_only=False)["warmup_baseline"] is not None
    rollout = train(TrainConfig(epochs=3, **SMALL), tmp_path / "c", progress=False, device="cpu")
    assert not torch.equal(rollout.model.state_dict()["embed.linear.weight"], straight.model.state_dict()["embed.linear.weight"])
    assert "warmup_epochs" not in TrainConfig(**SMALL).resume_key() and TrainConfig(**warm).resume_key()["warmup_epochs"] == 2
    with pytest.raises(ValueError, match="warmup_epochs"):
        TrainConfig(**dict(SMALL, warmup_epochs=-1))


def test_checkpoint_guards(tmp_path):
    result = train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    with pytest.raises(ValueError, match="different settings \\(lr\\)"):
        train(TrainConfig(epochs=2, **{**SMALL, "lr": 5e-4}), tmp_path, name="run", progress=False, device="cpu")
    model = load_trained(result.checkpoint)
    assert model.attention.rule.key == "inv_sqrt_d"
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot be read"):
        train(TrainConfig(epochs=1, **SMALL), tmp_path, name="bad", progress=False, device="cpu")
    with pytest.raises(FileNotFoundError, match="no training checkpoint"):
        load_trained(tmp_path / "missing.pt")


def test_training_lowers_the_cost(tmp_path):
    config = TrainConfig(epochs=8, **{**SMALL, "steps_per_epoch": 6, "batch_size": 64})
    torch.manual_seed(config.seed)
    untrained = build_model(config)
    fixed = untrained.problem.generate(256, 8, torch.Generator().manual_seed(99))
    result = train(config, tmp_path, progress=False, device="cpu")
    assert float(greedy_cost(result.model, fixed).mean()) < 0.95 * float(greedy_cost(untrained, fixed).mean())
    assert result.log.baseline_updated.any()


def test_plateau_rule_compares_the_last_window_with_the_one_before():
    falling = [10.0, 9.0, 8.0, 7.0, 6.0, 5.0]
    assert not plateau_reached(falling, 2, 0.001)  # 5.5 is 10 % below 7.5
    assert not plateau_reached(falling[:3], 2, 0.5)  # fewer than 2W epochs: never
    assert plateau_reached(falling, 2, 0.3)  # ... but not 30 % below
    assert plateau_reached([5.0, 5.0, 5.1, 4.95], 2, 0.001)  # 5.025 vs 5.0: got worse
    assert not plateau_reached([5.0] * 10, 0, 0.5)  # window 0: the rule is off
    assert plateau_reached([-71.0, -71.0, -71.01, -71.0], 2, 0.001)  # negative costs (bin packing) work too
    assert not plateau_reached([-70.0, -71.0, -75.0, -76.0], 2, 0.001)


def test_a_run_stops_at_its_plateau_and_a_resumed_one_stops_there_too(tmp_path):
    plateau = dict(plateau_window=1, plateau_tolerance=0.49)  # stops once an epoch is < 49 % better than the last
    stopped = train(TrainConfig(epochs=6, **SMALL, **plateau), tmp_path / "a", progress=False, device="cpu")
    ran = len(stopped.log)
    costs = list(stopped.log.eval_cost)
    assert 2 <= ran < 6 and plateau_reached(costs, 1, 0.49)
    assert not any(plateau_reached(costs[:k], 1, 0.49) for k in range(1, ran))  # the first epoch it held
    again = train(TrainConfig(epochs=6, **SMALL, **plateau), tmp_path / "a", progress=False, device="cpu")
    assert len(again.log) == ran  # resumed: stops again at once
    straight = train(TrainConfig(epochs=ran, **SMALL), tmp_path / "b", progress=False, device="cpu")
    for (name, p), q in zip(straight.model.state_dict().items(), stopped.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name  # the rule only decides when to stop, not what is trained
    longer = train(TrainConfig(epochs=ran + 1, **SMALL), tmp_path / "a", progress=False, device="cpu")
    assert len(longer.log) == ran + 1  # the rule off, the same checkpoint trains on


def _same_weights(first, second) -> bool:
    return all(torch.equal(p, q) for p, q in zip(first.state_dict().values(), second.state_dict().values(), strict=True))


def test_a_finished_run_can_keep_its_rollout_baselines_policy(tmp_path):
    """final_policy = "baseline": the finished run's checkpoint keeps the rollout baseline's weights
    (here, with a test that never passes, the initial ones, epoch 0) beside its last policy, which
    `train`, `load_trained` and `export_policy` give; extending the run resumes from the last policy
    exactly; "last" takes the kept one out again; the choice is not part of the resume key."""
    never = dict(SMALL, alpha=1e-12)  # no policy ever replaces the initial baseline
    last = train(TrainConfig(epochs=3, **never), tmp_path / "last", progress=False, device="cpu")
    config = TrainConfig(epochs=3, final_policy="baseline", **never)
    kept = train(config, tmp_path / "kept", name="m", progress=False, device="cpu")
    assert not last.log.baseline_updated.any()
    torch.manual_seed(config.seed)
    initial = build_model(config)
    assert _same_weights(kept.model, initial) and not _same_weights(kept.model, last.model)
    assert kept_policy(kept.checkpoint) == {"policy": "baseline", "epoch": 0}
    assert _same_weights(load_trained(kept.checkpoint), initial)
    exported = export_policy(kept.checkpoint, tmp_path / "export.pt")
    assert _same_weights(load_trained(exported), initial) and kept_policy(exported)["policy"] == "baseline"
    assert finished_training(exported, config) is not None
    assert finished_training(exported, TrainConfig(epochs=3, **never)) is None  # kept another than the last
    assert config.resume_key() == TrainConfig(epochs=3, **never).resume_key()
    longer = train(TrainConfig(epochs=4, **never), tmp_path / "kept", name="m", progress=False, device="cpu")
    straight = train(TrainConfig(epochs=4, **never), tmp_path / "straight", progress=False, device="cpu")
    assert _same_weights(longer.model, straight.model)  # resumed from the last policy, not the kept one
    assert kept_policy(longer.checkpoint) == {"policy": "last", "epoch": 4}
    updating = TrainConfig(epochs=3, final_policy="baseline", **SMALL)
    result = train(updating, tmp_path / "updating", progress=False, device="cpu")
    updates = list(result.log.epoch[result.log.baseline_updated])
    assert kept_policy(result.checkpoint)["epoch"] == (updates[-1] if updates else 0)
    with pytest.raises(ValueError, match="final_policy"):
        TrainConfig(**dict(SMALL, final_policy="best"))


def test_plateau_action_drops_the_rate_then_stops():
    flat = [5.0] * 4
    assert plateau_action(flat, [1.0] * 4, 2, 0.001) == "stop"  # lr_drops 0: the plateau rule as before
    assert plateau_action(flat, [1.0] * 4, 2, 0.001, lr_drops=1) == "drop"
    assert plateau_action(flat + [5.0], [1.0] * 4 + [0.25], 2, 0.001, lr_drops=1) == "train"  # a new phase
    assert plateau_action(flat * 2, [1.0] * 4 + [0.25] * 4, 2, 0.001, lr_drops=1) == "stop"  # its one drop used
    assert plateau_action(flat * 2, [1.0] * 4 + [0.25] * 4, 2, 0.001, lr_drops=2) == "drop"
    falling = [8.0, 7.0, 6.0, 5.0]  # still improving in the current phase: train, whatever came before
    assert plateau_action(flat + falling, [1.0] * 4 + [0.25] * 4, 2, 0.001, lr_drops=1) == "train"
    with pytest.raises(ValueError, match="learning rates"):
        plateau_action(flat, [1.0] * 3, 2, 0.001, lr_drops=1)


def test_a_run_drops_its_rate_at_the_plateau_and_resumes_exactly(tmp_path):
    """With lr_drops the first plateau lowers the learning rate instead of stopping; a model stopped
    by the plain rule resumes into that phase when lr_drops is raised, and ends as one trained
    straight through with it."""
    plateau = dict(plateau_window=1, plateau_tolerance=0.49)
    stopped = train(TrainConfig(epochs=12, **SMALL, **plateau), tmp_path / "a", progress=False, device="cpu")
    ran = len(stopped.log)
    assert ran < 12 and set(stopped.log.lr) == {1e-3}
    dropping = dict(plateau, lr_drops=2, lr_drop_factor=0.5)
    extended = train(TrainConfig(epochs=12, **SMALL, **dropping), tmp_path / "a", progress=False, device="cpu")
    straight = train(TrainConfig(epochs=12, **SMALL, **dropping), tmp_path / "b", progress=False, device="cpu")
    assert len(extended.log) > ran and extended.log.lr.iloc[ran] == 5e-4  # the epoch after the stop: half the rate
    pd.testing.assert_frame_equal(extended.log.drop(columns="seconds"), straight.log.drop(columns="seconds"))
    for (name, p), q in zip(straight.model.state_dict().items(), extended.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    logs = extended.log.assign(rule="inv_sqrt_d", seed=0)
    assert "window 1" in check_training_log(logs, ["inv_sqrt_d"], [0], 12, 1, 0.49, lr_drops=2)
    # it stopped after its two drops: the check knows the drops, the plain rule's check does not
    assert len(extended.log) < 12 and set(extended.log.lr) == {1e-3, 5e-4, 2.5e-4}
    with pytest.raises(RunCheckFailed, match="stopping rules"):
        check_training_log(logs, ["inv_sqrt_d"], [0], 12, 1, 0.49)


def test_plateau_action_stops_after_the_first_epoch_below_the_rate_floor():
    costs = [5.0, 4.0, 3.0]  # improving: the plateau rule alone trains on
    assert plateau_action(costs, [1e-3, 5e-4, 5e-4], 1, 0.001, lr_floor=4e-4) == "train"
    assert plateau_action(costs, [1e-3, 5e-4, 2.5e-4], 1, 0.001, lr_floor=4e-4) == "stop"
    assert plateau_action(costs, [1e-3, 5e-4, 2.5e-4], 0, 0.001) == "train"  # no floor: the rate is not read
    assert plateau_action([], [], 0, 0.001, lr_floor=4e-4) == "train"  # nothing trained yet
    with pytest.raises(ValueError, match="learning rate"):
        plateau_action(costs, None, 0, 0.001, lr_floor=4e-4)


def test_a_run_stops_at_the_rate_floor_and_resumes_exactly(tmp_path):
    """With lr_floor a run whose rate falls (here by plateau drops) stops after its first epoch at a
    rate below the floor; an interrupted run resumes to the same stop, and the finished run, asked
    again, trains nothing more."""
    floored = dict(plateau_window=1, plateau_tolerance=0.49, lr_drops=10, lr_drop_factor=0.5, lr_floor=3e-4)
    straight = train(TrainConfig(epochs=30, **SMALL, **floored), tmp_path / "a", progress=False, device="cpu")
    ran = len(straight.log)
    assert ran < 30 and straight.log.lr.iloc[-1] == 2.5e-4 and (straight.log.lr.iloc[:-1] > 3e-4).all()
    train(TrainConfig(epochs=ran - 1, **SMALL, **floored), tmp_path / "b", progress=False, device="cpu")
    resumed = train(TrainConfig(epochs=30, **SMALL, **floored), tmp_path / "b", progress=False, device="cpu")
    pd.testing.assert_frame_equal(resumed.log.drop(columns="seconds"), straight.log.drop(columns="seconds"))
    for (name, p), q in zip(straight.model.state_dict().items(), resumed.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    again = train(TrainConfig(epochs=30, **SMALL, **floored), tmp_path / "a", progress=False, device="cpu")
    assert len(again.log) == ran
    logs = straight.log.assign(rule="inv_sqrt_d", seed=0)
    assert "1 stopped before 30 epochs" in check_training_log(logs, ["inv_sqrt_d"], [0], 30, 1, 0.49, 10, 3e-4)
    with pytest.raises(RunCheckFailed, match="stopping rules"):  # without the floor it should have run on
        check_training_log(logs, ["inv_sqrt_d"], [0], 30, 1, 0.49, 10)


def test_config_validation():
    with pytest.raises(ValueError, match="trained with one of"):
        TrainConfig(rule="eie")
    with pytest.raises(ValueError, match="batch_size must be >= 1"):
        TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match="precision must be one of"):
        TrainConfig(precision="float16")
    assert "precision" not in TrainConfig().resume_key()  # checkpoints from before the option still resume
    with pytest.raises(ValueError, match="plateau_window >= 0"):
        TrainConfig(plateau_window=-1)
    assert "plateau_window" not in TrainConfig(plateau_window=5).resume_key()  # when to stop, like epochs
    assert "lr_drops" not in TrainConfig(plateau_window=5, lr_drops=2).resume_key()  # stopped models extend
    with pytest.raises(ValueError, match="needs plateau_window > 0"):
        TrainConfig(lr_drops=1)
    with pytest.raises(ValueError, match="lr_drop_factor"):
        TrainConfig(plateau_window=5, lr_drops=1, lr_drop_factor=1.0)
    with pytest.raises(ValueError, match="lr_floor must be >= 0"):
        TrainConfig(lr_decay_on_p=True, lr_floor=1e-3, lr=1e-4)  # at or above the rate: stops after one epoch
    with pytest.raises(ValueError, match="needs lr_decay_on_p or lr_drops"):
        TrainConfig(lr_floor=1e-7)  # the rate never falls
    assert "lr_floor" not in TrainConfig(lr_decay_on_p=True, lr_floor=1e-7).resume_key()  # when to stop


def test_a_bfloat16_encoder_stays_close_and_keeps_attention_in_float32(tmp_path):
    """precision="bfloat16" runs the encoder's linear layers under autocast; the embeddings it returns
    are float32 and close to the float32 encoder's, and the softmax over the nodes sees float32 logits."""
    torch.manual_seed(0)
    model = build_model(TrainConfig(n_train=20, precision="bfloat16"), "cpu")
    assert model.encoder_precision == "bfloat16"
    instance = model.problem.generate(8, 20, torch.Generator().manual_seed(1))
    seen = []
    original = model.attention.scaled
    model.attention.scaled = lambda q, ctx: seen.append(q.dtype) or original(q, ctx)
    with torch.no_grad():
        low = model.encode(instance)
        model.encoder_precision = "float32"
        full = model.encode(instance)
    assert low.dtype == torch.float32 and seen and set(seen) == {torch.float32}
    assert 0 < (low - full).abs().max() < 0.05 * full.abs().max()
    result = train(TrainConfig(n_train=10, epochs=1, steps_per_epoch=2, batch_size=8, baseline_eval_size=16,
                               precision="bfloat16"), tmp_path, progress=False)
    assert len(result.log) == 1
    assert result.model.encoder_precision == "float32"  # trained in bfloat16, evaluated in float32
    assert torch.load(result.checkpoint, weights_only=False)["config"]["precision"] == "bfloat16"  # resumes in bf16


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_asking_for_cuda_without_it_is_refused(tmp_path):
    with pytest.raises(ValueError, match="CUDA is not available"):
        train(TrainConfig(epochs=1, **SMALL), tmp_path, device="cuda:0")
    assert not list(tmp_path.iterdir())  # refused before anything was written


def test_paired_t_test_direction():
    better = torch.tensor([1.0, 2.0, 3.0, 4.0])
    worse = better + torch.tensor([0.5, 0.4, 0.6, 0.5])
    assert paired_t_test_p(better, worse) < 0.01
    assert paired_t_test_p(worse, better) > 0.99


@pytest.mark.parametrize("problem, options, n", [("tsp", {}, 30), ("cvrp", {"capacity": 10}, 30),
                                                 ("bpp", {"length": 120, "width": 100}, 8)])
def test_the_fast_decoding_step_gives_the_reference_solutions_and_likelihoods(problem, options, n, monkeypatch):
    """The fast decoding step (glimpse and pointer as plain products with transposed keys; greedy
    and sampled decoding dropping retired nodes from their cache, here from n = 8 on) against the
    reference step (the fused attention kernel, every column), greedy and sampled, with a rule that
    changes the scale, for every problem, on fixed seeds."""
    monkeypatch.setattr(model_module, "SHRINK_FROM", 8)
    shrinks = []
    shrink = DecoderCache.shrink
    monkeypatch.setattr(DecoderCache, "shrink", lambda cache, keep: shrinks.append(keep.shape) or shrink(cache, keep))
    torch.manual_seed(0)
    model = build_model(TrainConfig(problem=problem, problem_options=options, rule="ln_d", n_train=n // 2), "cpu")
    instance = model.problem.generate(16, n, torch.Generator().manual_seed(1))
    with torch.no_grad():
        for decode in ("greedy", "sample"):
            shrinks.clear()
            fast, ll_fast = model.rollout(instance, decode, torch.Generator().manual_seed(2))
            assert shrinks, decode  # the rollout did drop retired nodes
            reference, ll_reference = model.rollout(instance, decode, torch.Generator().manual_seed(2), reference=True)
            assert torch.equal(fast, reference)
            assert torch.allclose(ll_fast, ll_reference, rtol=1e-5, atol=1e-4)
            assert ll_fast.abs().max() > 1  # the likelihoods compared are not trivially zero
    # Training's sampled rollout: decoding without gradients, then the likelihood of all steps replayed at
    # once (the loop with gradients for bin packing, whose placement head is not replayed).
    for n_mode in ("instance", "unmasked"):
        model.attention.n_mode = n_mode
        with torch.no_grad():
            reference, ll_reference = model.rollout(instance, "sample", torch.Generator().manual_seed(3), reference=True)
        replayed, ll_replayed = model.sample_with_gradients(instance, torch.Generator().manual_seed(3))
        assert torch.equal(replayed, reference)
        assert torch.allclose(ll_replayed, ll_reference, rtol=1e-5, atol=1e-4)
        assert ll_replayed.requires_grad
        ll_replayed.sum().backward()
        replayed_grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        model.zero_grad()
        model.rollout(instance, "sample", torch.Generator().manual_seed(3))[1].sum().backward()
        for name, p in model.named_parameters():
            if p.grad is not None:
                assert torch.allclose(replayed_grads[name], p.grad, rtol=1e-4, atol=1e-5), name
        model.zero_grad()


def test_centred_pointer_clip_ignores_a_common_shift(tmp_path):
    """`pointer_clip = "centred"`: C tanh(u - mean of the allowed u). A shift common to all u, which
    saturates the plain clip (a uniform policy whose gradient vanishes), leaves it unchanged; the
    fast, reference and replayed decoders agree with it; the choice is kept in the checkpoint."""
    from eie.model import ModelConfig, clipped_logits
    generator = torch.Generator().manual_seed(0)
    u = torch.randn(4, 7, generator=generator)
    blocked = torch.zeros(4, 7, dtype=torch.bool)
    blocked[:, :2] = True
    plain, centred = ModelConfig(), ModelConfig(pointer_clip="centred")
    expected = (10 * torch.tanh(u)).masked_fill(blocked, float("-inf"))
    assert torch.equal(clipped_logits(u, blocked, plain), expected)
    shifted = u + 40.0
    assert torch.allclose(clipped_logits(shifted, blocked, centred), clipped_logits(u, blocked, centred), atol=1e-3)
    saturated = torch.log_softmax(clipped_logits(shifted, blocked, plain), dim=-1)
    assert torch.allclose(saturated[:, 2:], torch.full((4, 5), -np.log(5.0)), atol=1e-6)  # uniform over the allowed
    kept = torch.log_softmax(clipped_logits(shifted, blocked, centred), dim=-1)
    assert (kept[:, 2:].max(-1).values + np.log(5.0) > 0.05).all()  # still tells the nodes apart
    assert torch.isinf(kept[:, :2]).all()
    with pytest.raises(ValueError, match="pointer_clip"):
        ModelConfig(pointer_clip="sigmoid")

    config = TrainConfig(epochs=1, **dict(SMALL, model=centred))
    torch.manual_seed(0)
    model = build_model(config, "cpu")
    instance = model.problem.generate(8, 8, torch.Generator().manual_seed(1))
    with torch.no_grad():
        fast, ll_fast = model.rollout(instance, "sample", torch.Generator().manual_seed(2))
        reference, ll_reference = model.rollout(instance, "sample", torch.Generator().manual_seed(2), reference=True)
    replayed, ll_replayed = model.sample_with_gradients(instance, torch.Generator().manual_seed(2))
    assert torch.equal(fast, reference) and torch.equal(fast, replayed)
    assert torch.allclose(ll_fast, ll_reference, rtol=1e-5, atol=1e-4)
    assert torch.allclose(ll_fast, ll_replayed.detach(), rtol=1e-5, atol=1e-4)
    assert "pointer_clip" not in TrainConfig(**SMALL).resume_key()["model"]  # plain: old checkpoints' key
    assert config.resume_key()["model"]["pointer_clip"] == "centred"
    result = train(config, tmp_path, progress=False, device="cpu")
    assert load_trained(result.checkpoint).config.pointer_clip == "centred"
    with pytest.raises(ValueError, match="different settings"):
        train(TrainConfig(epochs=2, **SMALL), tmp_path, progress=False, device="cpu")


def test_a_batchnorm_encoder_trains_decodes_and_keeps_the_layernorm_checkpoints_key(tmp_path):
    """`normalization = "batch"`: BatchNorm over every node (batch statistics while training, running
    ones at test time); a LayerNorm model's resume key is the one its checkpoints were written with."""
    from eie.model import ModelConfig, NodeBatchNorm

    config = TrainConfig(rule="inv_sqrt_d", epochs=1, model=ModelConfig(normalization="batch"), **SMALL)
    result = train(config, tmp_path, progress=False)
    norms = [m for m in result.model.modules() if isinstance(m, NodeBatchNorm)]
    assert len(norms) == 2 * config.model.layers and all(int(m.num_batches_tracked) > 0 for m in norms)
    instance = result.model.problem.generate(3, 8, torch.Generator().manual_seed(0))
    first = greedy_cost(result.model, instance)
    assert torch.equal(first, greedy_cost(result.model, instance))  # eval mode: running statistics, no update
    assert load_trained(result.checkpoint).state_dict().keys() == result.model.state_dict().keys()
    assert "normalization" not in TrainConfig(**SMALL).resume_key()["model"]
    assert config.resume_key()["model"]["normalization"] == "batch"


def test_a_sampled_step_draws_what_multinomial_draws_whatever_columns_the_cache_keeps():
    """`draw` is torch.multinomial(p, 1)'s draw, generator state included; over a cache that kept some
    columns it picks the node the full row would (the dropped nodes have p = 0)."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(32, 50, generator=g) * 3
    dropped = torch.rand(32, 50, generator=g) < 0.6
    dropped[:, 7] = False
    log_p = torch.log_softmax(logits.masked_fill(dropped, float("-inf")), 1)
    a, b = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    expected = torch.multinomial(log_p.exp(), 1, generator=a)[:, 0]
    assert torch.equal(model_module.draw(log_p, None, 50, b), expected)
    assert torch.equal(torch.rand(4, generator=a), torch.rand(4, generator=b))  # the same random numbers used
    columns = torch.sort(dropped.to(torch.int8), dim=1, stable=True).indices[:, :int((~dropped).sum(1).max())]
    kept = torch.log_softmax(logits.gather(1, columns).masked_fill(dropped.gather(1, columns), float("-inf")), 1)
    shrunk = columns.gather(1, model_module.draw(kept, columns, 50, torch.Generator().manual_seed(1))[:, None])[:, 0]
    assert torch.equal(shrunk, expected)
    assert len(set(expected.tolist())) > 5  # rows draw different nodes


def test_a_branched_checkpoint_trains_on_exactly_as_its_new_configuration_from_the_start(tmp_path):
    """A checkpoint inside its warm-up branched into a configuration whose warm-up ends there, with
    another learning rate after it (`branch_checkpoint`), ends where that configuration trained
    from the start ends; the rate changes at the first epoch after the warm-up and the branch
    records its source. Settings that have acted (lr, or a warm-up already over) refuse it."""
    from eie.training import branch_checkpoint
    long_warm = dict(SMALL, warmup_epochs=3)
    pilot = dict(SMALL, warmup_epochs=2, lr_after_warmup=2e-4)
    straight = train(TrainConfig(epochs=4, **pilot), tmp_path / "straight", name="m", progress=False, device="cpu")
    assert list(straight.log.lr) == [1e-3, 1e-3, 2e-4, 2e-4]
    source = train(TrainConfig(epochs=2, **long_warm), tmp_path / "source", name="m", progress=False, device="cpu")
    said = branch_checkpoint(source.checkpoint, tmp_path / "branch" / "m.pt", TrainConfig(epochs=4, **pilot), epoch=2)
    assert "branched from" in said
    branched = train(TrainConfig(epochs=4, **pilot), tmp_path / "branch", name="m", progress=False, device="cpu")
    for (name, p), q in zip(straight.model.state_dict().items(), branched.model.state_dict().values(), strict=True):
        assert torch.equal(p, q), name
    payload = torch.load(branched.checkpoint, weights_only=True)
    assert payload["branched_from"]["epoch"] == 2 and payload["branched_from"]["config"]["warmup_epochs"] == 3
    # the same branch again keeps what is there (it has trained on); another target's file is refused
    assert "already; kept" in branch_checkpoint(source.checkpoint, branched.checkpoint, TrainConfig(epochs=4, **pilot))
    with pytest.raises(FileExistsError, match="not branched"):
        branch_checkpoint(source.checkpoint, straight.checkpoint, TrainConfig(epochs=4, **pilot))
    with pytest.raises(ValueError, match="lr differ"):
        branch_checkpoint(source.checkpoint, tmp_path / "x" / "m.pt", TrainConfig(epochs=4, **dict(pilot, lr=5e-4)))
    with pytest.raises(ValueError, match="not the 1 asked for"):
        branch_checkpoint(source.checkpoint, tmp_path / "x" / "m.pt", TrainConfig(epochs=4, **pilot), epoch=1)
    after = train(TrainConfig(epochs=3, **dict(SMALL, warmup_epochs=1)), tmp_path / "after", name="m",
                  progress=False, device="cpu")  # its warm-up ended at epoch 1: the rollout baseline has acted
    with pytest.raises(ValueError, match="warmup_epochs differ"):
        branch_checkpoint(after.checkpoint, tmp_path / "y" / "m.pt", TrainConfig(epochs=4, **pilot))
    for bad, match in ((dict(lr_after_warmup=1e-4), "needs warmup_epochs"),
                       (dict(warmup_epochs=2, lr_after_warmup=-1.0), "must be > 0"),
                       (dict(warmup_epochs=2, lr_after_warmup=1e-4, lr_decay_on_p=True), "cannot be combined")):
        with pytest.raises(ValueError, match=match):
            TrainConfig(**dict(SMALL, **bad))
    assert "lr_after_warmup" not in TrainConfig(**SMALL).resume_key()


def test_the_leave_one_out_baseline_centres_each_instances_samples():
    from eie.training import leave_one_out_mean, repeat_instances

    cost = torch.tensor([1.0, 2.0, 3.0, 10.0, 20.0, 30.0])
    assert torch.allclose(leave_one_out_mean(cost, 3), torch.tensor([2.5, 2.0, 1.5, 25.0, 20.0, 15.0]))
    advantage = (cost - leave_one_out_mean(cost, 3)).view(2, 3)
    assert torch.allclose(advantage.sum(dim=1), torch.zeros(2))  # the samples of an instance push against each other
    batch = {"coords": torch.arange(6.0).view(3, 1, 2)}
    repeated = repeat_instances(batch, 2)
    assert repeated["coords"].shape == (6, 1, 2) and torch.equal(repeated["coords"][2], batch["coords"][1])


def test_several_samples_per_instance_train_resume_exactly_and_branch_from_a_warm_up(tmp_path):
    """K samples of each of batch_size / K instances with the leave-one-out baseline: the cost falls, an interrupted run
    ends where an uninterrupted one ends, the setting acts only after the warm-up (a checkpoint of
    the warm-up with K = 1 branches into it and trains on exactly as the K = 4 run), and the
    default keeps older checkpoints' key."""
    from eie.training import branch_checkpoint

    config = TrainConfig(epochs=8, **{**SMALL, "steps_per_epoch": 6, "batch_size": 64, "samples_per_instance": 4})
    torch.manual_seed(config.seed)
    untrained = build_model(config)
    fixed = untrained.problem.generate(256, 8, torch.Generator().manual_seed(99))
    result = train(config, tmp_path / "learns", progress=False, device="cpu")
    assert float(greedy_cost(result.model, fixed).mean()) < 0.95 * float(greedy_cost(untrained, fixed).mean())

    several = dict(SMALL, warmup_epochs=1, samples_per_instance=4)
    straight = train(TrainConfig(epochs=3, **several), tmp_path / "straight", name="m", progress=False, device="cpu")
    train(TrainConfig(epochs=2, **several), tmp_path / "resumed", name="m", progress=False, device="cpu")
    resumed = train(TrainConfig(epochs=3, **several), tmp_path / "resumed", name="m", progress=False, device="cpu")
    source = train(TrainConfig(epochs=1, **dict(SMALL, warmup_epochs=1)), tmp_path / "source", name="m",
                   progress=False, device="cpu")
    branch_checkpoint(source.checkpoint, tmp_path / "branch" / "m.pt", TrainConfig(epochs=3, **several), epoch=1)
    branched = train(TrainConfig(epochs=3, **several), tmp_path / "branch", name="m", progress=False, device="cpu")
    one = train(TrainConfig(epochs=3, **dict(SMALL, warmup_epochs=1)), tmp_path / "one", name="m", progress=False,
                device="cpu")
    for name, p in straight.model.state_dict().items():
        assert torch.equal(p, resumed.model.state_dict()[name]) and torch.equal(p, branched.model.state_dict()[name]), name
    assert not torch.equal(one.model.state_dict()["embed.linear.weight"], straight.model.state_dict()["embed.linear.weight"])
    assert "samples_per_instance" not in TrainConfig(**SMALL).resume_key()
    assert TrainConfig(**several).resume_key()["samples_per_instance"] == 4
    with pytest.raises(ValueError, match="samples_per_instance must be >= 1"):
        TrainConfig(**dict(SMALL, samples_per_instance=0))
    with pytest.raises(ValueError, match="batch_size must be a multiple of it, got 16"):
        TrainConfig(**dict(SMALL, samples_per_instance=3))
