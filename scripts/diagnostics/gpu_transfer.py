"""Bring run 3's models trained on a GPU machine (`gpu_train.sh`) back to this machine.

    python scripts/diagnostics/gpu_transfer.py pack OUT --since EPOCH_SECONDS --logs LOGS...   (on the GPU)
    python scripts/diagnostics/gpu_transfer.py unpack FOLDER                           (here)

`pack` puts under OUT what the device tool can bring back (8 files, 16 MiB each, 64 MiB in all): the
policies exported to results/cpu_long_v2/models/ since EPOCH_SECONDS (models whose training ended
there; a few MB each), with the workers' logs, in tar files of at most 15 MiB; then the checkpoints
of the models still in training (`eie.worker --save-carry` copied them into carry/), the furthest
first, as many as fit.

`unpack` writes the exported policies into models/ (a file already there is kept) and the
checkpoints into checkpoints/, where a CPU worker resumes them. A checkpoint written on a GPU holds
the CUDA generator's state for the policy's sampling, which a CPU generator cannot take: on resuming, its
sampling stream restarts from the seed `seed * 7919 + 2 + 1000 * epoch`, so training after the
device switch is not the continuation the GPU would have run (it is exact from there on).
"""

from __future__ import annotations

import argparse
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "lib"))
from eie.checkpoints import install_checkpoint  # noqa: E402
from eie.files import load_tensors  # noqa: E402

RUN = Path(__file__).resolve().parents[2] / "results" / "cpu_long_v2"
FILES, FILE_BYTES, TOTAL_BYTES, TAR_BYTES = 8, 16 * 2**20, 63 * 2**20, 15 * 2**20


def pack(out: Path, since: float, logs: list[Path]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    exports = sorted(p for p in (RUN / "models").glob("*.pt") if p.stat().st_mtime >= since)
    parts, current, size = [], [], 0
    for path in [*logs, *exports]:
        if current and size + path.stat().st_size > TAR_BYTES:
            parts.append(current)
            current, size = [], 0
        current.append(path)
        size += path.stat().st_size
    parts.append(current)
    written = []
    for i, members in enumerate(parts, 1):
        target = out / f"exports_{i}.tar"
        with tarfile.open(target, "w") as tar:
            for path in members:
                tar.add(path, arcname=path.name)
        written.append(target)
    print(f"{len(exports)} exported policies: {[p.stem for p in exports]}")
    checkpoints = sorted((RUN / "carry").glob("*.pt"), key=lambda p: -int(load_tensors(p, "checkpoint")["epoch"]))
    total = sum(p.stat().st_size for p in written)
    for path in checkpoints:
        fits = (len(written) < FILES and path.stat().st_size <= FILE_BYTES
                and total + path.stat().st_size <= TOTAL_BYTES)
        epoch = int(load_tensors(path, "checkpoint")["epoch"])
        print(f"checkpoint {path.stem} at epoch {epoch}: {'packed' if fits else 'left behind (no room)'}")
        if fits:
            target = out / f"ckpt_{path.name}"
            target.write_bytes(path.read_bytes())
            written.append(target)
            total += path.stat().st_size


def unpack(folder: Path) -> None:
    models, checkpoints = RUN / "models", RUN / "checkpoints"
    checkpoints.mkdir(exist_ok=True)
    for part in sorted(folder.glob("exports_*.tar")):
        with tarfile.open(part) as tar:
            for member in tar.getmembers():
                data = tar.extractfile(member).read()
                if member.name.endswith(".log"):
                    print(f"--- {member.name} (last lines)\n" + "\n".join(data.decode().splitlines()[-3:]))
                    continue
                target = models / member.name
                if target.exists():
                    print(f"{member.name}: kept the export already in models/")
                    continue
                target.write_bytes(data)
                print(f"{member.name}: exported policy into models/")
    for path in sorted(folder.glob("ckpt_*.pt")):
        print(install_checkpoint(path, checkpoints / path.name.removeprefix("ckpt_")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack")
    p.add_argument("out", type=Path)
    p.add_argument("--since", type=float, required=True)
    p.add_argument("--logs", type=Path, nargs="*", default=[])
    u = sub.add_parser("unpack")
    u.add_argument("folder", type=Path)
    args = parser.parse_args()
    if args.command == "pack":
        pack(args.out, args.since, args.logs)
    else:
        unpack(args.folder)


if __name__ == "__main__":
    main()
