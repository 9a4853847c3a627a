"""The background renewer against a transport that fails on cue: which
failures a later renewal may outlive, and which end the renewals."""

from __future__ import annotations

import threading

import grpc
import pytest

from hypertune._lease import LeaseKeeper, LeaseRenewer
from hypertune._proto import pb
from hypertune._retry import RetryPolicy


class _Answer:
    """A finished call: a HeartbeatResponse, or a gRPC error."""

    def __init__(self, code: grpc.StatusCode | None):
        self._code = code

    def cancelled(self) -> bool:
        return False

    def cancel(self) -> bool:
        return False

    def exception(self, timeout=None):
        return None if self._code is None else self

    def result(self, timeout=None):
        return pb.HeartbeatResponse()

    def add_done_callback(self, fn):
        fn(self)

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return "on cue"


class _ScriptedTransport:
    """Answers Heartbeats with ``codes`` in turn (None: success), then
    successes; counts the calls."""

    policy = RetryPolicy(initial_backoff=0.001, max_backoff=0.001)

    def __init__(self, codes):
        self._codes = list(codes)
        self.calls = 0
        self.called = threading.Event()

    def call_async(self, method: str, _request):
        assert method == "Heartbeat"
        self.calls += 1
        if self.calls > len(self._codes):
            self.called.set()
        return 0, _Answer(self._codes.pop(0) if self._codes else None)

    def move_on(self, _index, _message) -> bool:
        return False


@pytest.mark.parametrize("code", [
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    # A stopping server cancels the calls in flight; this client cancels
    # only when it closes.
    grpc.StatusCode.CANCELLED,
])
def test_renewals_go_on_after_a_transient_failure(code) -> None:
    transport = _ScriptedTransport([code, code])
    renewer = LeaseRenewer(transport)
    keeper = LeaseKeeper(transport, renewer, "s", 1, 1, "c")
    keeper.start(0.001)
    try:
        assert transport.called.wait(10), f"no renewal after {transport.calls} calls"
        assert keeper.lost is None
    finally:
        keeper.stop()
        renewer.close()


def test_renewals_end_when_they_cannot_work() -> None:
    transport = _ScriptedTransport([grpc.StatusCode.UNAUTHENTICATED])
    renewer = LeaseRenewer(transport)
    keeper = LeaseKeeper(transport, renewer, "s", 1, 1, "c")
    keeper.start(0.001)
    try:
        assert not transport.called.wait(0.5)
        assert transport.calls == 1
    finally:
        keeper.stop()
        renewer.close()
