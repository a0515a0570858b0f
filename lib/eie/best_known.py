"""The best-known table that sits beside a folder of real instances (`best_known.csv`), read and checked.

Each row names an instance file of the folder and its best-known (for TSPLIB: optimal) cost, a positive
integer in the set's rounded metric. A malformed table is refused with the row and the value that is
wrong; an instance file without a row is reported rather than skipped in silence.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pandas as pd


def _positive_integer(value) -> int | None:
    """`value` as an int when it is a positive whole number (3, '3', 3.0), else None."""
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    if not math.isfinite(number) or number <= 0 or not number.is_integer():
        return None
    return int(number)


def read_best_known(folder: Path, suffix: str, integer_columns=("best_known",)) -> pd.DataFrame:
    """`folder`/best_known.csv as a table with a `name` column and the `integer_columns` (each a positive
    integer), one row per instance file `<name><suffix>` of the folder. Raises FileNotFoundError when the
    table or a listed file is missing and ValueError naming the row, column and value for an empty or
    headerless table, a missing column, an empty cell, a value that is not a positive integer, a name
    that is not a plain file name, or a name listed twice. Warns about instance files without a row."""
    folder = Path(folder)
    path = folder / "best_known.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no {path}: the instances and their best-known table belong in {folder} "
                                f"(see the README there)")
    try:
        table = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty: it needs a header line 'name,{','.join(integer_columns)}' "
                         f"and one row per instance") from None
    except pd.errors.ParserError as error:
        raise ValueError(f"{path} is not a readable CSV table ({error})") from None
    missing = [column for column in ("name", *integer_columns) if column not in table.columns]
    if missing:
        raise ValueError(f"{path} lacks the column(s) {missing} (its header is {list(table.columns)}); "
                         f"the first line must name 'name,{','.join(integer_columns)}'")
    table = table[["name", *integer_columns]].copy()
    for row, name in enumerate(table.name, start=2):  # line numbers of the file, the header being line 1
        name = name.strip()
        if not name or Path(name).name != name or name in (".", ".."):
            raise ValueError(f"{path} line {row}: instance name {name!r} is not a plain file name in {folder}")
    table["name"] = table.name.str.strip()
    repeated = sorted(set(table.name[table.name.duplicated()]))
    if repeated:
        raise ValueError(f"{path}: {repeated} listed more than once; keep one row per instance")
    for column in integer_columns:
        values = []
        for row, (name, value) in enumerate(zip(table.name, table[column], strict=True), start=2):
            number = _positive_integer(value)
            if number is None:
                raise ValueError(f"{path} line {row} ({name}): {column} {value!r} is not a positive integer; "
                                 f"write the instance's {column} in the set's integer convention")
            values.append(number)
        table[column] = values
    for name in table.name:
        if not (folder / f"{name}{suffix}").is_file():
            raise FileNotFoundError(f"{folder / (name + suffix)} is listed in {path} but missing")
    unlisted = sorted(file.stem for file in folder.glob(f"*{suffix}") if file.stem not in set(table.name))
    if unlisted:
        warnings.warn(f"{folder}: {unlisted} have no row in {path.name} and are not evaluated; add a row "
                      f"with the best-known cost to include them", stacklevel=2)
    return table.reset_index(drop=True)
