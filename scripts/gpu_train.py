"""Train several of the presets' models side by side on one GPU for a fixed wall time, then pack their
checkpoints so that CPU workers elsewhere resume them.

    python scripts/gpu_train.py pack-train OUT SECONDS PRESET:NOTEBOOK:SEED ...   (on the GPU machine)
    python scripts/gpu_train.py unpack FOLDER                                     (where training goes on)

`pack-train` starts one `eie.worker` per job (`python -m eie.worker PRESET NOTEBOOK --seeds SEED`),
under CUDA's multi-process service where it starts (the paper's models at N = 100 leave most of a
modern GPU idle, so the processes' kernels run side by side), stops them after SECONDS (a worker
checkpoints every epoch, so at most one epoch per job is lost), and writes under OUT each job's
checkpoint (`ckpt_<run>__<model>.pt`) and one tar of the workers' logs. What a device can hand back
is bounded (`FILES`, `FILE_BYTES`, `TOTAL_BYTES`): the furthest checkpoints (by fraction of the
budget done) are packed first, and the others are named as left behind.

`unpack` writes each checkpoint into results/<run>/checkpoints/ with its epoch log
(`eie.checkpoints.install_checkpoint`; a checkpoint as far or further is kept). A checkpoint written on
a GPU holds the CUDA generator's state, which a CPU generator cannot take: on resuming, its sampling
stream restarts from `eie.training.sampling_restart_seed(seed, epoch)`, so training after the device
switch is exact from there on but is not the continuation the GPU would have run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "lib"))
from eie.checkpoints import install_checkpoint  # noqa: E402
from eie.files import load_tensors  # noqa: E402

FILES, FILE_BYTES, TOTAL_BYTES = 8, 16 * 2**20, 63 * 2**20


def start_mps() -> bool:
    """Start CUDA's multi-process service; False where it does not start or does not serve a process."""
    os.environ.update(CUDA_MPS_PIPE_DIRECTORY="/tmp/mps_pipe", CUDA_MPS_LOG_DIRECTORY="/tmp/mps_log")
    for folder in ("/tmp/mps_pipe", "/tmp/mps_log"):
        Path(folder).mkdir(exist_ok=True)
    try:
        # fails when a daemon already runs (a warm machine's earlier call): the probe below decides
        subprocess.run(["nvidia-cuda-mps-control", "-d"], timeout=20, check=False)
        subprocess.run([sys.executable, "-c", "import torch; assert torch.ones(4, device='cuda').sum().item() == 4"],
                       timeout=60, check=True)
        return True
    except (OSError, subprocess.SubprocessError):
        subprocess.run("echo quit | nvidia-cuda-mps-control", shell=True, timeout=10, check=False)
        for name in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY"):
            os.environ.pop(name, None)
        return False


def parse_job(text: str) -> tuple[str, str, int]:
    try:
        preset, notebook, seed = text.split(":")
        return preset, notebook, int(seed)
    except ValueError:
        raise SystemExit(f"a job is PRESET:NOTEBOOK:SEED (e.g. presets/cpu_paper.yaml:03_train_tsp:3), got {text!r}") from None


def pack_train(out: Path, seconds: float, jobs: list[str]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    jobs = [parse_job(job) for job in jobs]
    print("MPS on" if start_mps() else "MPS not available: the processes time-slice the GPU", flush=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "lib"), "PYTHONUNBUFFERED": "1"}
    logs, processes = [], []
    for i, (preset, notebook, seed) in enumerate(jobs):
        log = Path(f"/tmp/gpu_job{i}.log")
        logs.append(log)
        command = [sys.executable, "-m", "eie.worker", preset, notebook, "--seeds", str(seed), "--threads", "1"]
        processes.append(subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT))
    started = time.monotonic()
    while time.monotonic() - started < seconds and any(p.poll() is None for p in processes):
        time.sleep(2)
    for p in processes:
        if p.poll() is None:
            p.terminate()
    for p in processes:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    print(f"training ended after {time.monotonic() - started:.0f} s", flush=True)
    pack(out, logs)


def pack(out: Path, logs: list[Path]) -> None:
    found = []
    for checkpoint in sorted((ROOT / "results").glob("*/checkpoints/*.pt")):
        payload = load_tensors(checkpoint, "training checkpoint")
        log = payload["log"]
        seconds = [row["seconds"] for row in log]
        print(f"{checkpoint.parent.parent.name}/{checkpoint.stem}: epoch {payload['epoch']}, "
              f"median {sorted(seconds)[len(seconds) // 2]:.2f} s per epoch, last held-out cost "
              f"{log[-1]['eval_cost']:.4f}" if log else f"{checkpoint}: no epoch", flush=True)
        found.append((payload["epoch"], checkpoint))
    with tarfile.open(out / "logs.tar", "w") as tar:
        for log in logs:
            if log.exists():
                tar.add(log, arcname=log.name)
    total, files = (out / "logs.tar").stat().st_size, 1
    for epoch, checkpoint in sorted(found, key=lambda item: -item[0]):
        size = checkpoint.stat().st_size
        name = f"ckpt_{checkpoint.parent.parent.name}__{checkpoint.name}"
        if files < FILES and size <= FILE_BYTES and total + size <= TOTAL_BYTES:
            (out / name).write_bytes(checkpoint.read_bytes())
            total, files = total + size, files + 1
            print(f"packed {name} ({size / 2**20:.1f} MiB, epoch {epoch})")
        else:
            print(f"left behind {name} ({size / 2**20:.1f} MiB, epoch {epoch}): no room")


def unpack(folder: Path) -> None:
    for part in sorted(folder.glob("logs.tar")):
        with tarfile.open(part) as tar:
            for member in tar.getmembers():
                text = tar.extractfile(member).read().decode(errors="replace")
                print(f"--- {member.name} (last lines)\n" + "\n".join(text.splitlines()[-3:]))
    for path in sorted(folder.glob("ckpt_*__*.pt")):
        run, name = path.name.removeprefix("ckpt_").split("__", 1)
        checkpoints = ROOT / "results" / run / "checkpoints"
        checkpoints.mkdir(parents=True, exist_ok=True)
        print(f"{run}/{install_checkpoint(path, checkpoints / name)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("pack-train", help="train the jobs for SECONDS, then pack their checkpoints under OUT")
    train.add_argument("out", type=Path)
    train.add_argument("seconds", type=float)
    train.add_argument("jobs", nargs="+", help="PRESET:NOTEBOOK:SEED, e.g. presets/cpu_paper.yaml:03_train_tsp:3")
    back = sub.add_parser("unpack", help="put the packed checkpoints where the CPU workers resume them")
    back.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "pack-train":
        pack_train(args.out, args.seconds, args.jobs)
    else:
        unpack(args.folder)


if __name__ == "__main__":
    main()
