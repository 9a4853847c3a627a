"""The exceptions the client raises.

Every failure of a call to hypertuned is a :class:`HypertuneError` carrying the
gRPC status code and the server's message; its subclass names the code, and
the common ones also derive from the built-in exception a Python caller
would expect (``ValueError`` for bad input, ``LookupError`` for a missing
study or trial, ``ConnectionError`` for an unreachable server,
``NotImplementedError`` for what the server cannot do yet). Bad input
found before any call (a config field of the wrong type, a metric that is
not a number) is an :class:`InvalidArgumentError` too, whose message names
the field.
"""

from __future__ import annotations

import grpc


class HypertuneError(Exception):
    """A call failed. ``code`` is the gRPC status code, ``message`` the
    server's (or the client's) explanation."""

    #: The code of errors raised as this class; the base class says UNKNOWN.
    default_code: grpc.StatusCode = grpc.StatusCode.UNKNOWN

    def __init__(self, message: str, code: grpc.StatusCode | None = None):
        super().__init__(message)
        self.code: grpc.StatusCode = code if code is not None else self.default_code
        self.message: str = message
        #: How many attempts the call made (more than 1 when it was retried).
        self.attempts: int = 1

    def __str__(self) -> str:
        return f"{self.code.name}: {self.message}"


class InvalidArgumentError(HypertuneError, ValueError):
    """Bad input: the message names the field (INVALID_ARGUMENT)."""

    default_code = grpc.StatusCode.INVALID_ARGUMENT


class NotFoundError(HypertuneError, LookupError):
    """No such study or trial (NOT_FOUND)."""

    default_code = grpc.StatusCode.NOT_FOUND


class AlreadyExistsError(HypertuneError):
    """A study of that name exists already (ALREADY_EXISTS)."""

    default_code = grpc.StatusCode.ALREADY_EXISTS


class FailedPreconditionError(HypertuneError):
    """The call does not fit the state of the study or trial
    (FAILED_PRECONDITION)."""

    default_code = grpc.StatusCode.FAILED_PRECONDITION


class LeaseLostError(FailedPreconditionError):
    """A call on a trial was refused because this handle no longer holds it:
    its lease epoch is stale (the trial went to another worker after the
    lease ran out) or the trial was finished by someone else. Nothing was
    changed; stop working on the trial."""


class UnavailableError(HypertuneError, ConnectionError):
    """The server could not be reached, even after the retries
    (UNAVAILABLE)."""

    default_code = grpc.StatusCode.UNAVAILABLE


class DeadlineExceededError(HypertuneError, TimeoutError):
    """A call did not finish within its deadline (DEADLINE_EXCEEDED)."""

    default_code = grpc.StatusCode.DEADLINE_EXCEEDED


class UnauthenticatedError(HypertuneError):
    """The server wants a valid bearer token (UNAUTHENTICATED): pass
    ``token=`` or set ``HYPERTUNE_TOKEN``."""

    default_code = grpc.StatusCode.UNAUTHENTICATED


class PermissionDeniedError(HypertuneError):
    """The study belongs to another owner (PERMISSION_DENIED)."""

    default_code = grpc.StatusCode.PERMISSION_DENIED


class UnimplementedError(HypertuneError, NotImplementedError):
    """What was asked needs something the server (or the API this client
    was generated from) does not have yet (UNIMPLEMENTED); the message
    says what."""

    default_code = grpc.StatusCode.UNIMPLEMENTED


_BY_CODE: dict[grpc.StatusCode, type[HypertuneError]] = {
    cls.default_code: cls
    for cls in (
        InvalidArgumentError,
        NotFoundError,
        AlreadyExistsError,
        FailedPreconditionError,
        UnavailableError,
        DeadlineExceededError,
        UnauthenticatedError,
        PermissionDeniedError,
        UnimplementedError,
    )
}


def error_for(code: grpc.StatusCode, message: str) -> HypertuneError:
    """The exception for a failed call with ``code`` and ``message``."""
    return _BY_CODE.get(code, HypertuneError)(message, code)
