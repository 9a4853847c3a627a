"""How a Client's calls reach hypertuned: the servers and their channels
(_servers.py: one channel per listed server, and failover to the leader a
standby names), the retry policy (_retry.py), and what every call carries
(the deadline of each attempt, and the bearer token as metadata).

Study, Trial, the lease keeper and the optimize loop call through a
Transport; the Client owns one and is the public face. A Transport only
sends: what a call means, and which errors a caller forgives, is the
caller's business.

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterator, Optional, Sequence

import grpc

from hypertune._retry import Metadata, RetryPolicy, call
from hypertune._servers import Servers, split
from hypertune.errors import FailedPreconditionError


def open_channel(
    address: str,
    credentials: Optional[grpc.ChannelCredentials],
    options: Sequence[tuple[str, Any]],
) -> grpc.Channel:
    """A channel to ``address``: TLS with ``credentials``, else plaintext."""
    if credentials is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, credentials, options=options)


def bearer_metadata(token: Optional[str]) -> Metadata:
    """The metadata of every call: the bearer token, when there is one."""
    return (("authorization", f"Bearer {token}"),) if token else ()


class Transport:
    """The calls of one Client to the servers it was given.

    Args:
        server: ``HOST:PORT`` or a comma-separated list of them, as the user
            gave it (errors name it so).
        open_channel: opens the channel to one address.
        policy: the deadline of each attempt and the retries.
        metadata: sent with every call (:func:`bearer_metadata`).
        backoff: waits that many seconds before a retry; default
            :meth:`Servers.backoff` (less, once a disconnected server is
            back).
    """

    def __init__(
        self,
        server: str,
        open_channel: Callable[[str], grpc.Channel],
        *,
        policy: RetryPolicy,
        metadata: Metadata = (),
        backoff: Optional[Callable[[float], None]] = None,
    ):
        self.server = server
        self.policy = policy
        self.metadata = metadata
        self.servers = Servers(split(server), open_channel)
        self._wait = backoff if backoff is not None else self.servers.backoff
        self._lock = threading.Lock()
        self._closed = False  # guarded by _lock

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: calls fail from then on."""
        with self._lock:
            return self._closed

    def close(self) -> None:
        """Closes the channels; later calls fail. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.servers.close()

    def call(self, rpc: str, request: Any, *, idempotent: bool = True) -> Any:
        """The response of RPC ``rpc`` of the HyperTune service to
        ``request``, under the retry policy (_retry.call).
        ``idempotent``: repeating it after a lost reply is harmless.

        Raises:
            FailedPreconditionError: the transport is closed.
            HypertuneError: the last attempt's failure (its ``attempts``
                says how many there were).
        """
        if self.closed:
            raise FailedPreconditionError(f"{rpc}: the client is closed")
        return call(
            self.servers,
            request,
            rpc=rpc,
            server=self.server,
            idempotent=idempotent,
            policy=self.policy,
            metadata=self.metadata,
            backoff=self.backoff,
        )

    def call_async(self, rpc: str, request: Any) -> tuple[int, grpc.Future]:
        """Starts one attempt of ``rpc`` on the current server, not retried:
        the index of that server (for :meth:`move_on` should it fail) and
        the call's future."""
        index, stub = self.servers.current()
        future = getattr(stub, rpc).future(
            request, timeout=self.policy.call_timeout, metadata=self.metadata
        )
        return index, future

    def open_stream(
        self, rpc: str, request: Any, timeout: Optional[float]
    ) -> tuple[int, Iterator[Any]]:
        """Opens server-streaming ``rpc`` on the current server, not
        retried: the index of that server and the stream (a gRPC call
        object: iterate it, cancel it). ``timeout``: seconds the whole
        stream may last, None for no limit."""
        index, stub = self.servers.current()
        return index, getattr(stub, rpc)(request, timeout=timeout, metadata=self.metadata)

    def move_on(self, failed: int, message: str) -> bool:
        """After server ``failed`` answered UNAVAILABLE with ``message``:
        points the calls at the next server (:meth:`Servers.move_on`).
        Returns whether to retry at once (a standby named the leader)."""
        return self.servers.move_on(failed, message)

    def backoff(self, seconds: float) -> None:
        """Waits before a retry: ``seconds``, or less (see ``backoff``)."""
        self._wait(seconds)
