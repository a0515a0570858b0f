"""Where the study's files live, resolved from the repository root whatever the working folder.

nbval starts a notebook's kernel in `notebooks/`, papermill in the caller's folder, and a user's
script anywhere: every path the study reads or writes goes through `repo_root()` so that all of
them land in the same `figures/` and `results/`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT_ENV_VAR = "EIE_ROOT"


def _is_root(folder: Path) -> bool:
    return (folder / "lib" / "eie").is_dir() and (folder / "pyproject.toml").is_file()


def repo_root() -> Path:
    """The study's repository root.

    Order: the `EIE_ROOT` environment variable; the nearest folder above the working folder that
    holds `lib/eie` and `pyproject.toml`; the checkout this package was installed from (editable
    install).
    """
    env = os.environ.get(ROOT_ENV_VAR)
    if env:
        root = Path(env).expanduser().resolve()
        if not _is_root(root):
            raise FileNotFoundError(
                f"{ROOT_ENV_VAR}={env} is not the study's repository root "
                "(expected lib/eie/ and pyproject.toml there); unset it or point it at the checkout."
            )
        return root
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if _is_root(folder):
            return folder
    installed = Path(__file__).resolve().parents[2]
    if _is_root(installed):
        return installed
    raise FileNotFoundError(
        "cannot find the study's repository root from the working folder "
        f"{here}; run from inside the checkout or set {ROOT_ENV_VAR}."
    )


def figures_dir() -> Path:
    path = repo_root() / "figures"
    path.mkdir(parents=True, exist_ok=True)
    return path


def check_run_name(run) -> str:
    """A run name is a plain folder name: letters, digits, '_', '-', '.', not starting with '.'."""
    if not isinstance(run, str) or not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", run):
        raise ValueError(f"run name must be a plain folder name (letters, digits, '_', '-', '.'; not starting with "
                         f"'.'), e.g. run = \"myrun\"; got {run!r}")
    return run


def results_dir(run: str = "default", create: bool = True) -> Path:
    """`results/<run>/`, created on first use; with `create=False` (readers of a finished run) a
    missing folder is an error that says which notebooks write it."""
    path = repo_root() / "results" / check_run_name(run)
    if create:
        path.mkdir(parents=True, exist_ok=True)
    elif not path.is_dir():
        runs = sorted(p.name for p in (repo_root() / "results").iterdir() if p.is_dir())
        raise FileNotFoundError(f"no results folder {path}: run notebooks 03-05 with -p run {run} first, or pick an "
                                f"existing run ({', '.join(runs)})")
    return path


def eie_net_path(d: int, N: int, N_max: int, run: str = "default") -> Path:
    """Where notebook 02 saves, and the training notebooks look for, the fitted EIE net."""
    return results_dir(run) / "eie_nets" / f"eie_d{d}_N{N}_Nmax{N_max}.pt"


def exact_table_path(d: int, N: int, N_max: int, run: str = "default") -> Path:
    """Where the tabulated exact entropy-invariant scale lambda*(n) is saved."""
    return results_dir(run) / "eie_nets" / f"exact_lambda_d{d}_N{N}_Nmax{N_max}.csv"
