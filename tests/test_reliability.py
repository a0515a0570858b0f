"""What a user meets on the first day: unsafe loading, silent wrong results, grad-mode traps, two
writers on one checkpoint, bad lengths, figures of one run overwriting another's."""

import errno
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from eie import comparison, extrapolation, paths, scaling, study
from eie.checkpoints import export_policy
from eie.eie_net import EIEConfig, EIENet, check_fitted, fit_eie, load_eie_net, save_eie_net
from eie.entropy import entropy_gaussian_limit
from eie.evaluation import extrapolation_lengths
from eie.files import FileBusy, exclusive, save_atomic
from eie.plotting import save_figure
from eie.run_checks import RunCheckFailed, check_extrapolation, check_training_log
from eie.training import TrainConfig, load_trained, train

SMALL = dict(problem="tsp", n_train=8, steps_per_epoch=2, batch_size=16, baseline_eval_size=32, lr=1e-3)
ROOT = paths.repo_root()


# -- 3. training and fitting do not depend on the caller's grad mode ------------------------------

def test_fit_and_solve_work_with_gradients_disabled():
    with torch.no_grad():
        net, history = fit_eie(16, 20, 40, epochs=3, batch_size=8, target_samples=1024, progress=False)
        table = scaling.solve_exact(16, 20, 40, grid_points=3, samples=256, target_samples=1024)
    assert np.isfinite(history.loss).all() and len(history.loss) == 3
    assert table.lam[-1] > table.lam[0] > 0


@pytest.mark.parametrize("mode", [torch.no_grad, torch.inference_mode])
def test_fit_solve_and_train_work_under_inference_mode_too(tmp_path, mode):
    with mode():
        net, history = fit_eie(16, 20, 40, epochs=2, batch_size=8, target_samples=1024, progress=False)
        table = scaling.solve_exact(16, 20, 40, grid_points=3, samples=256, target_samples=1024)
        result = train(TrainConfig(epochs=1, **SMALL), tmp_path, progress=False, device="cpu")
        assert torch.is_inference_mode_enabled() == (mode is torch.inference_mode)
    assert np.isfinite(history.loss).all() and table.lam[-1] > 0 and len(result.log) == 1


def test_training_works_with_gradients_disabled(tmp_path):
    torch.set_grad_enabled(False)  # what notebook 07 does for its probes
    try:
        result = train(TrainConfig(epochs=1, **SMALL), tmp_path, progress=False, device="cpu")
        assert not torch.is_grad_enabled(), "train must restore the caller's grad mode"
    finally:
        torch.set_grad_enabled(True)
    assert len(result.log) == 1


# -- 4. no code runs when a checkpoint, model or net is loaded --------------------------------------

