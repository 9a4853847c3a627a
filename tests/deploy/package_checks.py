"""What the package checks (check_debs.py, check_python_package.py) share:
running a step, and starting the hypertuned under test."""

import os
import re
import subprocess
import time


class Failure(Exception):
    """A step of the check failed; the message says which and why."""


def run(command, what, cwd=None, env=None):
    """Runs command; returns its stdout, or raises Failure with its output."""
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=300)
    if result.returncode != 0:
        raise Failure(f"{what} failed (exit {result.returncode}): "
                      f"{' '.join(command)}\n{result.stdout}{result.stderr}")
    return result.stdout


def start_server(hypertuned, tmp):
    """Starts hypertuned on a free port; returns (process, address)."""
    log_path = os.path.join(tmp, "hypertuned.log")
    with open(log_path, "w") as log:
        process = subprocess.Popen([hypertuned, "--db", os.path.join(tmp, "check.db"),
                                    "--listen", "127.0.0.1:0"],
                                   stdout=log, stderr=subprocess.STDOUT)
    # The server prints its address once it listens: wait for that line
    # (bounded), never for a fixed time.
    for _ in range(600):
        with open(log_path) as f:
            match = re.search(r"listening on (\S+)", f.read())
        if match:
            return process, match.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.05)
    process.kill()
    with open(log_path) as f:
        raise Failure(f"{hypertuned} did not say where it listens:\n{f.read()}")
