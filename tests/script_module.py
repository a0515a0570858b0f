"""A script of scripts/ imported as a module, so that tests call its functions."""

import importlib.util
import sys

from eie.paths import repo_root


def script_module(name: str):
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, repo_root() / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