class _Payload:
    """Unpickling this calls `Path.touch(marker)`: what a crafted checkpoint could do instead."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (Path(self.marker),))


@pytest.mark.parametrize("loader", ["load_trained", "export_policy", "resume", "load_eie_net"])
def test_a_file_carrying_code_is_refused_without_running_it(tmp_path, loader):
    marker = tmp_path / "code_ran"
    path = tmp_path / "crafted.pt"
    torch.save({"format": "eie-train/1", "config": {}, "epoch": 1, "model": _Payload(marker)}, path)
    with pytest.raises(ValueError, match="cannot be read"):
        if loader == "load_trained":
            load_trained(path)
        elif loader == "export_policy":
            export_policy(path, tmp_path / "out.pt")
        elif loader == "resume":
            train(TrainConfig(epochs=1, **SMALL), tmp_path, name="crafted", progress=False, device="cpu")
        else:
            load_eie_net(path)
    assert not marker.exists(), "loading ran code from the file"


def test_real_checkpoints_and_committed_models_load_safely(tmp_path):
    result = train(TrainConfig(epochs=1, **SMALL), tmp_path, progress=False, device="cpu")
    torch.load(result.checkpoint, weights_only=True)  # every value is a tensor or a plain type
    exported = export_policy(result.checkpoint, tmp_path / "models" / "policy.pt")
    assert load_trained(exported).attention.rule.key == "inv_sqrt_d"
    committed = sorted((ROOT / "results").glob("*/models/*.pt"))
    assert committed, "no committed models to check"
    for path in committed:
        load_trained(path)


# -- 5. silent wrong results --------------------------------------------------------------------------

def test_a_longer_trained_checkpoint_is_not_returned_for_a_shorter_run(tmp_path):
    train(TrainConfig(epochs=3, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    with pytest.raises(ValueError, match="already been trained for 3 epochs.*epochs = 2"):
        train(TrainConfig(epochs=2, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    assert len(train(TrainConfig(epochs=3, **SMALL), tmp_path, name="run", progress=False, device="cpu").log) == 3


def _table(**change):
    values = dict(d=16, N=20, N_max=80, n=np.array([20.0, 40.0, 80.0]), lam=np.array([0.25, 0.43, 0.57]),
                  se=np.array([1e-3, 1e-3, 1e-3]), target_entropy=2.5)
    values.update(change)
    return scaling.ExactTable(**values)


@pytest.mark.parametrize("change, match", [
    (dict(lam=np.array([0.25, -3.0, 0.57])), "finite and > 0"),
    (dict(lam=np.array([0.25, np.nan, 0.57])), "finite and > 0"),
    (dict(lam=np.array([0.25, 0.6, 0.57])), "must not decrease"),
    (dict(n=np.array([20.0, 40.0, 60.0])), "at least N_max=80"),
    (dict(se=np.array([1e-3, np.inf, 1e-3])), "se must be finite"),
])
def test_bad_lambda_tables_are_refused_naming_the_file(tmp_path, change, match):
    path = _table(**change).save(tmp_path / "exact.csv")
    with pytest.raises(ValueError, match=f"{path}.*{match}"):
        scaling.ExactTable.load(path)
    _table().save(tmp_path / "good.csv")
    assert scaling.ExactTable.load(tmp_path / "good.csv").N_max == 80


def test_a_diverged_eie_net_is_refused_on_load(tmp_path):
    net = EIENet(EIEConfig(d=16, N=20, N_max=80))
    with torch.no_grad():
        net.last.bias.fill_(float("nan"))
    path = save_eie_net(net, tmp_path / "net.pt")
    with pytest.raises(ValueError, match="non-finite lambda"):
        load_eie_net(path)
    with pytest.raises(ValueError, match="not a usable fit"):
        check_fitted(net)


def test_lengths_and_scales_are_checked_at_the_boundary():
    with pytest.raises(ValueError, match="N must be an integer >= 2"):
        scaling.log_N(16, 1)
    with pytest.raises(ValueError, match="n must be >= 1"):
        entropy_gaussian_limit(0.5, 0.25, 16)
    with pytest.raises(ValueError, match="head size d"):
        entropy_gaussian_limit(10, 0.25, 0)
    with pytest.raises(ValueError, match="n_train must be an integer >= 1"):
        extrapolation_lengths(0, 10)
    assert entropy_gaussian_limit(100, 0.25, 16) == pytest.approx(math.log(100) - 0.5)


def test_ensure_scales_refuses_n_train_1_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.ROOT_ENV_VAR, str(_scratch_root(tmp_path)))
    with pytest.raises(ValueError, match="n_train.*>= 2"):
        study.ensure_scales(16, 1, 8, run="scratch")
    assert not list((tmp_path / "root" / "results").rglob("*.pt"))


def _scratch_root(tmp_path) -> Path:
    """An empty study root (lib/eie and pyproject.toml present) for code that writes results/."""
    root = tmp_path / "root"
    (root / "lib" / "eie").mkdir(parents=True)
    (root / "pyproject.toml").write_text("")
    return root


def test_figures_of_a_named_run_do_not_overwrite_the_default_ones(tmp_path, monkeypatch):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.setenv(paths.ROOT_ENV_VAR, str(_scratch_root(tmp_path)))
    fig = plt.figure()
    assert save_figure(fig, "01_entropy_by_rule").name == "01_entropy_by_rule.png"
    assert save_figure(fig, "01_entropy_by_rule", run="myrun").name == "01_entropy_by_rule_myrun.png"
    plt.close(fig)
    for script in ("01_entropy_analysis.py", "02_fit_eie.py"):
        text = (ROOT / "notebooks" / script).read_text()
        calls = [line for line in text.splitlines() if line.startswith("save_figure(")]
        assert calls and all("run=run" in line for line in calls), f"{script} saves a figure without its run name"


# -- 6. clearer errors, no escapes, one writer per checkpoint ---------------------------------------

def test_a_checkpoint_being_trained_is_locked(tmp_path):
    with exclusive(tmp_path / "run.pt", "trained"):
        with pytest.raises(FileBusy, match="being trained by another process"):
            train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    assert len(train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu").log) == 1


def test_a_finished_model_is_read_while_another_process_holds_its_lock(tmp_path):
    """A worker passing over the models it finished holds each lock for a moment; a notebook reading
    one of them then is not refused. An unfinished one stays refused."""
    first = train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    with exclusive(tmp_path / "run.pt", "trained"):
        again = train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu")
        assert again.log.equals(first.log)
        for name, tensor in first.model.state_dict().items():
            assert torch.equal(tensor, again.model.state_dict()[name]), name
        with pytest.raises(FileBusy, match="being trained by another process"):  # one more epoch to train
            train(TrainConfig(epochs=2, **SMALL), tmp_path, name="run", progress=False, device="cpu")


def test_two_processes_training_one_model_at_once(tmp_path):
    """The second process is refused with a message; the first finishes and its checkpoint is whole."""
    code = ("import sys; from eie.training import TrainConfig, train; "
            f"train(TrainConfig(epochs=int(sys.argv[1]), **{SMALL!r}), {str(tmp_path)!r}, name='run', "
            "progress=False, device='cpu')")
    first = subprocess.Popen([sys.executable, "-c", code, "100000"], stderr=subprocess.PIPE, text=True)
    try:
        lock = tmp_path / "run.pt.lock"
        for _ in range(600):  # wait until the first process holds the lock
            if (tmp_path / "run.pt").exists():
                break
            assert first.poll() is None, first.stderr.read()
            time.sleep(0.05)
        second = subprocess.run([sys.executable, "-c", code, "100000"], capture_output=True, text=True)
        assert second.returncode != 0 and "being trained by another process" in second.stderr
        assert lock.exists()
    finally:
        first.kill()
        first.wait()
    torch.load(tmp_path / "run.pt", weights_only=True)  # the last complete epoch is intact


def test_stale_temporary_files_are_removed_on_resume(tmp_path):
    train(TrainConfig(epochs=1, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    stale = tmp_path / "run.pt.abc123.tmp"
    stale.write_bytes(b"half a checkpoint")
    train(TrainConfig(epochs=2, **SMALL), tmp_path, name="run", progress=False, device="cpu")
    assert not stale.exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_atomic_save_leaves_the_previous_file_when_interrupted(tmp_path):
    path = save_atomic({"x": torch.ones(2)}, tmp_path / "file.pt")

    class Unsaveable:
        def __reduce__(self):
            raise KeyboardInterrupt  # interrupted in the middle of writing

    with pytest.raises(KeyboardInterrupt):
        save_atomic({"x": Unsaveable()}, path)
    assert torch.equal(torch.load(path, weights_only=True)["x"], torch.ones(2))
    assert not list(tmp_path.glob("*.tmp"))


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full to fill a disk")
def test_a_full_disk_is_named_as_such_and_leaves_the_previous_file(tmp_path, monkeypatch):
    import builtins

    from eie import files

    target = save_atomic({"weights": torch.ones(3)}, tmp_path / "model.pt")
    before = target.read_bytes()
    monkeypatch.setattr(files, "open", lambda name, mode="r": builtins.open("/dev/full", mode), raising=False)
    with pytest.raises(OSError, match="no space left on the disk holding .* while writing model.pt") as caught:
        save_atomic({"weights": torch.zeros(10_000)}, target)
    assert caught.value.errno == errno.ENOSPC and "unexpected pos" not in str(caught.value)
    assert target.read_bytes() == before and list(tmp_path.iterdir()) == [target]


def test_resolve_device_refuses_a_device_this_machine_lacks():
    from eie.training import resolve_device

    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match="'mps' asked for, but Apple's Metal backend is not available"):
            resolve_device("mps")
    with pytest.raises(ValueError, match="cuda:99"):
        resolve_device("cuda:99")


def test_the_same_payload_saved_twice_gives_the_same_bytes(tmp_path):
    """An export saved again unchanged (notebook 04 exports seed 0's policy on every run) is not a
    change to git: the archive holds no trace of the temporary file it was written through."""
    payload = {"model": {"w": torch.arange(6.0).reshape(2, 3)}, "epoch": 3, "log": [{"eval_cost": 1.5}]}
    first = save_atomic(payload, tmp_path / "policy.pt").read_bytes()
    assert save_atomic(payload, tmp_path / "policy.pt").read_bytes() == first
    assert save_atomic(payload, tmp_path / "other" / "policy.pt").read_bytes() == first


def test_run_names_cannot_leave_results(tmp_path):
    for bad in ("../../tmp/x", "..", ".hidden", "a/b", "", "a b"):
        with pytest.raises(ValueError, match="plain folder name"):
            paths.results_dir(bad)
    with pytest.raises(FileNotFoundError, match="no results folder"):
        paths.results_dir("no_such_run_here", create=False)


def test_makefile_refuses_a_run_outside_the_repository():
    for bad in ("RUN=../../tmp/x", "RUN=.hidden", "PRESET=no_such_preset"):
        done = subprocess.run(["make", "-n", "study", bad], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode != 0, bad
        assert "plain folder name" in done.stderr or "no file presets/" in done.stderr, done.stderr
    ok = subprocess.run(["make", "-n", "study", "RUN=my_run-1", "PRESET=paper"], cwd=ROOT, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr


@pytest.mark.parametrize("bad", ["RUN=x';touch pwned;'", "RUN=x`touch pwned`", "PRESET=x';touch pwned;'",
                                 "PRESET=../../elsewhere/x", "RUN=a b"])
def test_makefile_checks_names_without_a_shell(tmp_path, bad):
    """A name is refused before any shell sees it: even under `make -n`, nothing it holds runs."""
    done = subprocess.run(["make", "-n", "-f", str(ROOT / "Makefile"), "study", bad], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode != 0 and ("plain folder name" in done.stderr or "PRESET names a file" in done.stderr), \
        done.stderr
    assert not (tmp_path / "pwned").exists()


def test_tables_of_an_empty_run_are_an_error_naming_the_notebooks(tmp_path):
    with pytest.raises(FileNotFoundError, match="03_train_tsp.*04_train_cvrp.*05_train_bpp"):
        comparison.load_run_results(tmp_path)
    frame = pd.DataFrame({"problem": ["tsp"], "setting": [""], "method": ["eie"], "seed": [0], "n": [20],
                          "objective": [1.0], "gap_pct": [0.0]})
    frame.to_csv(tmp_path / "tsp.csv", index=False)
    extrapolation.save_instance_costs({("", "eie", 0, 20): np.ones(3)}, tmp_path / "tsp_instance_costs.npz")
    loaded, skipped = comparison.load_run_results(tmp_path)
    assert list(loaded) == ["tsp"]
    assert [note.split(":")[0] for note in skipped] == ["cvrp", "bpp"]
    assert "04_train_cvrp" in skipped[0] and "05_train_bpp" in skipped[1]


# -- 1. the run checks the training notebooks compare instead of machine-dependent numbers ---------

def _results(gap_at_train=30.0, eie_at_train=10.0):
    rows = []
    for seed in (0, 1):
        for n in (20, 40):
            for method, value in (("inv_sqrt_d", 10.0), ("eie", eie_at_train if n == 20 else 15.0)):
                rows.append({"problem": "tsp", "setting": "", "method": method, "seed": seed, "n": n,
                             "objective": value, "gap_pct": gap_at_train if n == 20 else 90.0})
    return pd.DataFrame(rows)


def test_run_checks_pass_a_correct_run_and_stop_a_broken_one():
    report = check_extrapolation(_results(), 20, "LKH", max_gap_pct=60)
    assert "eie reproduce the 1/sqrt(d) model exactly" in report and "within 60 % of LKH" in report
    with pytest.raises(RunCheckFailed, match="eie differs from the inv_sqrt_d model"):
        check_extrapolation(_results(eie_at_train=10.5), 20)
    with pytest.raises(RunCheckFailed, match="was it trained"):
        check_extrapolation(_results(gap_at_train=85.0), 20, "LKH", max_gap_pct=60)
    log = pd.DataFrame({"rule": "inv_sqrt_d", "seed": 0, "epoch": [1, 2], "train_cost": [5.0, 4.0],
                        "baseline_cost": [5.0, 4.5], "eval_cost": [4.8, 4.1], "p_value": [0.2, 0.01]})
    assert "1 rules x 1 seeds x 2 epochs" in check_training_log(log, ["inv_sqrt_d"], [0], 2)
    with pytest.raises(RunCheckFailed, match="epochs"):
        check_training_log(log, ["inv_sqrt_d"], [0], 3)
    with pytest.raises(RunCheckFailed, match="not finite"):
        check_training_log(log.assign(eval_cost=[4.8, float("nan")]), ["inv_sqrt_d"], [0], 2)
    # With the plateau rule a model may stop early, but only where the rule first holds.
    flat = pd.DataFrame({"rule": "inv_sqrt_d", "seed": 0, "epoch": [1, 2, 3], "train_cost": 5.0,
                         "baseline_cost": 5.0, "eval_cost": [4.8, 4.1, 4.1], "p_value": 0.5})
    assert "1 stopped before 9 epochs" in check_training_log(flat, ["inv_sqrt_d"], [0], 9, 1, 0.001)
    with pytest.raises(RunCheckFailed, match="first hold at epoch 2"):
        check_training_log(flat, ["inv_sqrt_d"], [0], 9, 1, 0.2)  # 4.1 is < 20 % below 4.8: it should have stopped at 2
    with pytest.raises(RunCheckFailed, match="expected 1..9"):
        check_training_log(flat, ["inv_sqrt_d"], [0], 9)  # the rule off: a short log is incomplete
    assert "0 stopped" in check_training_log(flat, ["inv_sqrt_d"], [0], 3, 1, 0.001)  # ran all


def test_notebook_06_on_a_missing_run_fails_with_a_message(tmp_path):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    with pytest.raises(PapermillExecutionError, match="no results folder.*notebooks 03-05"):
        papermill.execute_notebook(str(ROOT / "notebooks" / "06_extrapolation_tables.ipynb"),
                                   str(tmp_path / "out.ipynb"), parameters={"run": "no_such_run_here"},
                                   progress_bar=False, cwd=str(ROOT), kernel_name="python3")
    assert not (ROOT / "results" / "no_such_run_here").exists()


def test_a_preset_with_a_typo_or_a_repeated_key_is_refused_by_name(tmp_path):
    from eie.experiments import load_preset

    typo = tmp_path / "typo.yaml"
    typo.write_text("run: t\nepoch: 3\nDevice: cpu\nper_notebook:\n  03_train_tsp: {batchsize: 2}\n  03_train_tps: {epochs: 1}\n")
    with pytest.raises(ValueError) as error:
        load_preset(typo)
    message = str(error.value)
    for part in (str(typo), "'epoch' is not a parameter (did you mean 'epochs'?)", "'Device'",
                 "03_train_tsp: 'batchsize' is not a parameter (did you mean 'batch_size'?)",
                 "'03_train_tps' is not a notebook"):
        assert part in message
    twice = tmp_path / "twice.yaml"
    twice.write_text("run: a\nseeds: [0]\nrun: b\n")
    with pytest.raises(ValueError, match=r"twice.yaml is not valid YAML: the key 'run' is given twice"):
        load_preset(twice)
    broken = tmp_path / "broken.yaml"
    broken.write_text("run: [a\n")
    with pytest.raises(ValueError, match="broken.yaml is not valid YAML"):
        load_preset(broken)
    done = subprocess.run([sys.executable, "-m", "eie.worker", str(typo), "03_train_tsp", "--status"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "did you mean 'epochs'" in done.stderr and "Traceback" not in done.stderr


def test_every_committed_preset_loads():
    from eie.experiments import load_preset

    for preset in sorted((ROOT / "presets").glob("*.yaml")):
        load_preset(preset)


def test_atomic_writes_follow_the_umask_and_a_pickle_is_refused_without_torchs_unsafe_hint(tmp_path):
    import collections
    import os
    import pathlib

    from eie.files import load_tensors, save_atomic, write_csv_atomic

    previous = os.umask(0o022)
    os.umask(previous)
    path = save_atomic({"x": torch.zeros(2)}, tmp_path / "a.pt")
    assert path.stat().st_mode & 0o777 == 0o666 & ~previous
    csv = write_csv_atomic(pd.DataFrame({"a": [1]}), tmp_path / "a.csv")
    assert csv.stat().st_mode & 0o777 == 0o666 & ~previous

    evil = tmp_path / "evil.pt"
    torch.save({"x": collections.OrderedDict(a=pathlib.PurePosixPath("/"))}, evil)  # not a tensor: refused
    with pytest.raises(ValueError) as error:
        load_tensors(evil, "training checkpoint")
    message = str(error.value)
    assert "pickled objects other than tensors" in message and "likely succeed" not in message
    assert "do not load it with weights_only=False" in message


def test_notebook_08_needs_the_base_model_and_sweeps_only_trained_models():
    from eie.experiments import RivalsTraining
    from eie.experiments import configure as check_parameters

    defaults = {**RivalsTraining()}
    with pytest.raises(ValueError, match="rules must include 'inv_sqrt_d'"):
        check_parameters("08_rivals", {**defaults, "rules": ["dist_bias"], "training_free": [],
                                       "sweep_models": ["dist_bias"]})
    with pytest.raises(ValueError, match=r"sweep_models names \['rope'\], none of which rules trains"):
        check_parameters("08_rivals", {**defaults, "rules": ["inv_sqrt_d"], "training_free": ["eie"],
                                       "sweep_models": ["rope"]})


def test_entropy_invariant_scales_need_a_training_length_of_two():
    from eie import scaling
    from eie.eie_net import fit_eie

    for call in (lambda: fit_eie(16, 1, 40), lambda: scaling.solve_exact(16, 1, 8)):
        with pytest.raises(ValueError, match="N must be an integer >= 2"):
            call()


def test_a_filesystem_without_flock_falls_back_to_a_soft_lock(tmp_path, monkeypatch):
    import errno
    import fcntl

    from eie.files import FileBusy, exclusive

    def no_flock(*_):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_flock)
    target = tmp_path / "model.pt"
    with pytest.warns(UserWarning, match="no flock"), exclusive(target, "trained"):
        assert (tmp_path / "model.pt.softlock").exists()
        with pytest.raises(FileBusy, match="soft lock .*model.pt.softlock"):
            with exclusive(target, "trained"):
                pass
    assert not (tmp_path / "model.pt.softlock").exists()  # released
