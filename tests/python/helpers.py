"""Helpers the Python client's tests share (conftest.py puts testing/ and,
when needed, build/python on sys.path)."""

from __future__ import annotations

import ctypes
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, Callable, Optional

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


# What PostgresServer runs.
_PROGRAMS = ("initdb", "postgres", "pg_isready")


class PostgresUnavailable(Exception):
    """PostgreSQL cannot run here; the message says why (for a visible skip)."""


def _postgres_bin_dir() -> Optional[str]:
    """The folder of initdb, postgres and pg_isready: that of the initdb on the PATH
    (links followed), else Debian's newest /usr/lib/postgresql/VERSION/bin;
    None if there is none."""
    def has_programs(folder: str) -> bool:
        return all(os.access(os.path.join(folder, p), os.X_OK) for p in _PROGRAMS)

    initdb = shutil.which("initdb")
    if initdb and has_programs(os.path.dirname(os.path.realpath(initdb))):
        return os.path.dirname(os.path.realpath(initdb))
    try:
        versions = [v for v in os.listdir("/usr/lib/postgresql") if v.isdigit()]
    except OSError:
        return None
    for version in sorted(versions, key=int, reverse=True):
        folder = os.path.join("/usr/lib/postgresql", version, "bin")
        if has_programs(folder):
            return folder
    return None


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: SIGKILL when the parent thread ends. Runs after
    # the switch of user, which would clear it.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class PostgresServer:
    """A throwaway PostgreSQL server in a temporary directory of its own,
    as testing/postgres_server.h's for the C++ tests: initdb, then postgres
    listening only on a Unix socket in that directory (no TCP port),
    trusting local connections as user "postgres", without fsync. As root
    both run as user "nobody" (PostgreSQL refuses root), which owns the
    directory. The server gets SIGKILL if this process dies first
    (PR_SET_PDEATHSIG); stop() (or leaving the ``with`` block) stops it and
    removes the directory.

    start() raises PostgresUnavailable when the programs are not installed
    (or there is no user "nobody" to run them as root), RuntimeError
    quoting the log when they fail.
    """

    NOT_FOUND = "PostgreSQL not found (apt-get install postgresql)"

    def __init__(self) -> None:
        self.dir: Optional[str] = None
        self._process: Optional[subprocess.Popen] = None

    def url(self, database: str = "postgres") -> str:
        """The URL of ``database``, for hypertuned --db."""
        assert self.dir is not None, "not started"
        return f"postgresql:///{database}?host={self.dir}&user=postgres"

    def start(self) -> None:
        """Initializes the cluster and starts the server; returns once it
        accepts connections (pg_isready, up to 30 s)."""
        bin_dir = _postgres_bin_dir()
        if bin_dir is None:
            raise PostgresUnavailable(self.NOT_FOUND)
        user: dict[str, Any] = {}
        if os.geteuid() == 0:
            try:
                nobody = pwd.getpwnam("nobody")
            except KeyError:
                raise PostgresUnavailable(
                    'PostgreSQL refuses to run as root, and there is no user "nobody" '
                    "to run it as"
                ) from None
            user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
        # Short: the socket's path must fit in 107 bytes.
        self.dir = tempfile.mkdtemp(prefix="hypertune-pg-", dir="/tmp")
        if user:
            os.chown(self.dir, user["user"], user["group"])
        data = os.path.join(self.dir, "data")
        initdb = self._run(
            bin_dir, "initdb", user, False,
            "-D", data, "--username=postgres", "--auth=trust", "--encoding=UTF8",
            "--locale=C", "--no-sync",
        )
        if initdb.wait() != 0:
            raise RuntimeError(
                f"initdb failed (status {initdb.returncode}): {self._log('initdb')}"
            )
        self._process = self._run(
            bin_dir, "postgres", user, True,
            "-D", data, "-k", self.dir, "-c", "listen_addresses=", "-c", "fsync=off",
            "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
        )
        ping = [os.path.join(bin_dir, "pg_isready"), "-q", "-h", self.dir, "-U", "postgres"]
        deadline = time.monotonic() + 30.0
        while subprocess.run(ping, stdout=subprocess.DEVNULL).returncode != 0:
            if self._process.poll() is not None:
                raise RuntimeError(
                    f"postgres exited (status {self._process.returncode}): {self._log('postgres')}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start within 30 s: {self._log('postgres')}")
            time.sleep(0.01)

    def stop(self) -> None:
        """Stops the server (a fast shutdown) and removes the directory."""
        if self._process is not None:
            if self._process.poll() is None:
                self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
            self._process = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> PostgresServer:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _run(
        self, bin_dir: str, program: str, user: dict, die_with_parent: bool, *args: str
    ) -> subprocess.Popen:
        assert self.dir is not None
        log_path = os.path.join(self.dir, f"{program}.log")
        with open(log_path, "ab") as log:
            if user:
                os.chown(log_path, user["user"], user["group"])
            return subprocess.Popen(
                [os.path.join(bin_dir, program), *args],
                cwd=self.dir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent if die_with_parent else None,
                **user,
            )

    def _log(self, program: str) -> str:
        assert self.dir is not None
        with open(os.path.join(self.dir, f"{program}.log"), errors="replace") as log:
            return log.read()[-2000:]
