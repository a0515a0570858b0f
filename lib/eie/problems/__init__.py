"""Combinatorial problems behind one small interface (see `base.py`), served by one model and one
training loop."""

from .base import Problem
from .bpp import BPP
from .cvrp import CVRP
from .tsp import TSP

PROBLEMS = {"tsp": TSP, "cvrp": CVRP, "bpp": BPP}


def training_notebooks() -> list[str]:
    """Every notebook that trains models (each problem's own, then the others that train one)."""
    return [p.notebook for p in PROBLEMS.values()] + [nb for p in PROBLEMS.values() for nb in p.other_notebooks]


def problem_trained_by(notebook: str) -> type[Problem] | None:
    """The problem class that `notebook` trains, None for a notebook that trains none."""
    for problem in PROBLEMS.values():
        if notebook == problem.notebook or notebook in problem.other_notebooks:
            return problem
    return None


def make_problem(name: str, **options) -> Problem:
    try:
        return PROBLEMS[name](**options)
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS)}") from None
