"""The study's jobs on a Dask cluster (eie.distributed): the same models and pieces as the serial path,
a killed worker's model resumed from its checkpoint, a rerun that skips finished work, a worker on
other code refused, and the SLURM job script."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

pytest.importorskip("dask.distributed")
from dask.distributed import Client, LocalCluster  # noqa: E402

from eie import distributed, experiments  # noqa: E402
from eie.files import load_tensors  # noqa: E402
from eie.paths import repo_root  # noqa: E402

REAL = repo_root()


def make_root(folder: Path, **settings) -> Path:
    """A study root (EIE_ROOT) sharing this checkout's package and notebooks, with its own results/,
    and a preset of tiny TSP models in it."""
    folder.mkdir()
    (folder / "lib").mkdir()
    (folder / "lib" / "eie").symlink_to(REAL / "lib" / "eie")
    (folder / "notebooks").symlink_to(REAL / "notebooks")
    shutil.copy(REAL / "pyproject.toml", folder / "pyproject.toml")
    (folder / "results").mkdir()
    preset = folder / "tiny.yaml"
    preset.write_text(yaml.safe_dump({"run": "tiny", "n_train": 6, "n_max": 12, "seeds": [0, 1],
                                      "rules": ["inv_sqrt_d", "ln_d"], "training_free": ["eie", "exact"], "epochs": 2,
                                      "steps_per_epoch": 1, "batch_size": 4, "baseline_eval_size": 4, "test_size": 8,
                                      "reference_size": 2, "eval_chunk": 8, "device": "cpu", **settings}))
    return preset


def weights(root: Path, run: str = "tiny") -> dict:
    out = {}
    for path in sorted((root / "results" / run / "checkpoints").glob("*.pt")):
        out[path.stem] = load_tensors(path, "checkpoint")["model"]
    return out


def pieces(root: Path, run: str = "tiny") -> dict:
    folder = root / "results" / run / "checkpoints" / "evaluation"
    return {path.name: load_tensors(path, "piece")["values"].numpy() for path in sorted(folder.glob("*.pt"))}


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    """A serial run and a run on a local cluster of two processes, in two roots."""
    base = tmp_path_factory.mktemp("grid")
    serial_preset = make_root(base / "serial")
    cluster_preset = make_root(base / "cluster")
    previous, threads = os.environ.get("EIE_ROOT"), torch.get_num_threads()
    try:
        env = {**os.environ, "EIE_ROOT": str(base / "serial")}
        for mode in ([], ["--evaluate"]):  # the serial path as a user runs it: training, then the evaluation
            subprocess.run([sys.executable, "-m", "eie.worker", str(serial_preset), "03_train_tsp", *mode], env=env,
                           check=True, capture_output=True)
        shutil.copytree(base / "serial" / "results" / "tiny" / "eie_nets", base / "cluster" / "results" / "tiny" / "eie_nets")
        os.environ["EIE_ROOT"] = str(base / "cluster")
        started = time.perf_counter()
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
                Client(cluster) as client:
            lines = distributed.run_grid(client, cluster_preset, ["03_train_tsp"])
            yield base, lines, client, cluster_preset, time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)
        if previous is None:
            os.environ.pop("EIE_ROOT", None)
        else:
            os.environ["EIE_ROOT"] = previous


def test_a_local_cluster_trains_and_evaluates_exactly_like_the_serial_path(roots):
    base, lines, *_ = roots
    serial, clustered = weights(base / "serial"), weights(base / "cluster")
    assert len(serial) == 4 and serial.keys() == clustered.keys()
    for name in serial:
        for tensor in serial[name]:
            assert torch.equal(serial[name][tensor], clustered[name][tensor]), name
    a, b = pieces(base / "serial"), pieces(base / "cluster")
    assert len(a) > 10 and a.keys() == b.keys()
    assert all(np.array_equal(a[key], b[key]) for key in a)
    assert sum(line.startswith("trained ") for line in lines) == 4


def test_a_rerun_of_the_driver_skips_finished_work(roots):
    base, _, client, preset, _ = roots
    params = experiments.load("03_train_tsp", preset)
    assert distributed.evaluation_plan("03_train_tsp", params) == []
    before = {p: p.stat().st_mtime_ns for p in (base / "cluster" / "results").rglob("*.pt")}
    distributed.run_grid(client, preset, ["03_train_tsp"])
    after = {p: p.stat().st_mtime_ns for p in (base / "cluster" / "results").rglob("*.pt")}
    assert before == after  # no checkpoint trained again, no piece written again


def test_a_task_from_another_checkout_is_refused(roots):
    _, _, client, preset, _ = roots
    job = {**distributed.training_jobs(preset, "03_train_tsp")[0], "source": "0" * 16}
    with pytest.raises(distributed.SourceMismatch, match="not the driver's"):
        client.submit(distributed.train_task, job, pure=False).result()


def test_a_worker_killed_mid_training_is_retried_and_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    settings = {"epochs": 30, "steps_per_epoch": 3, "batch_size": 8, "seeds": [0], "rules": ["inv_sqrt_d"]}
    serial_preset = make_root(tmp_path / "serial", **settings)
    subprocess.run([sys.executable, "-m", "eie.worker", str(serial_preset), "03_train_tsp"], check=True,
                   env={**os.environ, "EIE_ROOT": str(tmp_path / "serial")}, capture_output=True)
    cluster_preset = make_root(tmp_path / "cluster", **settings)
    monkeypatch.setenv("EIE_ROOT", str(tmp_path / "cluster"))
    (job,) = distributed.training_jobs(cluster_preset, "03_train_tsp")
    checkpoint = tmp_path / "cluster" / "results" / "tiny" / "checkpoints" / f"{job['name']}.pt"
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        future = client.submit(distributed.train_task, job, retries=2, pure=False)
        deadline = time.time() + 60
        while not checkpoint.exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        epochs_then = int(load_tensors(checkpoint, "checkpoint")["epoch"])
        for pid in client.run(os.getpid).values():
            os.kill(pid, signal.SIGKILL)  # the nanny starts a new worker; the task is retried there
        summary = future.result(timeout=120)
    assert 0 < epochs_then < 30 and summary["epochs"] == 30
    serial, clustered = weights(tmp_path / "serial"), weights(tmp_path / "cluster")
    for tensor in serial[job["name"]]:
        assert torch.equal(serial[job["name"]][tensor], clustered[job["name"]][tensor])


def test_the_slurm_job_asks_for_the_gpu_cores_memory_and_lifetime():
    pytest.importorskip("dask_jobqueue")
    cluster = distributed.slurm_cluster(cores=6, memory="24GB", walltime="02:00:00", gpus=1, lifetime="1h50m",
                                        queue="gpu")
    try:
        script = cluster.job_script()
    finally:
        cluster.close()
    for line in ("#SBATCH --gres=gpu:1", "#SBATCH --cpus-per-task=6", "#SBATCH -t 02:00:00", "#SBATCH -p gpu",
                 "--lifetime 1h50m", "--resources GPU=1", "#SBATCH --mem="):
        assert line in script, (line, script)


def test_cluster_specs_are_checked():
    assert distributed.client_for("none") is None
    for bad in ("local:0", "local:x", "gpu:2", "slurm:"):
        with pytest.raises(ValueError, match="cluster spec"):
            distributed.client_for(bad)
