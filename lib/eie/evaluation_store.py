"""The finished pieces of an evaluation, kept on disk so that an interrupted one resumes.

At the paper's scale (1024 instances up to n = 1600, six methods, three seeds) an evaluation takes
hours on a CPU. `eie.extrapolation.evaluate` keeps each piece as it finishes: the per-instance objectives of
one (method, seed, n), and the reference solver's objectives at one n. A piece is a small file
named by a hash of everything that determines it: for a method, the model's weights, its attention
sites, n mode and precision, the problem's options, the method with its lambda at every n' <= n,
the test instances themselves and the device type; for the reference, the instances and the
solver's options; for both, the source of the modules that compute that kind of piece
(`source_modules`: the modules that compute that kind of piece and what they import, read from the
package's sources, with the piece's own problem's modules: an edit there makes those pieces miss, an
edit elsewhere keeps them, an edit to bin packing's modules the routing problems' pieces), of the
function that builds the pieces (`eie.extrapolation.evaluate`) and the versions of the packages that compute them
(`PACKAGES`: torch and numpy, and for the reference the solvers). `eie.tsplib.evaluate_tsplib` keeps its tours'
lengths the same way (kind "tsplib": one per instance, method and seed). A rerun reads a piece back instead of
computing it; anything changed simply misses and is computed again.

The pieces live in `results/<run>/checkpoints/evaluation/` (not committed, like the checkpoints). A
piece that cannot be read, or whose values have the wrong length or are not finite, is computed again,
with a warning naming its file.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import warnings
from functools import lru_cache
from importlib import metadata
from pathlib import Path

import numpy as np
import torch

from .files import load_tensors, save_atomic
from .fingerprints import tensors_fingerprint
from .problems import PROBLEMS
from .sources import PACKAGE as SOURCE_PACKAGE
from .sources import closure, module_files

PIECE_FORMAT = "eie-evaluation-piece/2"
_PACKAGE = Path(__file__).resolve().parent
# The modules that compute each kind of piece; what they import follows (`eie.sources.closure`, read
# from the package's sources), the problems package aside: a piece depends on its own problem's
# module and what that imports, so an edit to bin packing keeps the routing problems' pieces. The
# store itself keys pieces and computes none.
ENTRIES = {"method": ("eie.evaluation", "eie.methods"), "reference": ("eie.solvers",),
           "tsplib": ("eie.evaluation", "eie.methods", "eie.tsplib")}
_ASIDE = ("eie.problems", "eie.problems.", "eie.evaluation_store")


def source_modules(kind: str, problem: str | None = None) -> list[str]:
    """The package modules whose source keys pieces of `kind` for `problem` (a registered problem's
    name; another, or None: every module of problems/)."""
    if kind not in ENTRIES:
        raise ValueError(f"unknown kind of evaluation piece {kind!r}; choose from {', '.join(ENTRIES)}")
    own = PROBLEMS[problem].__module__ if problem in PROBLEMS else "eie.problems"
    if own not in module_files():  # a problem declared outside the package: every problem module
        own = "eie.problems"
    return sorted({*closure(ENTRIES[kind], skip=_ASIDE), *closure([own])})


# The installed packages whose version can change each kind of piece: torch computes every decoding
# (and the reference's instances); LKH (elkai) and HGS (pyvrp) the reference solutions.
PACKAGES = {"method": ("torch", "numpy"), "tsplib": ("torch", "numpy"), "reference": ("torch", "numpy", "elkai", "pyvrp")}


def package_versions(kind: str) -> dict:
    """{package: installed version, or 'absent'} of the packages `PACKAGES` names for `kind`."""
    found = {}
    for package in PACKAGES.get(kind, ()):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = "absent"
    return found


@lru_cache(maxsize=None)
def source_hash(kind: str, problem: str | None = None) -> str:
    """A hash of the source of the modules that compute pieces of `kind` (a key of `ENTRIES`) for
    `problem` (`source_modules`), and of the versions of the packages that compute them."""
    digest = hashlib.sha256()
    for package, version in package_versions(kind).items():
        digest.update(f"{package}=={version}".encode())
    files = module_files()
    for name in source_modules(kind, problem):
        relative = files[name].relative_to(SOURCE_PACKAGE)
        digest.update(relative.as_posix().encode())
        digest.update((_PACKAGE / relative).read_bytes())
    return digest.hexdigest()[:16]


def function_fingerprint(function) -> str:
    """A hash of one function's source (the code that turns computed costs into a piece)."""
    return hashlib.sha256(inspect.getsource(function).encode()).hexdigest()[:16]


