"""A preset as a notebook sees it, and the threads of a process: what the worker, the cluster
tasks and the scripts load the same way.

- `notebook_defaults(notebook)`: the values the notebook's `parameters` cell assigns;
- `preset_parameters(preset, notebook)`: those defaults under the preset file (and its
  `per_notebook` entry), checked by the notebook's own parameter check, as `papermill -f` gives them;
- `use_threads(count)`: torch's and the bin-packing kernel's threads of this process.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from .parameters import check_parameters, load_preset
from .paths import repo_root


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
        known = sorted(p.name for p in (repo_root() / "presets").glob("*.yaml"))
        raise FileNotFoundError(f"no preset file {path}; presets: {known}")
    return check_parameters(notebook, {**notebook_defaults(notebook), **load_preset(path)})


def use_threads(count: int) -> None:
    """Limit this process to `count` threads: torch's and the numba bin-packing kernel's
    (`problems.placement_kernel`, which otherwise uses every core whatever torch is told)."""
    torch.set_num_threads(count)
    try:
        import numba
    except ImportError:  # pragma: no cover  (the torch path of `heightmap` runs without numba)
        return
    numba.set_num_threads(min(count, numba.config.NUMBA_NUM_THREADS))
