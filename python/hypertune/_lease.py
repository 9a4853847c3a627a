"""The leases on the trials this process holds.

A :class:`LeaseKeeper` keeps what renewals and the trial's own calls learn
about one lease (and each renewal reports the device-seconds the attempt
has used so far, so that a worker that vanishes loses at most one
interval of them): whether the server asks the trial to stop (or paused it at
a rung), and whether the lease is lost (FAILED_PRECONDITION or NOT_FOUND:
the trial went to another worker, or was finished or deleted by someone
else), after which it is no longer renewed.

A :class:`LeaseRenewer`, one per Client, renews every started keeper's
lease from one background thread: each lease at its own period, with
Heartbeats sent asynchronously so that a slow one holds up no other, and
retried sooner after a transient failure; after an UNAVAILABLE, on the
server the Client's calls move on to (_servers.py). (One thread per Client,
not per trial: handing out a trial then costs no thread start.) Keepers and
renewer call through the Client's Transport (_transport.py).

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import heapq
import itertools
import random
import threading
import time
from typing import Optional

import grpc

from hypertune._proto import pb
from hypertune._retry import failure
from hypertune._transport import Transport
from hypertune.errors import HypertuneError, LeaseLostError

#: The lease of studies that set no lease_seconds (the server's default).
DEFAULT_LEASE_SECONDS = 60.0

# Failures a later renewal may not meet. CANCELLED: this client cancels only
# when it closes, which stops renewals anyway, so it came from a stopping server.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.INTERNAL,
    grpc.StatusCode.UNKNOWN,
}


def renewal_interval(lease_seconds: float) -> float:
    """A third of the lease (0 = the server's default), so that two renewals
    may fail before it runs out."""
    lease = lease_seconds if lease_seconds > 0 else DEFAULT_LEASE_SECONDS
    return max(lease / 3.0, 0.001)


def lost_by(error: HypertuneError) -> bool:
    """Whether ``error``, from a call on a trial, says the trial is no
    longer this holder's."""
    return error.code in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)


class LeaseKeeper:
    """The lease on trial ``trial_id`` of ``study`` granted under ``epoch``
    to ``client_id``, renewed through ``transport`` (in the background, by
    ``renewer``)."""

    def __init__(
        self,
        transport: Transport,
        renewer: LeaseRenewer,
        study: str,
        trial_id: int,
        epoch: int,
        client_id: str,
        *,
        devices: int = 1,
    ):
        self._transport = transport
        # This attempt's device time counts from the grant (wall seconds x
        # devices); each renewal reports the running total.
        self._granted_at = time.monotonic()
        self._devices = devices
        self._renewer = renewer
        self.request = pb.HeartbeatRequest(
            study_name=study, trial_id=trial_id, lease_epoch=epoch, client_id=client_id
        )
        self._lock = threading.Lock()
        self._started = False
        self._done = False  # stopped, or the lease is lost
        self._in_flight: Optional[grpc.Future] = None
        self._lost: Optional[HypertuneError] = None
        self._settled = False  # the server accepted the trial's end
        self._should_stop = False
        self._state: Optional[int] = None
        self.failures = 0  # renewals failed in a row (the renewer's business)
        self.sent_to = 0  # the server of the last background renewal

    def start(self, interval: float) -> None:
        """Renews every ``interval`` seconds in the background, until
        :meth:`stop` or the lease is lost. Does nothing if started before."""
        with self._lock:
            if self._started or self._done:
                return
            self._started = True
        self._renewer.add(self, interval)

    def stop(self) -> None:
        """Stops renewing, cancelling a renewal in flight. Idempotent."""
        with self._lock:
            self._done = True
            future, self._in_flight = self._in_flight, None
        if future is not None:
            future.cancel()

    def settle(self) -> None:
        """Stops renewing once the server has accepted the trial's end: a
        renewal it refused meanwhile (the trial no longer running) was that
        end's doing, not a lost lease, and is forgotten."""
        self.stop()
        with self._lock:
            self._settled = True
            self._lost = None

    @property
    def done(self) -> bool:
        with self._lock:
            return self._done

    @property
    def running(self) -> bool:
        """Whether the lease is renewed in the background now."""
        with self._lock:
            return self._started and not self._done

    @property
    def lost(self) -> Optional[HypertuneError]:
        """None while the lease may still be ours, else the error that
        showed it lost."""
        with self._lock:
            return self._lost

    @property
    def should_stop(self) -> bool:
        """Whether the last renewal asked the trial to stop (or paused it)."""
        with self._lock:
            return self._should_stop

    @property
    def state(self) -> Optional[int]:
        """The trial's state as the last renewal saw it, if any."""
        with self._lock:
            return self._state

    def device_seconds(self) -> float:
        """The device-seconds this attempt has used so far."""
        return (time.monotonic() - self._granted_at) * self._devices

    def observe(self, error: HypertuneError) -> Optional[LeaseLostError]:
        """Takes note of a failed call on the trial. Returns the
        LeaseLostError to raise instead if ``error`` says the lease is lost
        (renewals then stop), else None."""
        if not lost_by(error):
            return None
        request = self.request
        lost = LeaseLostError(
            f'trial {request.trial_id} of study "{request.study_name}" is no longer held '
            f"under lease epoch {request.lease_epoch}: {error.message}",
            error.code,
        )
        with self._lock:
            if self._settled:
                return None
            if self._lost is None:
                self._lost = lost
            self._done = True
        return lost

    def renew(self, checkpoint_uri: str = "", checkpoint_step: int = 0) -> pb.HeartbeatResponse:
        """One renewal now, with the transport's retries, recording
        ``checkpoint_uri`` on the trial where not empty, as holding
        ``checkpoint_step`` (0: the latest measured step)."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
        request = pb.HeartbeatRequest()
        request.CopyFrom(self.request)
        request.device_seconds = self.device_seconds()
        request.checkpoint_uri = checkpoint_uri
        if checkpoint_uri:
            request.checkpoint_step = checkpoint_step
        try:
            response = self._transport.call("Heartbeat", request)
        except HypertuneError as error:
            lost = self.observe(error)
            if lost is not None:
                raise lost from None
            raise
        self.note(response)
        return response

    def note(self, response: pb.HeartbeatResponse) -> None:
        """Takes note of a renewal's answer."""
        with self._lock:
            self._should_stop = response.should_stop
            self._state = response.state

    def send(self) -> Optional[grpc.Future]:
        """Starts one background renewal attempt; None once done."""
        with self._lock:
            if self._done:
                return None
            self.request.device_seconds = self.device_seconds()
            self.sent_to, self._in_flight = self._transport.call_async("Heartbeat", self.request)
            return self._in_flight


