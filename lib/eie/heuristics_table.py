"""The table of every sort-then-place heuristic of bin packing at every test length (`bpp_heuristics.csv`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .evaluation import fixed_test_set
from .evaluation_store import EvaluationStore
from .fingerprints import tensors_fingerprint
from .problems.bpp_heuristics import SORT_KEYS, heuristic_load_rates


def heuristics_table(problems, lengths, size: int, test_seed: int = 1234, store=None) -> pd.DataFrame:
    """Mean load rate (%) of every heuristic on the first `size` instances of the fixed test set at
    each n of `lengths`, for each bin of `problems` (columns setting, heuristic, n, load_rate), what
    `bpp_heuristics.csv` holds. With a `store` (`eie.evaluation_store.EvaluationStore`, the run's)
    each (bin, n)'s load rates are kept there and read back by a rerun."""
    store = store or EvaluationStore(None)
    keys = tuple(SORT_KEYS)
    rows = []
    for problem in problems:
        for n in lengths:
            instance = fixed_test_set(problem, n, size, test_seed)
            piece = {"kind": "reference", "table": "every heuristic", "problem": problem.name,  # the store
                     "options": {name: repr(value) for name, value in vars(problem).items()}, "n": n,  # adds the
                     "size": size, "test_seed": test_seed, "instances": tensors_fingerprint(instance),  # source
                     "heuristics": list(keys)}  # of problems/ to the key
            rates = store.get_or_compute(piece, lambda problem=problem, instance=instance: np.stack(list(heuristic_load_rates(
                problem, instance, keys).values())))
            for key, rate in zip(keys, rates, strict=True):
                rows.append({"setting": problem.setting, "heuristic": key, "n": n, "load_rate": float(rate.mean())})
    return pd.DataFrame(rows)
