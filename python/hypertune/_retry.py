"""The retry policy every call goes through, the same as the C++ SDK's
(trainer_sdk/client_core.h) and the CLI's: a deadline per attempt, and on
UNAVAILABLE (plus DEADLINE_EXCEEDED and CANCELLED, which a stopping
hypertuned sends, where repeating the call is harmless) another attempt
after a jittered exponential backoff, up to ``max_attempts``. With several
servers, an UNAVAILABLE moves the calls on first (_servers.py): to the
leader a standby names, tried at once, else to the next server.

Why a loop of our own and not gRPC's retry policy (a service config's
``retryPolicy``; grpc/proposal A6): that policy retries on one channel,
before any response headers, at most 5 attempts under one deadline for
them all, and does not tell the caller how many attempts it made. This
loop also
- moves to another server: the leader a standby names, or the next one
  listed, which a per-channel policy cannot (retrying a standby's
  UNAVAILABLE on its own channel would only delay the move);
- rides out a restart or a preemption of the server (``max_attempts`` is
  the user's, not capped at 5; each wait ends early once the channel is
  READY again, :meth:`Servers.backoff`);
- gives each attempt its own deadline, so that DEADLINE_EXCEEDED can be
  retried for calls safe to repeat;
- counts attempts (``HypertuneError.attempts``): an ALREADY_EXISTS or
  NOT_FOUND after a retry means an earlier attempt did it (client.py's
  create_study and delete_study), and the final error names them.
What gRPC does do underneath, unconfigured: reconnecting (client.py's
CHANNEL_OPTIONS set its backoff) and the transparent retry of a call that
never left the client. Its retry policy stays off: client.py disables
service configs from DNS, which could add it beneath this loop and
multiply the attempts unseen."""

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
    DEADLINE_EXCEEDED, and CANCELLED (a call is never cancelled by this
    client but when it closes, so by a stopping server): it may have, so
    only for calls safe to repeat."""
    if code == grpc.StatusCode.UNAVAILABLE:
        return True
    return idempotent and code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED)


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
            # Closing the client cancels its calls: that is no retry's.
            again = retryable(code, idempotent) and not servers.closed
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
