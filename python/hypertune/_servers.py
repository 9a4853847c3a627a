"""The servers a Client talks to, and which one its calls go to now.

Several hypertuned may share one PostgreSQL database: the leader serves, and
a standby answers every call UNAVAILABLE with "standby: the leader is at
HOST:PORT" (or "starting, or standby with no leader yet; try ...") as
service/server/leadership.cc words it. A Client given a list of servers keeps one
channel per server and sends each call to the current one; after an
UNAVAILABLE it moves to the leader a standby names, when that is in the
list, and retries at once, else to the next server, retrying after the
usual backoff: the C++ SDK's ClientCore::MoveOn (trainer_sdk/client_core.cc).
With one server nothing moves.

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import functools
import re
import threading
import time
from typing import Any, Callable, Optional, Sequence

import grpc

from hypertune._proto import pb_grpc

# A standby's answer, up to the leader's address.
_LEADER_IS = "the leader is at "
# What ends the address in that answer.
_ADDRESS_END = re.compile(r"[ ;,)]")

# grpcio's connectivity poller checks for subscribers this often (seconds).
_POLLER_STOPS_WITHIN = 0.2


def split(server: str) -> list[str]:
    """The addresses of a comma-separated list (blanks around them and empty
    entries dropped); ``[server]`` when it names none."""
    addresses = [part.strip() for part in server.split(",") if part.strip()]
    return addresses or [server]


def named_leader(message: str) -> Optional[str]:
    """The leader's address a standby's UNAVAILABLE ``message`` names, or
    None if it names none."""
    at = message.find(_LEADER_IS)
    if at < 0:
        return None
    return _ADDRESS_END.split(message[at + len(_LEADER_IS) :], maxsplit=1)[0]


def next_server(servers: Sequence[str], failed: int, message: str) -> tuple[int, bool]:
    """Where calls go after ``servers[failed]`` answered UNAVAILABLE with
    ``message``, as ``(index, at_once)``: the leader the message names, if
    it is in the list (``at_once``: it is another server than the one that
    failed, so retry without a backoff); else the next server, after a
    backoff. One server: ``(failed, False)``."""
    if len(servers) < 2:
        return failed, False
    leader = named_leader(message)
    if leader is not None and leader in servers:
        index = list(servers).index(leader)
        return index, index != failed
    return (failed + 1) % len(servers), False


class Servers:
    """One channel (and stub) per server of a list, and the current one.

    Args:
        addresses: the servers, at least one.
        open_channel: opens the channel to an address.
    """

    def __init__(self, addresses: Sequence[str], open_channel: Callable[[str], grpc.Channel]):
        assert addresses, "no server"
        self.addresses: tuple[str, ...] = tuple(addresses)
        self._channels = [open_channel(address) for address in self.addresses]
        self._stubs = [pb_grpc.HyperTuneStub(channel) for channel in self._channels]
        self._lock = threading.Lock()
        self._current = 0  # guarded by _lock
        self._closed = False  # guarded by _lock
        self._states: list[Optional[grpc.ChannelConnectivity]] = [None] * len(self._channels)
        self._watchers = [functools.partial(self._note, i) for i in range(len(self._channels))]
        for channel, watcher in zip(self._channels, self._watchers):
            channel.subscribe(watcher, try_to_connect=False)

    def current(self) -> tuple[int, Any]:
        """The index and the stub of the server calls go to now."""
        with self._lock:
            index = self._current
        return index, self._stubs[index]

    def move_on(self, failed: int, message: str) -> bool:
        """After server ``failed`` answered UNAVAILABLE with ``message``:
        points the calls at :func:`next_server`'s choice (a rotation only if
        no other thread moved them on from ``failed`` already). Returns
        whether to retry at once (a standby named another listed server)."""
        index, at_once = next_server(self.addresses, failed, message)
        with self._lock:
            if at_once or self._current == failed:
                self._current = index
        return at_once

    def backoff(self, seconds: float) -> None:
        """Waits ``seconds`` before a retry on the current server, or less:
        as soon as its channel, when not connected (the server is down or
        restarting, or not dialled yet), connects. A connected channel whose
        server answered UNAVAILABLE itself waits the whole backoff."""
        index, _ = self.current()
        if self._states[index] == grpc.ChannelConnectivity.READY:
            time.sleep(seconds)
            return
        ready = grpc.channel_ready_future(self._channels[index])
        try:
            ready.result(timeout=seconds)
        except grpc.FutureTimeoutError:
            pass
        finally:
            ready.cancel()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        with self._lock:
            return self._closed

    def close(self) -> None:
        """Closes the channels (shortly after, in the background)."""
        with self._lock:
            self._closed = True
        for channel, watcher in zip(self._channels, self._watchers):
            channel.unsubscribe(watcher)
        # grpcio's connectivity poller (behind subscribe) raises in its own
        # thread if a channel is closed between two of its polls; it sees
        # the unsubscription within 0.2 s and stops, so close after that.
        closer = threading.Timer(_POLLER_STOPS_WITHIN + 0.1, self._close_channels)
        closer.daemon = True
        closer.start()

    def _close_channels(self) -> None:
        for channel in self._channels:
            channel.close()

    def _note(self, index: int, state: grpc.ChannelConnectivity) -> None:
        self._states[index] = state
