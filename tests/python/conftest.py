"""Fixtures of the Python client's tests: a real hypertuned started on a
free loopback port with a database in a temporary directory (one per test
module, or one per test where the test kills it), and a client of it.

ctest runs these with PYTHONPATH=build/python (the package with its
generated stubs); by hand: PYTHONPATH=build/python /usr/bin/python3 -m pytest
tests/python.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "testing"))
if not any(os.path.isdir(os.path.join(p, "hypertune", "v1")) for p in sys.path if p):
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))  # run by hand, no PYTHONPATH

import hypertune  # noqa: E402
from hypertuned_process import Hypertuned  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hypertuned]:
    """One hypertuned for the test module."""
    with Hypertuned(str(tmp_path_factory.mktemp("hypertuned"))) as running:
        yield running


@pytest.fixture
def own_server(tmp_path: Any) -> Iterator[Hypertuned]:
    """A hypertuned of the test's own, which it may kill and restart."""
    with Hypertuned(str(tmp_path / "server")) as running:
        yield running


@pytest.fixture
def client(server: Hypertuned) -> Iterator[hypertune.Client]:
    with hypertune.Client(server.address) as connected:
        yield connected
