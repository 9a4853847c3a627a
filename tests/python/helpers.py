"""Helpers the Python client's tests share (conftest.py puts testing/ and,
when needed, build/python on sys.path)."""

from __future__ import annotations

import itertools
import os
import time
from typing import Any, Callable

import pytest
from hypertuned_process import bin_dir

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_names = itertools.count(1)


def unique_name(prefix: str = "study") -> str:
    """A study name no other test of the run uses."""
    return f"{prefix}-{next(_names)}"


def study_config(name: str, **spec: Any) -> dict:
    """A small study: x in [0, 1], y in {1..5}, minimizing loss; ``spec``
    entries replace or add to its spec."""
    base = {
        "parameters": [
            {"name": "x", "double_spec": {"min": 0.0, "max": 1.0}},
            {"name": "y", "integer_spec": {"min": 1, "max": 5}},
        ],
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "algorithm": "RANDOM",
        "seed": 7,
    }
    base.update(spec)
    return {"name": name, "spec": base}


def poll(predicate: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    """Calls ``predicate`` until it returns something true, and returns
    that; fails the test with ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"gave up after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)


def program(name: str) -> str:
    """The path of one of the build's programs (hypertune, hypertuned)."""
    return os.path.join(bin_dir(), name)
