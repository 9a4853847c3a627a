"""The lease on one trial as this process holds it.

A :class:`LeaseKeeper` renews the lease from a daemon thread (one Heartbeat
attempt per period, retried sooner after a transient failure) and keeps
what renewals and the trial's own calls learn: whether the server asks the
trial to stop (or paused it at a rung), and whether the lease is lost
(FAILED_PRECONDITION or NOT_FOUND: the trial went to another worker, or was
finished or deleted by someone else), after which renewals stop.

Thread safety: every method may be called from any thread.
"""

from __future__ import annotations

import random
import threading
from typing import TYPE_CHECKING, Optional

import grpc

from hypertune._proto import pb
from hypertune._retry import failure
from hypertune.errors import HypertuneError, LeaseLostError

if TYPE_CHECKING:
    from hypertune.client import Client

#: The lease of studies that set no lease_seconds (the server's default).
DEFAULT_LEASE_SECONDS = 60.0

# Failures a later renewal may not meet.
_TRANSIENT = {
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED,
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
    to ``client_id``."""

    def __init__(self, client: Client, study: str, trial_id: int, epoch: int, client_id: str):
        self._client = client
        self._request = pb.HeartbeatRequest(
            study_name=study, trial_id=trial_id, lease_epoch=epoch, client_id=client_id
        )
        self._lock = threading.Lock()
        self._done = threading.Event()  # stopped, or the lease is lost
        self._thread: Optional[threading.Thread] = None
        self._in_flight: Optional[grpc.Future] = None
        self._lost: Optional[HypertuneError] = None
        self._should_stop = False
        self._state: Optional[int] = None

    def start(self, interval: float) -> None:
        """Renews every ``interval`` seconds from a daemon thread, until
        :meth:`stop` or the lease is lost. Does nothing if started before."""
        with self._lock:
            if self._thread is not None or self._done.is_set():
                return
            self._thread = threading.Thread(
                target=self._loop,
                args=(interval,),
                name=f"hypertune-lease-{self._request.study_name}-{self._request.trial_id}",
                daemon=True,
            )
            self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stops renewing (cancelling a renewal in flight) and, with
        ``wait``, joins the thread. Idempotent."""
        self._done.set()
        with self._lock:
            if self._in_flight is not None:
                self._in_flight.cancel()
            thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join()

    @property
    def running(self) -> bool:
        """Whether the background thread renews the lease now."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._done.is_set()

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

    def observe(self, error: HypertuneError) -> Optional[LeaseLostError]:
        """Takes note of a failed call on the trial. Returns the
        LeaseLostError to raise instead if ``error`` says the lease is lost
        (renewals then stop), else None."""
        if not lost_by(error):
            return None
        request = self._request
        lost = LeaseLostError(
            f'trial {request.trial_id} of study "{request.study_name}" is no longer held '
            f"under lease epoch {request.lease_epoch}: {error.message}",
            error.code,
        )
        with self._lock:
            if self._lost is None:
                self._lost = lost
        self._done.set()
        return lost

    def renew(self, checkpoint_uri: str = "") -> pb.HeartbeatResponse:
        """One renewal now, with the client's retries, recording
        ``checkpoint_uri`` on the trial where not empty."""
        with self._lock:
            if self._lost is not None:
                raise self._lost
        request = pb.HeartbeatRequest()
        request.CopyFrom(self._request)
        request.checkpoint_uri = checkpoint_uri
        try:
            response = self._client._call("Heartbeat", request)
        except HypertuneError as error:
            lost = self.observe(error)
            if lost is not None:
                raise lost from None
            raise
        self._note(response)
        return response

    def _note(self, response: pb.HeartbeatResponse) -> None:
        with self._lock:
            self._should_stop = response.should_stop
            self._state = response.state

    def _loop(self, interval: float) -> None:
        policy = self._client._policy
        failures = 0
        wait = interval
        while not self._done.wait(wait):
            with self._lock:
                if self._done.is_set():
                    break
                self._in_flight = self._client._stub.Heartbeat.future(
                    self._request,
                    timeout=policy.call_timeout,
                    metadata=self._client._metadata,
                )
                future = self._in_flight
            try:
                self._note(future.result())
                failures, wait = 0, interval
                continue
            except grpc.FutureCancelledError:
                break
            except grpc.RpcError as err:
                error = failure(err.code(), err.details() or "")
            finally:
                with self._lock:
                    self._in_flight = None
            if self._done.is_set() or self.observe(error) is not None:
                break
            if error.code not in _TRANSIENT:
                # Renewing cannot work (e.g. UNAUTHENTICATED): the lease runs
                # out, and the trial's own calls report why.
                break
            failures += 1
            wait = min(interval, policy.delay(failures, random.uniform(0.5, 1.0)))
