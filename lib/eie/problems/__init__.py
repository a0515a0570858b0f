"""Combinatorial problems behind one small interface (see `base.py`), served by one model and one
training loop."""

from .base import Problem
from .bpp import BPP
from .cvrp import CVRP
from .tsp import TSP

PROBLEMS = {"tsp": TSP, "cvrp": CVRP, "bpp": BPP}


def make_problem(name: str, **options) -> Problem:
    try:
        return PROBLEMS[name](**options)
    except KeyError:
        raise ValueError(f"unknown problem {name!r}; choose from {', '.join(PROBLEMS)}") from None