class LeaseRenewer:
    """Renews the leases of one Client's started keepers from one daemon
    thread, started with the first lease; ``transport`` is the Client's."""

    def __init__(self, transport: Transport):
        self._transport = transport
        self._cond = threading.Condition()
        self._due: list[tuple[float, int, LeaseKeeper, float]] = []  # a heap by time
        self._order = itertools.count()  # breaks ties between equal times
        self._thread: Optional[threading.Thread] = None
        self._closed = False

    def add(self, keeper: LeaseKeeper, interval: float) -> None:
        """Renews ``keeper``'s lease every ``interval`` seconds from now."""
        self._schedule(keeper, interval, interval)

    def close(self) -> None:
        """Ends the thread; leases are no longer renewed. Idempotent."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def _schedule(self, keeper: LeaseKeeper, delay: float, interval: float) -> None:
        with self._cond:
            if self._closed:
                return
            entry = (time.monotonic() + delay, next(self._order), keeper, interval)
            heapq.heappush(self._due, entry)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="hypertune-leases", daemon=True
                )
                self._thread.start()
            if self._due[0] is entry:  # otherwise the thread wakes up earlier anyway
                self._cond.notify()

    def _loop(self) -> None:
        with self._cond:
            while not self._closed:
                if not self._due:
                    self._cond.wait()
                    continue
                when, _, keeper, interval = self._due[0]
                wait = when - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._due)
                future = keeper.send()
                if future is not None:
                    future.add_done_callback(
                        lambda f, k=keeper, i=interval: self._renewed(k, i, f)
                    )

    def _renewed(self, keeper: LeaseKeeper, interval: float, future: grpc.Future) -> None:
        """Runs on a gRPC thread when a background renewal ends."""
        if future.cancelled() or keeper.done:
            return
        error = future.exception()
        if error is None:
            keeper.note(future.result())
            keeper.failures = 0
            self._schedule(keeper, interval, interval)
            return
        failed = failure(error.code(), error.details() or "")
        if keeper.observe(failed) is not None or failed.code not in _TRANSIENT:
            # Lost; or renewing cannot work (e.g. UNAUTHENTICATED): the lease
            # runs out, and the trial's own calls report why.
            return
        keeper.failures += 1
        policy = self._transport.policy
        delay = min(interval, policy.delay(keeper.failures, random.uniform(0.5, 1.0)))
        if failed.code == grpc.StatusCode.UNAVAILABLE:
            if self._transport.move_on(keeper.sent_to, failed.message):
                delay = 0.0  # to the leader a standby named: at once
        self._schedule(keeper, delay, interval)
