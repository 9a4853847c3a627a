"""hypertuned as a child process, for the Python client's tests and
benchmarks: started on a free loopback port with a database in a given
directory, killed with SIGKILL, and started again on the same port and
database.

The first start lets the server pick a free port (--listen 127.0.0.1:0) and
reads it from its "listening on" line; a restart asks for that port again,
so that the server keeps its address. The server's output goes to
DIR/hypertuned.log.
"""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import subprocess
import time
from typing import Optional

_START_TIMEOUT = 30.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def bin_dir() -> str:
    """Where hypertuned and hypertune are: $HYPERTUNE_BIN_DIR (ctest sets
    it), else build/bin of this checkout."""
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bin")
    return os.path.abspath(os.environ.get("HYPERTUNE_BIN_DIR", default))


class Hypertuned:
    """One hypertuned on ``workdir``/studies.db at one loopback port."""

    def __init__(self, workdir: str, extra_args: Optional[list[str]] = None):
        os.makedirs(workdir, exist_ok=True)
        self.workdir = workdir
        self.db = os.path.join(workdir, "studies.db")
        # Known once the server first listens.
        self.address = "127.0.0.1:0"
        self.extra_args = list(extra_args or [])
        self.process: Optional[subprocess.Popen] = None
        self.log_path = os.path.join(workdir, "hypertuned.log")

    def start(self) -> None:
        """Starts the server and returns once it listens (waiting for its
        "listening on" line, up to 30 s); RuntimeError if it does not."""
        assert self.process is None, "already running"
        program = os.path.join(bin_dir(), "hypertuned")
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(
                [program, "--db", self.db, "--listen", self.address, *self.extra_args],
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert self.process.stdout is not None
        deadline = time.monotonic() + _START_TIMEOUT
        said = b""
        while not re.search(rb"listening on \S+\s", said):
            left = deadline - time.monotonic()
            ready = select.select([self.process.stdout], [], [], max(0.0, left))[0]
            chunk = os.read(self.process.stdout.fileno(), 4096) if ready else b""
            if not chunk:  # exited, or the deadline passed
                code = self.process.poll()
                self.kill()
                with open(self.log_path, errors="replace") as log:
                    tail = log.read()[-2000:]
                raise RuntimeError(
                    f"hypertuned did not start on {self.address} (exit status {code}, "
                    f"said {said.decode(errors='replace')!r}); its log:\n{tail}"
                )
            said += chunk
        self.address = re.search(rb"listening on (\S+)", said).group(1).decode()

    def kill(self) -> None:
        """SIGKILLs the server (if it runs) and reaps it."""
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.process = None

    def restart(self) -> None:
        """kill -9, then start again on the same port and database."""
        self.kill()
        self.start()

    def __enter__(self) -> Hypertuned:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()
