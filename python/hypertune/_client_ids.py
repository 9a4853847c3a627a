"""The ids a process asks for trials under.

The server hands a client id that already holds a trial that same trial
again (a retried ask must not lose it), so concurrent askers in one process
need distinct ids: the lowest free of ``base``, ``base-1``, ``base-2``, ...
An id stays busy until its trials are finished; one dropped unfinished
keeps it, so that the next asker does not get that trial back.
"""

from __future__ import annotations

import threading

_lock = threading.Lock()
_busy: dict[str, list[bool]] = {}


class ClientIdSlot:
    """One id, held by one asker until :meth:`release`."""

    def __init__(self, base: str, index: int):
        self.base = base
        self.index = index
        self.client_id = base if index == 0 else f"{base}-{index}"
        self._released = False

    def release(self) -> None:
        """Frees the id for the next asker. Idempotent."""
        with _lock:
            if not self._released:
                self._released = True
                _busy[self.base][self.index] = False


def acquire(base: str) -> ClientIdSlot:
    """Holds the lowest free id of ``base``."""
    with _lock:
        busy = _busy.setdefault(base, [])
        try:
            index = busy.index(False)
            busy[index] = True
        except ValueError:
            index = len(busy)
            busy.append(True)
    return ClientIdSlot(base, index)


class SharedSlot:
    """A slot shared by the ``count`` trials of one suggestion: released
    when the last of them is finished."""

    def __init__(self, slot: ClientIdSlot, count: int):
        self._slot = slot
        self._left = count
        self._lock = threading.Lock()
        if count == 0:
            slot.release()

    def finished_one(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left == 0:
                self._slot.release()
