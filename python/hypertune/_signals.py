"""SIGTERM as an exception, while a trial is held in a ``with`` block.

Python's default SIGTERM ends the process at once, without unwinding: the
trial would sit ACTIVE until its lease ran out. While a held trial is used
as a context manager in the main thread, SIGTERM (a spot preemption notice,
a scheduler's kill) raises :class:`Terminated` instead, so that the trial
is given back with its checkpoint and the program exits with status 143
(128 + SIGTERM). A program that installed its own SIGTERM handler keeps it.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

#: The exit status of a program ended by SIGTERM.
EXIT_STATUS = 128 + signal.SIGTERM


class Terminated(SystemExit):
    """Raised in the main thread on SIGTERM while a trial is held in a
    ``with`` block. A SystemExit: ``except Exception`` does not catch it,
    and uncaught it ends the program quietly with status 143."""

    def __init__(self) -> None:
        super().__init__(EXIT_STATUS)


_lock = threading.Lock()
_depth = 0
_previous: Any = None


def _raise_terminated(signum: int, frame: Any) -> None:
    raise Terminated()


def enter() -> bool:
    """Turns SIGTERM into Terminated until the matching :func:`leave`.
    Returns whether it did (only from the main thread, and only where
    SIGTERM has its default action); call leave() only if so."""
    global _depth, _previous
    if threading.current_thread() is not threading.main_thread():
        return False
    with _lock:
        if _depth == 0:
            current = signal.getsignal(signal.SIGTERM)
            if current is not signal.SIG_DFL:
                return False
            _previous = current
            signal.signal(signal.SIGTERM, _raise_terminated)
        _depth += 1
    return True


def leave() -> None:
    """Undoes one :func:`enter` that returned True."""
    global _depth
    with _lock:
        _depth -= 1
        if _depth == 0:
            signal.signal(signal.SIGTERM, _previous)
