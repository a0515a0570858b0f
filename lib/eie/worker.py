"""Train the models of a preset in background processes, the way its notebook would.

    python -m eie.worker presets/NAME.yaml 03_train_tsp [--threads 1]

A worker reads the notebook's own defaults (its `parameters` cell), applies the preset file (and
its `per_notebook` entry) exactly as `papermill -f presets/NAME.yaml` does, checks them with the
notebook's parameter check, and trains every (setting, rule, seed) model of it with the same
`eie.study.training_setups` and `train_models` the notebook calls. Start several workers on one
preset to use several cores: each model's checkpoint is locked while it trains, so a worker skips
the models another one holds; an interrupted worker resumes from the last epoch when started
again. Afterwards `papermill notebooks/NB.ipynb out.ipynb -f presets/NAME.yaml` finds every model
trained and only evaluates.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import yaml

from . import study
from .files import FileBusy
from .parameters import check_parameters
from .paths import repo_root
from .problems import training_notebooks


def notebook_defaults(notebook: str) -> dict:
    """The values the `parameters` cell of notebooks/<notebook>.ipynb assigns."""
    path = repo_root() / "notebooks" / f"{notebook}.ipynb"
    if not path.is_file():
        raise FileNotFoundError(f"no notebook {path}")
    cells = json.loads(path.read_text())["cells"]
    cell = next((c for c in cells if "parameters" in c.get("metadata", {}).get("tags", [])), None)
    if cell is None:
        raise ValueError(f"{path} has no cell tagged 'parameters'")
    namespace: dict = {}
    exec("".join(cell["source"]), namespace)  # plain assignments of literals
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def preset_parameters(preset, notebook: str) -> dict:
    """The notebook's checked parameters under `preset` (a YAML file, as papermill -f reads it)."""
    path = Path(preset)
    if not path.is_file():
        raise FileNotFoundError(f"no preset file {path}; presets: {sorted(p.name for p in (repo_root() / 'presets').glob('*.yaml'))}")
    values = yaml.safe_load(path.read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path} must be a YAML mapping of parameter names to values")
    return check_parameters(notebook, {**notebook_defaults(notebook), **values})


def run_worker(preset, notebook: str, poll_seconds: float = 30.0) -> None:
    """Train every model of `preset` for `notebook` that no other process is training; wait for
    those that are and return when all are finished."""
    params = preset_parameters(preset, notebook)
    jobs = [(setup, rule, seed) for setup in study.training_setups(notebook, params)
            for seed in params["seeds"] for rule in params["rules"]]
    pending = list(jobs)
    while pending:
        busy = []
        for setup, rule, seed in pending:
            print(f"training {setup['setting'] or notebook} {rule} seed {seed}", flush=True)
            try:
                study.train_models([rule], [seed], run=params["run"], device=params["device"], progress=False,
                                   tag=setup["tag"], **setup["config"])
                print(f"done {setup['setting'] or notebook} {rule} seed {seed}", flush=True)
            except FileBusy:
                print("  held by another worker; later", flush=True)
                busy.append((setup, rule, seed))
        pending = busy
        if pending:
            time.sleep(poll_seconds)  # another worker is training these; finish only when they are


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("preset", help="a preset YAML file, e.g. presets/paper.yaml")
    parser.add_argument("notebook", choices=training_notebooks())
    parser.add_argument("--threads", type=int, default=1, help="torch threads of this worker (default 1)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    run_worker(args.preset, args.notebook)


if __name__ == "__main__":
    sys.exit(main())
