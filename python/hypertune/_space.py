"""Optuna's ways of naming a parameter's domain (``suggest_float(name, low,
high, step=, log=)``, ``suggest_int``, ``suggest_categorical``) as
hypertune ParameterSpecs, in one place: the Optuna bridge (optuna.py) maps
Optuna's distributions through it, and :meth:`Trial.suggest_float` and its
kin check an Optuna-style objective's calls against the study's space with
it. Pure functions of plain values; needs no Optuna.

A spec is the config dict of one parameter, as a study's config holds it:
``{"name": "lr", "double_spec": {"min": 1e-5, "max": 0.1, "scale": "LOG"}}``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Optional

from hypertune._proto import pb

# The server's limits (common/limits.h): values of one parameter, bytes of
# one category.
MAX_VALUES = 1000
MAX_CATEGORY_BYTES = 1024

KINDS = ("double_spec", "integer_spec", "discrete_spec", "categorical_spec")

#: The kind of parameter each kind of spec is, as errors name it.
KIND_NAMES = {
    "double_spec": "DOUBLE",
    "integer_spec": "INTEGER",
    "discrete_spec": "DISCRETE",
    "categorical_spec": "CATEGORICAL",
}


def category_label(choice: Any) -> str:
    """The string a categorical choice is in hypertune: a str as itself,
    anything else (None, bool, int, float) as its repr."""
    return choice if isinstance(choice, str) else repr(choice)


def step_values(low: float, high: float, step: float) -> Optional[list[float]]:
    """The grid low, low + step, ..., high; None past MAX_VALUES values."""
    count = int(round((high - low) / step)) + 1
    if count > MAX_VALUES:
        return None
    # low + k * step may pass high by a rounding (0.1 * 3), which Optuna's
    # distribution would not hold.
    return [min(low + k * step, high) for k in range(count)]


def float_spec(
    name: str, low: float, high: float, step: Optional[float], log: bool
) -> tuple[Optional[dict], str]:
    """``suggest_float(name, low, high, step=step, log=log)`` as a spec
    (a DOUBLE range, LOG scale when ``log``; with a ``step``, the DISCRETE
    grid low, low+step, ..., high) and ""; or None and why hypertune cannot
    hold it."""
    if step is None:
        scale = "LOG" if log else "LINEAR"
        return {"name": name, "double_spec": {"min": low, "max": high, "scale": scale}}, ""
    values = step_values(low, high, step)
    if values is None:
        return None, f"its step grid has more than {MAX_VALUES} values"
    return {"name": name, "discrete_spec": {"values": values}}, ""


def int_spec(
    name: str, low: int, high: int, step: int, log: bool
) -> tuple[Optional[dict], str]:
    """``suggest_int(name, low, high, step=step, log=log)`` as a spec (an
    INTEGER range, LOG when ``log``; with a step > 1 the DISCRETE grid) and
    ""; or None and why hypertune cannot hold it."""
    if step == 1:
        scale = "LOG" if log else "LINEAR"
        return {"name": name, "integer_spec": {"min": low, "max": high, "scale": scale}}, ""
    values = step_values(low, high, step)
    if values is None:
        return None, f"its step grid has more than {MAX_VALUES} values"
    return {"name": name, "discrete_spec": {"values": [float(int(round(v))) for v in values]}}, ""


def categorical_spec(name: str, choices: Sequence[Any]) -> tuple[Optional[dict], str]:
    """``suggest_categorical(name, choices)`` as a CATEGORICAL spec over
    the choices' labels (:func:`category_label`) and ""; or None and why
    hypertune cannot hold it."""
    labels = [category_label(c) for c in choices]
    if len(set(labels)) != len(labels):
        return None, "two of its choices have the same label (e.g. 1 and '1')"
    if len(labels) > MAX_VALUES:
        return None, f"it has more than {MAX_VALUES} choices"
    if any(len(label.encode()) > MAX_CATEGORY_BYTES for label in labels):
        return None, f"a choice's label is longer than {MAX_CATEGORY_BYTES} bytes"
    return {"name": name, "categorical_spec": {"values": labels}}, ""


def spec_dict(parameter: pb.ParameterSpec) -> dict:
    """A stored ParameterSpec as a config dict (JSON's mapping would write
    int64 as strings and drop defaults)."""
    spec: dict[str, Any] = {"name": parameter.name}
    kind = parameter.WhichOneof("kind")
    domain = getattr(parameter, kind)
    if kind in ("double_spec", "integer_spec"):
        number = float if kind == "double_spec" else int
        scale = "LOG" if domain.scale == pb.LOG else "LINEAR"
        spec[kind] = {"min": number(domain.min), "max": number(domain.max), "scale": scale}
    else:
        spec[kind] = {"values": list(domain.values)}
    if parameter.parent:
        spec["parent"] = parameter.parent
        if parameter.parent_categories:
            spec["parent_categories"] = list(parameter.parent_categories)
        if parameter.parent_values:
            spec["parent_values"] = list(parameter.parent_values)
    return spec


def kind_of(spec: dict) -> str:
    return next(kind for kind in KINDS if kind in spec)


def close(a: float, b: float) -> bool:
    """Equal but for rounding: a value's trip through the server (a double)
    keeps it exact; the tolerance is for grids made by low + k * step."""
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)


def same_domain(a: dict, b: dict) -> bool:
    """Whether specs ``a`` and ``b`` search the same values (their
    conditions aside): the same kind, bounds and scale; the same grid; the
    same categories in any order."""
    kind = kind_of(a)
    if kind != kind_of(b):
        return False
    x, y = a[kind], b[kind]
    if kind in ("double_spec", "integer_spec"):
        return (
            close(float(x["min"]), float(y["min"]))
            and close(float(x["max"]), float(y["max"]))
            and x.get("scale", "LINEAR") == y.get("scale", "LINEAR")
        )
    if kind == "discrete_spec":
        return len(x["values"]) == len(y["values"]) and all(
            close(float(u), float(v)) for u, v in zip(sorted(x["values"]), sorted(y["values"]))
        )
    return sorted(x["values"]) == sorted(y["values"])


def describe_domain(spec: dict) -> str:
    """``spec``'s domain as a config fragment, e.g. ``"double_spec":
    {"min": 0.0, "max": 1.0, "scale": "LINEAR"}``."""
    kind = kind_of(spec)
    domain = spec[kind]
    if kind in ("double_spec", "integer_spec"):
        text = f'"min": {domain["min"]!r}, "max": {domain["max"]!r}'
        if domain.get("scale", "LINEAR") != "LINEAR":
            text += f', "scale": "{domain["scale"]}"'
    else:
        values = ", ".join(
            f'"{v}"' if isinstance(v, str) else repr(v) for v in domain["values"]
        )
        text = f'"values": [{values}]'
    return f'"{kind}": {{{text}}}'
