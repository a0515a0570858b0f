"""The checks of the experiments' settings (`eie.experiments` declares which setting takes which),
and reading a preset file.

Papermill injects parameters as Python literals (`-p name value`, `-y "name: value"`, `-f file.yaml`),
and on the way a few shapes change: integer keys of a mapping become strings, `-p seeds 0` gives a
number where a list is meant, `-p epochs abc` a string. Each check here converts what has a safe
normal form (mapping keys "10" -> 10, 5.0 -> 5 for integers) and raises `Invalid` otherwise; a
`Check` carries its description and a valid example for the message.
"""

from __future__ import annotations

import math
import numbers
from pathlib import Path

import yaml

from . import methods
from .paths import check_run_name


class Invalid(ValueError):
    """One parameter's value does not fit its description."""


class Check:
    """A parameter's description (what the message says it must be), an example, and its check."""

    def __init__(self, description: str, example, convert):
        self.description, self.example, self.convert = description, example, convert

    def __call__(self, value):
        return self.convert(value)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def integer(minimum: int | None = None, example=None) -> Check:
    def convert(value):
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            value = int(value)
        if not _is_number(value) or not float(value).is_integer():
            raise Invalid("not an integer")
        if minimum is not None and value < minimum:
            raise Invalid(f"below {minimum}")
        return int(value)

    where = "" if minimum is None else f" >= {minimum}"
    return Check(f"an integer{where}", example if example is not None else max(minimum or 0, 1), convert)


def number(above: float | None = None, at_most: float | None = None, example=None) -> Check:
    def convert(value):
        if isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise Invalid("not a number") from None
        if not _is_number(value) or not math.isfinite(value):
            raise Invalid("not a finite number")
        if above is not None and value <= above:
            raise Invalid(f"not above {above}")
        if at_most is not None and value > at_most:
            raise Invalid(f"above {at_most}")
        return value

    bounds = " and ".join(([f"> {above}"] if above is not None else []) + ([f"<= {at_most}"] if at_most is not None else []))
    return Check(f"a number {bounds}".strip(), example, convert)


def flag() -> Check:
    def convert(value):
        if not isinstance(value, bool):
            raise Invalid("not True or False")
        return value

    return Check("True or False", False, convert)


def one_of(*options) -> Check:
    def convert(value):
        if value not in options:
            raise Invalid("not one of the choices")
        return value

    return Check(f"one of {', '.join(map(repr, options))}", options[0], convert)


def method_key(trained: bool | None, exclude=()) -> Check:
    """A key of the method registry (read when checked, so methods registered later count)."""
    def convert(value):
        if value not in methods.keys(trained) or value in exclude:
            raise Invalid("not a registered method of this kind")
        return value

    kind = {True: "a trained method", False: "a test-time method", None: "a method"}[trained]
    return Check(f"{kind} of eie.methods (e.g. {', '.join(k for k in methods.keys(trained) if k not in exclude)})",
                 None, convert)


def optional(check: Check) -> Check:
    return Check(f"None or {check.description}", check.example, lambda v: None if v is None else check(v))


def list_of(item: Check, example, nonempty: bool = True, unique: bool = False, length: int | None = None) -> Check:
    def convert(value):
        if not isinstance(value, (list, tuple)):
            raise Invalid("not a list")
        if nonempty and not value:
            raise Invalid("empty")
        if length is not None and len(value) != length:
            raise Invalid(f"not {length} values")
        out = []
        for entry in value:
            try:
                out.append(item(entry))
            except Invalid as error:
                raise Invalid(f"entry {entry!r}: {error}") from None
        if unique and len({repr(v) for v in out}) != len(out):
            raise Invalid("has repeated entries")
        return out

    if length is not None:
        description = f"a list of {length} values, each {item.description}"
    else:
        description = f"a {'non-empty ' if nonempty else ''}list, each entry {item.description}"
    return Check(description + (", without repeats" if unique else ""), example, convert)


def mapping(key: Check, value: Check, example) -> Check:
    """A dict; papermill writes every key as a string, so keys go through `key` (e.g. "10" -> 10)."""
    def convert(given):
        if not isinstance(given, dict):
            raise Invalid("not a mapping")
        out = {}
        for k, v in given.items():
            try:
                out[key(k)] = value(v)
            except Invalid as error:
                raise Invalid(f"entry {k!r}: {v!r}: {error}") from None
        return out

    return Check(f"a mapping of {key.description} to {value.description}", example, convert)


RUN = Check("a plain folder name (letters, digits, '_', '-', '.')", "myrun", lambda v: _run(v))


def _run(value):
    try:
        return check_run_name(value)
    except ValueError:
        raise Invalid("not a plain folder name") from None


def _device(value):
    if not isinstance(value, str) or not (value in ("auto", "cpu", "cuda", "mps") or
                                          (value.startswith("cuda:") and value[5:].isdigit())):
        raise Invalid("not a device name")
    return value


DEVICE = Check("'auto', 'cpu', 'cuda', 'cuda:<index>' or 'mps'", "auto", _device)
SEEDS = list_of(integer(0), [0, 1], unique=True)
SETTINGS = list_of(list_of(integer(1), [16, 100, 1600], length=3), [[16, 100, 1600]])



def yaml_flow(value) -> str:
    """A value as one would write it after `-y "name: ..."` (YAML flow style)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{yaml_flow(k)}: {yaml_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(yaml_flow(v) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml's SafeLoader, refusing a mapping with a key given twice (plain YAML keeps the last)."""


def _unique_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(None, None, f"the key {key!r} is given twice", key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


def read_yaml(path) -> dict:
    """A YAML mapping from `path`, refusing unreadable YAML, a key given twice (plain YAML keeps the
    last) and a document that is not a mapping, each error naming the file."""
    path = Path(path)
    try:
        values = yaml.load(path.read_text(), Loader=_UniqueKeyLoader) or {}
    except yaml.YAMLError as error:
        raise ValueError(f"preset {path} is not valid YAML: {error}") from None
    if not isinstance(values, dict):
        raise ValueError(f"preset {path} must be a YAML mapping of parameter names to values, got "
                         f"{type(values).__name__}")
    return values
