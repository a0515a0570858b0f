"""`pytest --nbval notebooks/` leaves the checkout as it found it.

Executing the notebooks rewrites what they write: `results/default/` (the smoke-trained models'
tables, which depend on the machine and thread count) and the figures. Before the test run the
tracked files under results/ and figures/ are copied aside (a tar file in a temporary folder);
afterwards every one of them whose bytes changed is put back. Ignored outputs (checkpoints,
evaluation pieces) stay, so a second run resumes from them.
"""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WATCHED = ("results", "figures")
_snapshot: dict = {}


def _tracked() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z", *WATCHED], cwd=ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):  # not a git checkout: every file under the folders
        return [str(p.relative_to(ROOT)) for folder in WATCHED for p in (ROOT / folder).rglob("*") if p.is_file()]
    return [name for name in listed.stdout.decode().split("\0") if name and (ROOT / name).is_file()]


def _digest(path: Path) -> str:
    return hashlib.blake2b(path.read_bytes(), digest_size=16).hexdigest()


def pytest_sessionstart(session):
    if not session.config.getoption("nbval", default=False) and not session.config.getoption("nbval_lax",
                                                                                                default=False):
        return
    folder = Path(tempfile.mkdtemp(prefix="eie-nbval-"))
    names = _tracked()
    archive = folder / "tracked.tar"
    with tarfile.open(archive, "w") as tar:
        for name in names:
            tar.add(ROOT / name, arcname=name)
    _snapshot.update(archive=archive, digests={name: _digest(ROOT / name) for name in names})


def pytest_sessionfinish(session, exitstatus):
    if not _snapshot:
        return
    archive, digests = _snapshot["archive"], _snapshot["digests"]
    changed = [name for name, digest in digests.items()
               if not (ROOT / name).is_file() or _digest(ROOT / name) != digest]
    if changed:
        with tarfile.open(archive) as tar:
            for name in changed:
                if hasattr(tarfile, "data_filter"):  # Python >= 3.10.12
                    tar.extract(name, ROOT, filter="data")
                else:
                    tar.extract(name, ROOT)
    archive.unlink()
    archive.parent.rmdir()
    _snapshot.clear()
