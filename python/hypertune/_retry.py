"""The retry policy every call goes through, the same as the C++ SDK's and
the CLI's: a deadline per attempt, and on UNAVAILABLE (plus
DEADLINE_EXCEEDED where repeating the call is harmless) another attempt
after a jittered exponential backoff, up to ``max_attempts``. With several
servers, an UNAVAILABLE moves the calls on first (_servers.py): to the
leader a standby names, tried at once, else to the next server."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence, Tuple

import grpc

from hypertune.errors import HypertuneError, error_for

if TYPE_CHECKING:
    from hypertune._servers import Servers

Metadata = Sequence[Tuple[str, str]]


@dataclass(frozen=True)
class RetryPolicy:
    """How calls are retried; the defaults are the C++ SDK's."""

    #: Attempts per call, at least 1.
    max_attempts: int = 8
    #: Seconds before the first retry; doubles up to ``max_backoff``.
    initial_backoff: float = 0.1
    max_backoff: float = 5.0
    #: Deadline of each attempt, in seconds.
    call_timeout: float = 30.0

    def delay(self, retry: int, jitter: float) -> float:
        """Seconds to wait before retry number ``retry`` (1 = the first):
        min(max, initial * 2^(retry-1)) scaled by ``jitter`` in [0.5, 1]."""
        return min(self.max_backoff, self.initial_backoff * 2 ** (retry - 1)) * jitter

    def jittered(self, retry: int) -> float:
        """:meth:`delay` with a random jitter."""
        return self.delay(retry, random.uniform(0.5, 1.0))


def retryable(code: grpc.StatusCode, idempotent: bool) -> bool:
    """UNAVAILABLE: the server most likely never saw the request.
    DEADLINE_EXCEEDED: it may have, so only for calls safe to repeat."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return idempotent and code == grpc.StatusCode.DEADLINE_EXCEEDED


def call(
    servers: Servers,
    request: Any,
    *,
    rpc: str,
    server: str,
    idempotent: bool,
    policy: RetryPolicy,
    metadata: Metadata,
    backoff: Callable[[float], None] = time.sleep,
) -> Any:
    """Calls method ``rpc`` of the current server's stub with ``request``
    under ``policy`` and returns its response. After an UNAVAILABLE the
    calls move on (:meth:`Servers.move_on`): the next attempt goes at once
    to a leader a standby named, else after ``backoff(seconds)``.

    Raises the :mod:`hypertune.errors` exception of the last failure, whose
    ``attempts`` says how many attempts were made; a retried failure's
    message names the RPC, ``server`` (the servers as the user gave them)
    and the attempts.
    """
    attempts = 0
    while True:
        attempts += 1
        index, stub = servers.current()
        try:
            return getattr(stub, rpc)(request, timeout=policy.call_timeout, metadata=metadata)
        except grpc.RpcError as err:
            code, details = err.code(), err.details() or ""
            again = retryable(code, idempotent)
            if not again or attempts >= max(1, policy.max_attempts):
                if again:
                    plural = "attempt" if attempts == 1 else "attempts"
                    details = f"{rpc} to {server} failed after {attempts} {plural}: {details}"
                raise failure(code, details, attempts) from None
            if code == grpc.StatusCode.UNAVAILABLE and servers.move_on(index, details):
                continue  # to the leader a standby named: at once
        backoff(policy.jittered(attempts))


def failure(code: grpc.StatusCode, message: str, attempts: int = 1) -> HypertuneError:
    """The exception for a call that failed with ``code`` after ``attempts``."""
    error = error_for(code, message)
    error.attempts = attempts
    return error