def rule_fingerprint(rule, n: int) -> str:
    """A hash of lambda(n') for n' = 1..n: what a rule gives at every length a decoding may ask for
    (the n of the instance, or each shorter unmasked length)."""
    values = np.broadcast_to(np.asarray(rule(np.arange(1, n + 1)), dtype=np.float64), (n,))
    return hashlib.sha256(np.ascontiguousarray(values).tobytes()).hexdigest()[:16]


def model_fingerprint(model: torch.nn.Module) -> str:
    """A hash of a model's weights."""
    return tensors_fingerprint(model.state_dict())


def model_description(model: torch.nn.Module) -> dict:
    """What of a trained model decides its decodings: its weights, attention sites, n mode and
    encoder precision (`eie.extrapolation.evaluate` builds the same description inline)."""
    return {"weights": model_fingerprint(model), "sites": list(model.attention.sites),
            "n_mode": model.attention.n_mode, "precision": model.encoder_precision}


def expected_length(key: dict) -> int | None:
    """How many values a piece under `key` holds: one per test instance for a method, one per solved
    instance for the reference; None where the key does not say."""
    kind = key.get("kind", "reference")
    if kind == "method" and "test_size" in key:
        return int(key["test_size"])
    if kind == "reference" and "reference_size" in key:
        return int(key["reference_size"])
    return None


class EvaluationStore:
    """Finished evaluation pieces in `folder`, looked up by a key of plain values (JSON); its
    "kind" entry ("method", "tsplib" or "reference", the default) adds the source of that kind's modules
    (`ENTRIES`) to the key. `folder` None keeps nothing (every lookup misses). A piece missing from
    `folder` is looked up in `carried` too (pieces committed from another machine, read only)."""

    def __init__(self, folder: Path | str | None, carried: Path | str | None = None):
        self.folder = None if folder is None else Path(folder)
        self.carried = None if carried is None else Path(carried)

    def _path(self, key: dict) -> Path:
        text = json.dumps({**key, "source": source_hash(key.get("kind", "reference"), key.get("problem"))},
                          sort_keys=True)
        return self.folder / f"{hashlib.sha256(text.encode()).hexdigest()[:24]}.pt"

    def get(self, key: dict) -> np.ndarray | None:
        """The values stored under `key`, or None when there are none (or they cannot be read)."""
        if self.folder is None:
            return None
        path = self._path(key)
        if not path.is_file() and self.carried is not None:
            path = self.carried / path.name
        if not path.is_file():
            return None
        try:
            payload = load_tensors(path, "evaluation piece")
            if payload.get("format") != PIECE_FORMAT or payload.get("key") != json.dumps(key, sort_keys=True):
                return None  # another key under the same hash: compute it
            values = payload["values"].numpy()
            expected = expected_length(key)
            if expected is not None and values.shape != (expected,):
                raise ValueError(f"it holds {values.shape} values where its key asks for ({expected},)")
            if not np.isfinite(values).all():
                raise ValueError("it holds non-finite values")
            return values
        except (ValueError, KeyError, AttributeError) as error:
            warnings.warn(f"evaluation piece {path} is unreadable ({error}); computing it again", stacklevel=2)
            return None

    def put(self, key: dict, values: np.ndarray) -> None:
        if self.folder is not None:
            save_atomic({"format": PIECE_FORMAT, "key": json.dumps(key, sort_keys=True),
                         "values": torch.from_numpy(np.ascontiguousarray(values))}, self._path(key))

    def stale_pieces(self) -> list[Path]:
        """The pieces in `folder` and `carried` that no lookup can read any more: their key, with
        the source of today's modules, names another file (an edit since made them miss), or
        they cannot be read. Deleting them frees the space; nothing reads them."""
        stale = []
        for folder in (self.folder, self.carried):
            for path in sorted(folder.glob("*.pt")) if folder is not None and folder.is_dir() else []:
                try:
                    key = json.loads(load_tensors(path, "evaluation piece")["key"])
                    current = self._path(key).name == path.name
                except (ValueError, KeyError, TypeError):
                    current = False
                if not current:
                    stale.append(path)
        return stale

    def get_or_compute(self, key: dict, compute) -> np.ndarray:
        """The stored values for `key`, or `compute()`'s (then stored), with their dtype."""
        values = self.get(key)
        if values is None:
            values = np.asarray(compute())
            self.put(key, values)
        return values
