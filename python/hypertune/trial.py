"""Trials: their parameters as Python values, and the calls that report on
them.

A :class:`Trial` comes either *held*, from :meth:`Study.ask`,
:meth:`Study.suggest` or :func:`hypertune.current_trial`, and then reports,
completes and renews its lease; or as a *record*, from :meth:`Study.trials`,
:meth:`Study.best` or :meth:`Study.watch`, which only reads. Every call
that changes a held trial carries the lease epoch it was granted under, so
a worker whose lease ran out (and whose trial went to another worker) is
refused with :class:`~hypertune.LeaseLostError` instead of overwriting the
newer owner's work.

Thread safety: one Trial object is used by one thread at a time; distinct
Trials may be used from distinct threads. The lease's renewal thread shares
nothing with the caller but the lease's own state.
"""

from __future__ import annotations

import json
import math
import operator
import os
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Optional, Protocol, Union

from hypertune import _signals, _space
from hypertune._lease import LeaseKeeper, LeaseRenewer
from hypertune._proto import objective_metrics, pb
from hypertune._transport import Transport
from hypertune.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    HypertuneError,
    InvalidArgumentError,
    LeaseLostError,
    UnavailableError,
)

if TYPE_CHECKING:
    from hypertune._client_ids import SharedSlot

#: A parameter's value: float (DOUBLE, DISCRETE), int (INTEGER, and DISCRETE
#: whose values are all whole numbers, such as batch sizes) or str
#: (CATEGORICAL).
ParamValue = Union[float, int, str]

# Reasons are stored and shown; a whole traceback's worth is too much.
_MAX_REASON = 1000

# How long a rank other than 0 waits for rank 0's report of the same step.
_FOLLOW_SECONDS = 60.0


class Holder(Protocol):
    """What a Trial is reached through: a :class:`~hypertune.Client`, by
    its public face (client.py imports this module, not the reverse)."""

    #: Devices a trial of this process uses (device-seconds are billed).
    devices: int

    @property
    def transport(self) -> Transport: ...

    @property
    def lease_renewer(self) -> LeaseRenewer: ...


@dataclass(frozen=True)
class Measurement:
    """Metrics at one step (e.g. the epoch), with the seconds since the
    trial started."""

    step: int
    elapsed_seconds: float
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """An earlier attempt of a trial, up to the loss of its worker: the
    measurements the next attempt did not continue from (all of them
    without a checkpoint, those past the checkpoint's step with one), kept
    to be shown, never the trial's result."""

    number: int
    client_id: str
    measurements: list[Measurement]
    end_reason: str
    end_time: Optional[datetime]
    device_seconds: float


@dataclass(frozen=True)
class Exploit:
    """One exploit of a member of a PBT study (docs/pbt.md): at its report
    of ``step`` the trial, in its population's bottom quantile, took trial
    ``donor_trial_id``'s checkpoint ``checkpoint_uri`` (which holds
    ``checkpoint_step``) and ``params``, explored from the donor's, in
    place of ``params_before``. The program loads that checkpoint and goes
    on from ``checkpoint_step + 1`` with the new parameters. ``value`` and
    ``donor_value`` are the ranking metric's latest values then."""

    number: int
    step: int
    donor_trial_id: int
    checkpoint_uri: str
    checkpoint_step: int
    params: dict[str, ParamValue]
    params_before: dict[str, ParamValue]
    value: float
    donor_value: float
    time: Optional[datetime]


class Infeasible(Exception):
    """Raised by a trial's code to say its parameters cannot work (a model
    too large for the device, a configuration the code cannot build): the
    ``with`` block, or :meth:`Study.optimize`, marks the trial INFEASIBLE
    with the message, and the optimizer steers away from the region. Any
    other exception marks it FAILED, which the optimizer leaves out."""


class TrialPruned(Exception):
    """Raised by an Optuna-style objective once :meth:`Trial.should_prune`
    says so, as Optuna's ``TrialPruned`` (which is taken the same way, by
    its name, without importing Optuna): the trial the study's early
    stopping stopped (or paused at a rung) is completed with its last
    reported metrics, STOPPED (or left PAUSED), and optimize() goes on.
    Raised while the study's early stopping did not ask, it marks the trial
    FAILED, since it has no result; optimize() goes on then too."""


def is_pruned(error: BaseException) -> bool:
    """Whether ``error`` is :class:`TrialPruned` or Optuna's (matched by
    name: optuna.TrialPruned, optuna.exceptions.TrialPruned)."""
    return any(kind.__name__ == "TrialPruned" for kind in type(error).__mro__)


# Exceptions that say the parameters cannot work, besides Infeasible:
# running out of memory (torch.cuda.OutOfMemoryError and its kin are
# matched by name, without importing torch) and floating-point trouble
# (NumPy's divergence under np.seterr(all="raise")).
_INFEASIBLE_TYPES: tuple[type[BaseException], ...] = (Infeasible, MemoryError, FloatingPointError)
_INFEASIBLE_NAMES = ("OutOfMemoryError",)

# Exceptions that say this process lost its way to the trial, not that
# the parameters failed: its standard output is gone (the `hypertune
# worker` reading it was killed), or the server is out of reach.
_WORKER_LOST_TYPES: tuple[type[BaseException], ...] = (
    BrokenPipeError,
    UnavailableError,
    DeadlineExceededError,
)


def declares_infeasible(
    error: BaseException, declared: tuple[type[BaseException], ...] = ()
) -> bool:
    """Whether ``error`` says the trial's parameters cannot work: an
    :class:`Infeasible`, out of memory (MemoryError, a class named
    OutOfMemoryError such as torch.cuda.OutOfMemoryError, a RuntimeError
    saying "out of memory"), a FloatingPointError, or one of
    ``declared``."""
    if isinstance(error, _INFEASIBLE_TYPES + tuple(declared)):
        return True
    if any(kind.__name__ in _INFEASIBLE_NAMES for kind in type(error).__mro__):
        return True
    # PyTorch before 1.13 (and other frameworks) say it in a RuntimeError.
    return isinstance(error, RuntimeError) and "out of memory" in str(error).lower()


def loses_the_worker(error: BaseException) -> bool:
    """Whether ``error`` says this process can no longer run the trial
    (a broken stdout, the server out of reach, the lease lost), not that
    the parameters failed."""
    return isinstance(error, _WORKER_LOST_TYPES + (LeaseLostError,))


def describe_error(error: BaseException) -> str:
    """``error`` as a trial's reason: its type and message."""
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def rank_from_env() -> int:
    """This process's rank in a distributed training (torchrun sets RANK,
    some launchers only LOCAL_RANK); 0 when neither is set."""
    for name in ("RANK", "LOCAL_RANK"):
        text = os.environ.get(name, "")
        if text.strip():
            try:
                return int(text)
            except ValueError:
                raise InvalidArgumentError(f"{name}: {text!r} is not an integer") from None
    return 0


def _state_name(state: int) -> str:
    return pb.Trial.State.Name(state)


def _param_value(value: pb.ParameterValue, spec: Optional[pb.ParameterSpec]) -> ParamValue:
    kind = value.WhichOneof("value")
    if kind == "int_value":
        return value.int_value
    if kind == "string_value":
        return value.string_value
    number = value.double_value
    if (
        spec is not None
        and spec.WhichOneof("kind") == "discrete_spec"
        and all(float(v).is_integer() for v in spec.discrete_spec.values)
    ):
        return int(number)
    return number


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 40:
        text = text[:37] + "..."
    return f"{type(value).__name__} {text}"


def check_metrics(values: Mapping[str, Any], where: str) -> dict[str, float]:
    """``values`` as metric name -> float; InvalidArgumentError naming the
    metric that is not a real number (bools and strings included)."""
    metrics: dict[str, float] = {}
    for name, value in values.items():
        if not isinstance(name, str):
            raise InvalidArgumentError(f"{where}: metric names are strings, got {_describe(name)}")
        if isinstance(value, (bool, str, bytes)):
            raise InvalidArgumentError(
                f'{where}: metric "{name}": expected a number, got {_describe(value)}'
            )
        try:
            metrics[name] = float(value)  # int, float, NumPy and 0-d torch scalars
        except (TypeError, ValueError, RuntimeError):
            raise InvalidArgumentError(
                f'{where}: metric "{name}": expected a number, got {_describe(value)}'
            ) from None
    return metrics


# ----- Attributes of any JSON value -----
#
# The server keeps attributes as text (map<string, string>), and the CLI,
# the dashboard and the CSV show that text. So a str is stored as itself
# (what earlier clients, the CLI and the Optuna import store), any other
# JSON value as its compact JSON text ([1,2], 3, true, null, {"a":1}), as
# the Optuna import stores them. Text alone cannot say which of the two it
# is ("123" may be a str or the number), so the reserved attribute
# JSON_KEYS_ATTRIBUTE lists, comma-separated and sorted, the keys whose
# text is JSON. A marker per entry (a prefix on the value or the key) was
# the alternative; it would change how plain strings are stored and
# leave two keys for one attribute once a value changes kind, where the
# one list is rewritten with every change (CompleteTrial replaces the keys
# it is given). Keys are names (no commas), so the list is unambiguous.

#: The reserved attribute that lists the keys whose values are JSON text
#: (see above); refused as a key of one's own, left out of what is read.
JSON_KEYS_ATTRIBUTE = "_json_keys"


def _json_keys(stored: Mapping[str, str]) -> set[str]:
    listed = stored.get(JSON_KEYS_ATTRIBUTE, "")
    return {key for key in listed.split(",") if key}


def encode_attribute(key: Any, value: Any, where: str) -> tuple[str, bool]:
    """``value`` as stored text, and whether that text is JSON: a str as
    itself, any other value as compact JSON. InvalidArgumentError naming
    ``key`` for a bad key or a value JSON cannot hold (NaN, a set, an
    object)."""
    if not isinstance(key, str) or not key:
        raise InvalidArgumentError(f"{where}: an attribute key must be a non-empty string, "
                                   f"got {_describe(key)}")
    if key == JSON_KEYS_ATTRIBUTE:
        raise InvalidArgumentError(
            f'{where}: attribute "{key}" is reserved: it lists the keys whose values are JSON'
        )
    if isinstance(value, str):
        return value, False
    try:
        text = json.dumps(value, allow_nan=False, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as error:
        raise InvalidArgumentError(
            f'{where}: attribute "{key}": expected a str or a JSON value (dict, list, number, '
            f"bool, None), got {_describe(value)} ({error})"
        ) from None
    return text, True


def encode_attributes(
    values: Mapping[str, Any], where: str, stored: Optional[Mapping[str, str]] = None
) -> dict[str, str]:
    """The entries to write for ``values`` onto attributes already
    ``stored``: each value's text (:func:`encode_attribute`) and, when the
    set of JSON keys changes, JSON_KEYS_ATTRIBUTE listing them all."""
    if not isinstance(values, Mapping):
        raise InvalidArgumentError(f"{where}: attributes: expected a dict, got {_describe(values)}")
    before = _json_keys(stored or {})
    keys = set(before)
    entries: dict[str, str] = {}
    for key, value in values.items():
        entries[key], is_json = encode_attribute(key, value, where)
        if is_json:
            keys.add(key)
        else:
            keys.discard(key)
    if keys != before:
        entries[JSON_KEYS_ATTRIBUTE] = ",".join(sorted(keys))
    return entries


def decode_attributes(stored: Mapping[str, str]) -> dict[str, Any]:
    """Stored attributes as Python values: those JSON_KEYS_ATTRIBUTE lists
    parsed as JSON (a text that another writer made invalid stays text), the
    others the strings they are; the reserved key left out."""
    listed = _json_keys(stored)
    values: dict[str, Any] = {}
    for key, text in stored.items():
        if key == JSON_KEYS_ATTRIBUTE:
            continue
        values[key] = text
        if key in listed:
            try:
                values[key] = json.loads(text)
            except ValueError:
                pass
    return values


def stored_text(stored: Mapping[str, str]) -> dict[str, str]:
    """Stored attributes as their text, without the reserved key."""
    return {key: text for key, text in stored.items() if key != JSON_KEYS_ATTRIBUTE}


def _is_integer(value: Any) -> bool:
    """An int or an integer type's value (NumPy's), not a bool."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _is_number(value: Any) -> bool:
    """A real number of any type (int, float, NumPy's, a 0-d tensor), not
    a bool or a string."""
    if isinstance(value, (bool, str, bytes)):
        return False
    try:
        float(value)
    except (TypeError, ValueError, RuntimeError):
        return False
    return True


def _check_step(step: Any, where: str) -> int:
    if not isinstance(step, bool):
        try:
            return operator.index(step)  # int, and NumPy integers
        except TypeError:
            pass
    raise InvalidArgumentError(f"{where}: step: expected an integer, got {_describe(step)}")


class Trial:
    """One trial of a study: its parameters, state and measurements, and
    (when held) the calls that report on it.

    Used as a context manager (``with study.ask() as trial:``) a held trial
    completes nothing by itself, but an exception leaving the block settles
    it by what the exception says:

    - the parameters cannot work (:class:`Infeasible`, out of memory, a
      FloatingPointError): INFEASIBLE, a region the optimizer avoids;
    - this process lost its way to the trial (a BrokenPipeError on a
      closed stdout, the server out of reach): given back, to be run again
      by another worker (a lost lease is left as it is);
    - ``KeyboardInterrupt`` or SIGTERM: given back as preempted, with its
      checkpoint;
    - any other exception: FAILED with the exception's type and message,
      left out of the model (Optuna's FAIL).

    A trial left unfinished by the block is no longer renewed: once its
    lease runs out the server hands it to another worker.

    A trial handed over after its worker was lost is a new *attempt*
    (:attr:`attempt`): it resumes from :attr:`checkpoint_uri` at
    :attr:`checkpoint_step` + 1, or, without a checkpoint, starts afresh
    at step 1 (the earlier attempt's curve is in :attr:`earlier_attempts`).
    """

    def __init__(
        self,
        client: Optional[Holder],
        proto: pb.Trial,
        spec: Optional[pb.StudySpec] = None,
        *,
        held: bool = False,
        renew_every: Optional[float] = None,
        slot: Optional[SharedSlot] = None,
        worker_holds: bool = False,
        rank: int = 0,
    ):
        """Not called directly: trials come from a Study or current_trial().

        ``held``: this process holds the trial under ``proto.lease_epoch``;
        ``renew_every``: renew its lease from a background thread at that
        period; ``slot``: the client id it was asked under, freed when it is
        finished; ``worker_holds``: the `hypertune worker` that started this
        program holds the lease and settles the trial if the program does
        not, so the context manager leaves interruptions and an unfinished
        trial to it; ``rank``: this process's rank in a distributed
        training of the trial (only rank 0 reports and finishes it, the
        others follow its state).
        """
        self._client = client
        self._proto = proto
        self._spec = spec
        self._held = held and client is not None
        self._slot = slot
        self._worker_holds = worker_holds
        self._rank = rank
        #: Exception classes the ``with`` block marks INFEASIBLE beside
        #: the usual ones (:class:`Infeasible`, out of memory,
        #: FloatingPointError); optimize(infeasible=...) sets them.
        self.infeasible_exceptions: tuple[type[BaseException], ...] = ()
        self._finished = False
        # Set by set_attribute, stored at completion: key -> (Python value).
        self._pending_attributes: dict[str, Any] = {}
        self._signals_entered = False
        self._attached_at = time.monotonic()
        self._elapsed_at_attach = 0.0
        if proto.start_time_ms > 0:
            # Clocks of client and server may disagree a little.
            self._elapsed_at_attach = max(0.0, time.time() - proto.start_time_ms / 1000.0)
        self._last_step = max((m.step for m in proto.measurements), default=0)
        self._lease: Optional[LeaseKeeper] = None
        if self._held:
            assert client is not None
            self._lease = LeaseKeeper(
                client.transport,
                client.lease_renewer,
                proto.study_name,
                proto.id,
                proto.lease_epoch,
                proto.client_id,
                # Under `hypertune worker` the worker counts the grant's
                # device time, with the devices it gave the program.
                devices=0 if worker_holds else client.devices,
            )
            if renew_every is not None and rank == 0:
                self._lease.start(renew_every)
                # A trial dropped unfinished is renewed no longer: its lease
                # runs out and another worker gets it.
                weakref.finalize(self, self._lease.stop)

    # ----- What the trial is -----

    @property
    def id(self) -> int:
        """Dense per study, from 1."""
        return self._proto.id

    @property
    def number(self) -> int:
        """:attr:`id` - 1: the trial's number as Optuna counts, from 0
        (``study.trials()[trial.number]`` is this trial)."""
        return self._proto.id - 1

    @property
    def study_name(self) -> str:
        return self._proto.study_name

    @property
    def state(self) -> str:
        """REQUESTED, ACTIVE, STOPPING, PAUSED, COMPLETED, STOPPED,
        INFEASIBLE or FAILED, as last returned by the server."""
        return _state_name(self._proto.state)

    @property
    def params(self) -> dict[str, ParamValue]:
        """Parameter name -> value: float for DOUBLE and DISCRETE, int for
        INTEGER (and for DISCRETE values that are all whole numbers), str for
        CATEGORICAL."""
        specs = {p.name: p for p in self._spec.parameters} if self._spec else {}
        return {v.name: _param_value(v, specs.get(v.name)) for v in self._proto.parameters}

    @property
    def measurements(self) -> list[Measurement]:
        """The intermediate measurements, by step."""
        return [
            Measurement(m.step, m.elapsed_seconds, dict(m.metrics))
            for m in self._proto.measurements
        ]

    @property
    def attempt(self) -> int:
        """The attempt running (or last run): 1 from the first grant, one
        more each time the trial was handed over after a loss (its lease
        ran out, it was given back or preempted). 0 from servers that do
        not count attempts."""
        return self._proto.attempt

    @property
    def earlier_attempts(self) -> list[Attempt]:
        """The curves of earlier attempts that the current one does not
        continue (see :class:`Attempt`), oldest first."""
        return [
            Attempt(
                number=a.number,
                client_id=a.client_id,
                measurements=[
                    Measurement(m.step, m.elapsed_seconds, dict(m.metrics))
                    for m in a.measurements
                ],
                end_reason=a.end_reason,
                end_time=(
                    datetime.fromtimestamp(a.end_time_ms / 1000.0, timezone.utc)
                    if a.end_time_ms
                    else None
                ),
                device_seconds=a.device_seconds,
            )
            for a in self._proto.earlier_attempts
        ]

    @property
    def exploits(self) -> list[Exploit]:
        """A PBT member's exploits, oldest first: its lineage (whose
        checkpoint it took, and at which step) and its parameter schedule
        (each exploit's ``params`` hold from its ``step`` on; the first
        one's ``params_before`` are the initial ones). Empty otherwise."""
        specs = {p.name: p for p in self._spec.parameters} if self._spec else {}

        def values(params: Any) -> dict[str, ParamValue]:
            return {v.name: _param_value(v, specs.get(v.name)) for v in params}

        return [
            Exploit(
                number=e.number,
                step=e.step,
                donor_trial_id=e.donor_trial_id,
                checkpoint_uri=e.checkpoint_uri,
                checkpoint_step=e.checkpoint_step,
                params=values(e.parameters),
                params_before=values(e.parameters_before),
                value=e.value,
                donor_value=e.donor_value,
                time=(
                    datetime.fromtimestamp(e.time_ms / 1000.0, timezone.utc) if e.time_ms else None
                ),
            )
            for e in self._proto.exploits
        ]

    @property
    def checkpoint_step(self) -> int:
        """The step :attr:`checkpoint_uri` holds (0 without a checkpoint):
        a handed-over trial resumes training at ``checkpoint_step + 1``,
        and its :attr:`measurements` are those up to that step."""
        return self._proto.checkpoint_step

    @property
    def device_seconds(self) -> float:
        """The device-seconds (wall seconds x devices) recorded for the
        trial, every attempt and segment together, as last read."""
        return self._proto.device_seconds

    @property
    def rank(self) -> int:
        """This process's rank in a distributed training of the trial
        (RANK, else LOCAL_RANK; 0 outside one): only rank 0 reports and
        finishes the trial; the other ranks' reports only follow its state
        so that :attr:`should_stop` agrees on every rank."""
        return self._rank

    @property
    def metrics(self) -> dict[str, float]:
        """The final metrics (empty until the trial is COMPLETED or
        STOPPED)."""
        return dict(self._proto.final_measurement.metrics)

    def _attributes_text(self) -> dict[str, str]:
        """The stored attributes with those set by set_attribute, as text."""
        stored = self._proto.attributes
        return {**stored, **encode_attributes(self._pending_attributes, "", stored)}

    @property
    def attributes(self) -> dict[str, str]:
        """Free-form notes on the trial as stored text (what the CLI and
        the dashboard show): those stored, and those set by
        :meth:`set_attribute` that its completion will store. A value that
        was not a str is its JSON text here; :attr:`user_attrs` gives it
        back as the Python value."""
        return stored_text(self._attributes_text())

    @property
    def user_attrs(self) -> dict[str, Any]:
        """The notes of :attr:`attributes` as the Python values they were
        set as (like Optuna's ``user_attrs``): a str as itself, any other
        value parsed back from its JSON (so a tuple comes back a list)."""
        return decode_attributes(self._attributes_text())

    def set_attribute(self, key: str, value: Any) -> None:
        """Notes ``key`` = ``value`` on the trial (a model's path, a git
        commit, a list of per-class scores; like Optuna's
        ``set_user_attr``), stored when the trial is completed or marked
        infeasible. ``value`` is a str, stored as is, or any JSON value
        (dict, list, number, bool, None), stored as JSON text and read back
        by :attr:`user_attrs` as that value. At most 63 keys (one is kept
        for the list of JSON keys), values up to 4 KiB of text.

        Raises:
            InvalidArgumentError: the key is empty or reserved, or JSON
                cannot hold the value (NaN, a set, an arbitrary object).
        """
        self._usable("set an attribute")
        text, is_json = encode_attribute(key, value, f"trial {self.id} set_attribute")
        # A copy as of now: a list changed after this call is not what was set.
        self._pending_attributes[key] = json.loads(text) if is_json else value

    def set_user_attr(self, key: str, value: Any) -> None:
        """:meth:`set_attribute` under Optuna's name."""
        self.set_attribute(key, value)

    @property
    def objective(self) -> str:
        """The name of the study's primary objective (its first OBJECTIVE,
        or its first metric where no metric sets a role); empty if the study
        is not known."""
        found = objective_metrics(self._spec)
        return found[0].name if found else ""

    @property
    def feasible(self) -> Optional[bool]:
        """Whether the result meets the study's constraints; None without
        constraints or before a result."""
        return self._proto.feasible if self._proto.HasField("feasible") else None

    @property
    def value(self) -> Optional[float]:
        """The objective's final value, or None.

        Raises:
            FailedPreconditionError: the study has several objectives, so no
                one value: :attr:`metrics` holds each objective's.
        """
        objectives = objective_metrics(self._spec)
        if len(objectives) > 1:
            raise FailedPreconditionError(
                f"trial {self.id} value: the study has several objectives ("
                + ", ".join(m.name for m in objectives)
                + "), so a trial has no single value; trial.metrics holds each one's"
            )
        return self._proto.final_measurement.metrics.get(self.objective) if self.objective else None

    @property
    def checkpoint_uri(self) -> str:
        """Where to resume from: left by an earlier holder of the trial
        (it was paused at a rung, or its worker died), or set by
        :meth:`set_checkpoint`. Empty if none; it holds step
        :attr:`checkpoint_step`."""
        return self._proto.checkpoint_uri

    @property
    def lease_epoch(self) -> int:
        """The grant this handle acts under."""
        return self._proto.lease_epoch

    @property
    def client_id(self) -> str:
        return self._proto.client_id

    @property
    def infeasible_reason(self) -> str:
        return self._proto.infeasible_reason

    @property
    def failure_reason(self) -> str:
        """Why the trial FAILED or was last given back (the worker, not the
        parameters)."""
        return self._proto.failure_reason

    @property
    def retry_count(self) -> int:
        """Times its worker was lost (lease ran out, worker failed): these
        spend the study's ``max_retries``."""
        return self._proto.retry_count

    @property
    def preemption_count(self) -> int:
        """Times a preempted worker gave it back: these spend the study's
        ``max_preemptions``, not its retries."""
        return self._proto.preemption_count

    @property
    def stop_reason(self) -> str:
        """Why the trial was stopped or paused early."""
        return self._proto.stop_reason

    @property
    def start_time(self) -> Optional[datetime]:
        ms = self._proto.start_time_ms
        return datetime.fromtimestamp(ms / 1000.0, timezone.utc) if ms else None

    @property
    def end_time(self) -> Optional[datetime]:
        ms = self._proto.end_time_ms
        return datetime.fromtimestamp(ms / 1000.0, timezone.utc) if ms else None

    @property
    def proto(self) -> pb.Trial:
        """The ``hypertune.v1.Trial`` message as last returned by the server."""
        return self._proto

    @property
    def held(self) -> bool:
        """Whether this handle holds the trial: it came from ask(), suggest()
        or current_trial(), is not finished, and its lease is not known to
        be lost."""
        return (
            self._held
            and not self._finished
            and self._lease is not None
            and self._lease.lost is None
        )

    @property
    def should_stop(self) -> bool:
        """Whether the server asked the trial to stop early, or paused it at
        an ASHA rung, as of the last report or renewal. The program should
        then save what it has and finish: :meth:`complete` with its last
        metrics (the trial becomes STOPPED; a paused one stays PAUSED and is
        resumed from its checkpoint when promoted)."""
        if self._proto.state in (pb.Trial.STOPPING, pb.Trial.PAUSED):
            return True
        if self._rank != 0 and self._proto.state != pb.Trial.ACTIVE:
            return True  # rank 0 let the trial go (it may have ended it already)
        return self._lease is not None and self._lease.should_stop

    @property
    def paused(self) -> bool:
        """Whether the trial is paused at a rung (see :attr:`should_stop`)."""
        if self._proto.state == pb.Trial.PAUSED:
            return True
        return self._lease is not None and self._lease.state == pb.Trial.PAUSED

    def __repr__(self) -> str:
        return (
            f"Trial(study={self.study_name!r}, id={self.id}, state={self.state!r}, "
            f"params={self.params!r}, metrics={self.metrics!r})"
        )

    # ----- Optuna-style: the parameters asked for by name -----
    #
    # hypertune's space is the study's, declared when it is created; the
    # server suggests every parameter at once. So suggest_float and its kin
    # only hand back the trial's value, after checking that the call asks
    # for the domain the study searches: a call that disagrees would get
    # values from another range than it names.

    def suggest_float(
        self, name: str, low: float, high: float, *, step: Optional[float] = None,
        log: bool = False,
    ) -> float:
        """The trial's value of DOUBLE parameter ``name`` (DISCRETE with a
        ``step``), as Optuna's ``trial.suggest_float``. The study must
        search that domain: ``double_spec`` ``{"min": low, "max": high}``
        (``"scale": "LOG"`` with ``log``), or with ``step`` the
        ``discrete_spec`` of the grid low, low+step, ..., high.

        Raises:
            InvalidArgumentError: the study has no such parameter, searches
                another domain (both are named), or the parameter is not
                active in this trial (a conditional one).
        """
        where = f"suggest_float({name!r}, {low!r}, {high!r}"
        where += (f", step={step!r}" if step is not None else "") + (", log=True" if log else "")
        asked, why = _space.float_spec(name, low, high, step, log)
        return float(self._suggested(name, asked, why, where + ")"))

    def suggest_int(
        self, name: str, low: int, high: int, *, step: int = 1, log: bool = False
    ) -> int:
        """The trial's value of INTEGER parameter ``name`` (DISCRETE with a
        ``step`` > 1), as Optuna's ``trial.suggest_int``: the study must
        search ``integer_spec`` ``{"min": low, "max": high}`` (``"scale":
        "LOG"`` with ``log``), or the ``discrete_spec`` of the grid.

        Raises:
            InvalidArgumentError: as :meth:`suggest_float`.
        """
        where = f"suggest_int({name!r}, {low!r}, {high!r}"
        where += (f", step={step!r}" if step != 1 else "") + (", log=True" if log else "")
        asked, why = _space.int_spec(name, low, high, step, log)
        return int(self._suggested(name, asked, why, where + ")"))

    def suggest_categorical(self, name: str, choices: Sequence[Any]) -> Any:
        """The trial's choice of CATEGORICAL parameter ``name``, as Optuna's
        ``trial.suggest_categorical``: the study's categories must be the
        choices' labels (a str as itself, another value as its repr), in
        any order. Returns the choice itself (``None``, ``3``, ``True``...),
        not its label.

        Raises:
            InvalidArgumentError: as :meth:`suggest_float`.
        """
        choices = list(choices)
        where = f"suggest_categorical({name!r}, {choices!r})"
        asked, why = _space.categorical_spec(name, choices)
        label = self._suggested(name, asked, why, where)
        return next(c for c in choices if _space.category_label(c) == label)

    def _suggested(self, name: str, asked: Optional[dict], why: str, where: str) -> ParamValue:
        """The trial's value of ``name``, once the study's domain is the
        ``asked`` one."""
        where = f"trial {self.id} {where}"
        if asked is None:
            raise InvalidArgumentError(f"{where}: hypertune cannot search this domain: {why}")
        specs = {p.name: p for p in self._spec.parameters} if self._spec else {}
        if name not in specs:
            raise InvalidArgumentError(
                f"{where}: the study has no parameter {name!r} (its parameters: "
                + (", ".join(f'"{n}"' for n in specs) or "none")
                + "). A hypertune study's search space is declared when it is created, not "
                "by the objective: add {\"name\": \"" + name + "\", "
                + _space.describe_domain(asked)
                + "} to its config's \"parameters\" (hypertune.optuna.Sampler runs an "
                "objective that defines its space as it runs)"
            )
        held = _space.spec_dict(specs[name])
        if not _space.same_domain(held, asked):
            raise InvalidArgumentError(
                f"{where}: the study searches {name!r} as {{"
                + _space.describe_domain(held)
                + "}, and this call asks for {"
                + _space.describe_domain(asked)
                + "}; ask for the study's domain (the search space is the study's)"
            )
        params = self.params
        if name not in params:
            raise InvalidArgumentError(
                f"{where}: {name!r} is not active in this trial: it depends on "
                f"{specs[name].parent!r}, whose value here does not enable it"
            )
        return params[name]

    def should_prune(self) -> bool:
        """:attr:`should_stop`, under Optuna's name: the study's early
        stopping stopped the trial (or paused it at a rung). Then raise
        :class:`TrialPruned` (or Optuna's), or finish as :attr:`should_stop`
        says."""
        return self.should_stop

    # ----- Reporting -----

    def _usable(self, what: str) -> Holder:
        if not self._held or self._client is None:
            raise FailedPreconditionError(
                f"trial {self.id}: cannot {what}: this is a record of the trial, not a trial "
                "this process holds (those come from study.ask(), study.suggest() or "
                "hypertune.current_trial())"
            )
        assert self._lease is not None
        lost = self._lease.lost
        if lost is not None:
            raise lost
        if self._finished:
            raise FailedPreconditionError(
                f"trial {self.id}: cannot {what}: this handle has already finished it "
                f"({self.state})"
            )
        return self._client

    def _rpc(self, client: Holder, rpc: str, request: Any) -> Any:
        assert self._lease is not None
        try:
            return client.transport.call(rpc, request)
        except HypertuneError as error:
            lost = self._lease.observe(error)
            if lost is not None:
                raise lost from None
            raise

    def _elapsed(self) -> float:
        return self._elapsed_at_attach + time.monotonic() - self._attached_at

    def report(self, *args: Any, **kwargs: Any) -> Optional[Exploit]:
        """Records an intermediate measurement at a step (e.g. the epoch)
        and renews the lease. The answer may stop or pause the trial: see
        :attr:`should_stop`. Reporting a recorded step again with the same
        metrics is harmless.

        In a PBT study the answer may also be an exploit: then report
        returns the :class:`Exploit` (else None), and the trial has taken
        it already: :attr:`params` are the new parameters,
        :attr:`checkpoint_uri` and :attr:`checkpoint_step` the donor's
        checkpoint to load, :attr:`measurements` the donor's curve up to
        it. The program loads that checkpoint and goes on from
        ``checkpoint_step + 1``.

        Two forms, told apart by the arguments' types:

        - hypertune's, the step then the metrics by name:
          ``trial.report(3, val_accuracy=0.91)``,
          ``trial.report(3, {"val/acc": 0.91})``,
          ``trial.report(step=3, metrics={...})``;
        - Optuna's, the objective's value then the step:
          ``trial.report(0.91, 3)`` (the value a float: any number but an
          integer type, a NumPy float or a 0-d float tensor too),
          ``trial.report(value, step=3)`` or
          ``trial.report(value=0.91, step=3)`` (any number; where the
          study has a metric named "value", that metric).

        Two positional numbers of which the first is an integer, as
        ``report(3, 0.85)``, fit both (Optuna's order would make 3 the
        value and 0.85 the step): a TypeError names the forms.

        Raises:
            TypeError: the arguments fit neither form, or both.
            InvalidArgumentError: no metrics, none for the study's objective
                (a misspelt name: the error names the study's metrics), a
                NaN, a value that is not a number, or a step below the
                latest.
            LeaseLostError: the trial is no longer this handle's.
        """
        step, metrics = self._report_arguments(args, kwargs)
        return self._report(step, metrics)

    def _report_arguments(self, args: tuple, kwargs: dict[str, Any]) -> tuple[Any, dict]:
        """The step and the metrics of report(*args, **kwargs) (see its
        forms); the values not yet checked."""
        where = f"trial {self.id} report"
        if len(args) == 2 and not kwargs and not isinstance(args[1], Mapping):
            first, second = args
            if _is_integer(first) and _is_number(second):
                objective = self.objective or "METRIC"
                raise TypeError(
                    f"{where}({first!r}, {second!r}): an integer then a number is ambiguous. "
                    f"hypertune's form takes the step first and the metrics by name: "
                    f"report(step, {objective}=value) or report(step, {{\"{objective}\": "
                    "value}); Optuna's takes the value first: report(value, step) with a "
                    "float value, or report(value, step=step)"
                )
            if _is_number(first) and not _is_integer(first):
                return second, self._objective_value(first, where)
        if len(args) == 1 and set(kwargs) == {"step"}:
            return kwargs["step"], self._objective_value(args[0], where)
        if not args and set(kwargs) == {"value", "step"}:
            declared = [m.name for m in self._spec.metrics] if self._spec else []
            if "value" in declared:
                return kwargs["step"], {"value": kwargs["value"]}
            return kwargs["step"], self._objective_value(kwargs["value"], where)
        if len(args) > 2 or (args and "step" in kwargs) or (len(args) == 2 and "metrics" in kwargs):
            raise TypeError(
                f"{where}: expected report(step, metrics_dict, **metrics) or Optuna's "
                f"report(value, step); got {len(args)} positional argument(s) and "
                + (", ".join(f"{k}=" for k in kwargs) or "no keywords")
            )
        if not args and "step" not in kwargs:
            raise TypeError(f"{where}: missing the step (report(step, metric=value))")
        more = dict(kwargs)
        step = args[0] if args else more.pop("step")
        metrics = args[1] if len(args) > 1 else more.pop("metrics", None)
        if metrics is not None and not isinstance(metrics, Mapping):
            _check_step(step, where)  # the step's problem first, as for a dict
            raise InvalidArgumentError(
                f"{where}: metrics: expected a dict of metric name -> number, "
                f"got {_describe(metrics)}"
            )
        return step, {**(metrics or {}), **more}

    def _objective_value(self, value: Any, where: str) -> dict[str, Any]:
        """A bare value as the metrics it stands for: the study's
        objective's."""
        if not self.objective:
            raise InvalidArgumentError(
                f"{where}: a bare value needs the study's objective; name the metric"
            )
        return {self.objective: value}

    def _report(self, step: Any, given: Mapping[str, Any]) -> Optional[Exploit]:
        where = f"trial {self.id} report"
        step = _check_step(step, where)
        values = check_metrics(given, where)
        client = self._usable("report")
        if not values:
            raise InvalidArgumentError(f"{where}: no metrics")
        for name, value in values.items():
            if math.isnan(value):
                raise InvalidArgumentError(f'{where}: metric "{name}" is NaN')
        self._check_carries_objective(values, where)
        if self._rank != 0:
            self._follow(client, step)
            return None
        exploits_before = len(self._proto.exploits)
        request = pb.AddMeasurementRequest(
            study_name=self.study_name,
            trial_id=self.id,
            lease_epoch=self.lease_epoch,
            measurement=pb.Measurement(
                step=step, elapsed_seconds=self._elapsed(), metrics=values
            ),
        )
        answer = self._rpc(client, "AddMeasurement", request)
        if len(answer.exploits) > exploits_before:
            # PBT: the trial took a donor's checkpoint and curve; read it
            # whole, and go on from the checkpoint's step.
            self._proto = client.transport.call(
                "GetTrial", pb.GetTrialRequest(study_name=self.study_name, trial_id=self.id)
            )
            self._last_step = self._proto.checkpoint_step
            return self.exploits[-1]
        # The answer holds only this report's measurement (an intermediate
        # report costs the same however long the curve): the curve so far
        # is kept here.
        reported = []
        for m in answer.measurements:
            copy = pb.Measurement()
            copy.CopyFrom(m)
            reported.append(copy)
        first = min((m.step for m in reported), default=None)
        del answer.measurements[:]
        if first is None or all(m.step < first for m in self._proto.measurements[-1:]):
            answer.measurements.extend(self._proto.measurements)  # the usual case
            answer.measurements.extend(reported)
        else:  # a retried earlier step: merged by step
            by_step = {m.step: m for m in self._proto.measurements}
            by_step.update((m.step, m) for m in reported)
            answer.measurements.extend(by_step[s] for s in sorted(by_step))
        self._proto = answer
        self._last_step = max(self._last_step, step)
        return None

    def _follow(self, client: Holder, step: Optional[int]) -> None:
        """A rank other than 0 reporting ``step``: waits (up to
        _FOLLOW_SECONDS) until rank 0's report of that step is on the
        server, then takes the trial's state from there, so that both
        ranks see the same stop or pause after the same step. With
        ``step`` None, only reads the state."""
        deadline = time.monotonic() + _FOLLOW_SECONDS
        wait = 0.02
        while True:
            now = client.transport.call(
                "GetTrial", pb.GetTrialRequest(study_name=self.study_name, trial_id=self.id)
            )
            reached = step is None or any(m.step >= step for m in now.measurements)
            if reached or now.lease_epoch != self.lease_epoch or now.state != pb.Trial.ACTIVE:
                break
            if time.monotonic() >= deadline:
                warnings.warn(
                    f"trial {self.id} rank {self._rank}: rank 0 has not reported step {step} "
                    f"within {_FOLLOW_SECONDS:.0f} s; going on with the trial's state as it is",
                    stacklevel=3,
                )
                break
            time.sleep(wait)
            wait = min(wait * 2, 1.0)
        epoch = self.lease_epoch
        if now.lease_epoch != epoch:
            if not reached:
                # Handed over before rank 0 got this far: lost, as rank 0's
                # own calls find it.
                assert self._lease is not None
                lost = self._lease.observe(
                    FailedPreconditionError(f"trial {self.id} is held under lease epoch "
                                            f"{now.lease_epoch} now")
                )
                if lost is not None:
                    raise lost
            # Rank 0 reported this step, then let the trial go (a pause
            # promoted elsewhere since): this run stops here.
            now.state = pb.Trial.STOPPING
            now.lease_epoch = epoch
        self._proto = now
        if step is not None:
            self._last_step = max(self._last_step, step)

    def _check_carries_objective(self, values: Mapping[str, float], where: str) -> None:
        """Refuses a measurement without the study's primary objective,
        which early stopping judges: stored anyway, a misspelt name would
        leave the rule blind for the whole trial. Other metrics beside it
        (a training loss) are kept, as the study's recorded ones are."""
        objective = self.objective
        if not objective or objective in values:
            return
        assert self._spec is not None  # a study's objective comes from its spec
        declared = [m.name for m in self._spec.metrics]
        unknown = [name for name in values if name not in declared]
        problem = f'no "{objective}", the objective that early stopping judges'
        if unknown:
            problem = "unknown metric " + ", ".join(f'"{n}"' for n in unknown) + " and " + problem
        raise InvalidArgumentError(
            f"{where}: {problem}; the study's metrics are "
            + ", ".join(f'"{name}"' for name in declared)
        )

    def complete(
        self, value: Union[float, Mapping[str, float], None] = None, /, **metrics: float
    ) -> None:
        """Completes the trial with its final metrics, at the last reported
        step: ``trial.complete(loss=0.27, accuracy=0.91)``, or
        ``trial.complete(0.91)`` for the study's objective alone, or
        ``trial.complete({"val/acc": 0.91})``, or (Optuna's return of a
        multi-objective study) ``trial.complete((0.91, 120.0))``, one value
        per objective in the order of ``study.objectives``.

        A NaN or infinite metric marks the trial INFEASIBLE instead (the
        parameters diverged). A trial the server stopped early becomes
        STOPPED; one paused at a rung stays PAUSED (it is resumed from its
        checkpoint when promoted), its device time counted. On a rank other
        than 0 of a distributed training this only lets go of the trial:
        rank 0 completes it.
        """
        where = f"trial {self.id} complete"
        if value is None:
            given: dict[str, Any] = {}
        elif isinstance(value, Mapping):
            given = dict(value)
        elif isinstance(value, (tuple, list)):
            # Optuna's multi-objective return: the objectives' values in order.
            objectives = [m.name for m in objective_metrics(self._spec)]
            if len(value) != len(objectives):
                raise InvalidArgumentError(
                    f"{where}: {len(value)} values for the study's {len(objectives)} "
                    "objective(s) (" + ", ".join(f'"{n}"' for n in objectives)
                    + "); give one value per objective, in that order, or a dict by name"
                )
            given = dict(zip(objectives, value))
        else:
            if not self.objective:
                raise InvalidArgumentError(
                    f"{where}: a bare value needs the study's objective; name the metric"
                )
            given = {self.objective: value}
        values = check_metrics({**given, **metrics}, where)
        self._usable("complete")
        if not values:
            raise InvalidArgumentError(f"{where}: no metrics")
        for name, number in values.items():
            if not math.isfinite(number):
                what = "NaN" if math.isnan(number) else "infinite"
                self.infeasible(f'metric "{name}" is {what}')
                return
        final = pb.Measurement(
            step=self._last_step, elapsed_seconds=self._elapsed(), metrics=values
        )
        self._finish(pb.CompleteTrialRequest(final_measurement=final))

    def infeasible(self, reason: str) -> None:
        """Marks the trial INFEASIBLE: its parameters are bad (NaN loss, out
        of memory); the optimizer steers away from them."""
        self._usable("mark infeasible")
        self._finish(
            pb.CompleteTrialRequest(infeasible=True, infeasible_reason=str(reason)[:_MAX_REASON])
        )

    def fail(self, reason: str) -> None:
        """Marks the trial FAILED: something other than its parameters went
        wrong for good (a bug, a missing file). It is not run again, and
        the optimizer leaves it out, as Optuna's FAIL."""
        self._usable("mark failed")
        self._finish(pb.CompleteTrialRequest(failed=True, failure_reason=str(reason)[:_MAX_REASON]))

    def give_back(self, reason: str = "given back", *, preempted: bool = False) -> None:
        """Gives the trial back because this worker cannot finish it
        (preempted, shutting down), not because of its parameters: the
        server queues it for another worker, keeping its measurements and
        checkpoint, while it has retries left, else marks it FAILED.
        ``preempted=True`` says the machine is being taken away (a spot
        notice, SIGTERM): that spends the study's ``max_preemptions``, not
        its ``max_retries`` (a Ctrl-C is one too)."""
        self._usable("give back")
        self._finish(
            pb.CompleteTrialRequest(
                worker_failed=True, failure_reason=str(reason)[:_MAX_REASON], preempted=preempted
            )
        )

    def _finish(self, request: pb.CompleteTrialRequest) -> None:
        client = self._usable("finish")
        if self._rank != 0:
            self._let_go()  # rank 0 finishes the trial
            return
        request.study_name = self.study_name
        request.trial_id = self.id
        request.lease_epoch = self.lease_epoch
        # This attempt's device time in all; the server adds what its
        # heartbeats did not report already.
        assert self._lease is not None
        request.device_seconds = self._lease.device_seconds()
        if self.paused and not request.infeasible:
            # Paused at a rung: the pause stands, and the trial is resumed
            # from its checkpoint when promoted (perhaps by another worker
            # already). The call only counts this segment's device time.
            try:
                client.transport.call("CompleteTrial", request)
            except HypertuneError:
                pass  # promoted and held by another worker already
            self._lease.settle()
            self._let_go()
            return
        if not request.worker_failed:
            request.attributes.update(
                encode_attributes(self._pending_attributes, "", self._proto.attributes)
            )
        try:
            self._proto = client.transport.call("CompleteTrial", request)
        except HypertuneError as error:
            settled = self._settled_by_earlier_attempt(client, request, error)
            if settled is None:
                assert self._lease is not None
                lost = self._lease.observe(error)
                if lost is not None:
                    self._let_go()
                    raise lost from None
                raise  # the lease stays renewed, so that the caller may try again
            self._proto = settled
        self._lease.settle()
        self._let_go()

    def _settled_by_earlier_attempt(
        self, client: Holder, request: pb.CompleteTrialRequest, error: HypertuneError
    ) -> Optional[pb.Trial]:
        """The trial, if ``error`` came from a retry of a CompleteTrial that
        an earlier attempt had already carried out (its reply lost)."""
        if error.code != FailedPreconditionError.default_code or error.attempts < 2:
            return None
        try:
            now = client.transport.call(
                "GetTrial", pb.GetTrialRequest(study_name=self.study_name, trial_id=self.id)
            )
        except HypertuneError:
            return None
        ours = now.lease_epoch == request.lease_epoch
        if request.worker_failed:
            done = now.state in (pb.Trial.REQUESTED, pb.Trial.FAILED) or (
                now.lease_epoch > request.lease_epoch
            )
        elif request.infeasible:
            done = ours and now.state == pb.Trial.INFEASIBLE
        elif request.failed:
            done = ours and now.state == pb.Trial.FAILED
        else:
            done = (
                ours
                and now.state in (pb.Trial.COMPLETED, pb.Trial.STOPPED)
                and dict(now.final_measurement.metrics)
                == dict(request.final_measurement.metrics)
            )
        return now if done else None

    def _let_go(self) -> None:
        self._finished = True
        if self._lease is not None:
            self._lease.stop()
        if self._slot is not None:
            self._slot.finished_one()
            self._slot = None

    def heartbeat(self, checkpoint_uri: str = "", checkpoint_step: Optional[int] = None) -> bool:
        """Renews the lease now, recording ``checkpoint_uri`` on the trial
        if given, as holding ``checkpoint_step`` (default: the latest
        reported step). Returns :attr:`should_stop`. On a rank other than
        0 of a distributed training it only reads the trial's state."""
        client = self._usable("renew the lease")
        assert self._lease is not None
        step = 0
        if checkpoint_step is not None:
            step = _check_step(checkpoint_step, f"trial {self.id} checkpoint")
            if step < 0:
                raise InvalidArgumentError(
                    f"trial {self.id} checkpoint: step: expected an integer >= 0, got {step}"
                )
        if self._rank != 0:
            self._follow(client, None)
            return self.should_stop
        response = self._lease.renew(checkpoint_uri, step)
        self._proto.lease_expire_time_ms = response.lease_expire_time_ms
        if checkpoint_uri:
            self._proto.checkpoint_uri = checkpoint_uri
            self._proto.checkpoint_step = step or self._last_step
        return self.should_stop

    def set_checkpoint(self, uri: str, step: Optional[int] = None) -> None:
        """Records ``uri`` as the place to resume this trial from, should
        its worker die or the trial be paused at a rung (e.g.
        ``"file:///ckpt/trial-3.pt"``), as holding ``step`` (default: the
        latest reported step). A handed-over trial then resumes at
        :attr:`checkpoint_step` + 1 with the measurements up to it. Save
        the checkpoint before the report that may pause the trial. On a
        rank other than 0 of a distributed training this does nothing:
        rank 0 records the checkpoint."""
        if not isinstance(uri, str) or not uri:
            raise InvalidArgumentError(
                f"trial {self.id} set_checkpoint: uri: expected a non-empty string, "
                f"got {_describe(uri)}"
            )
        if self._rank != 0:
            self._usable("set a checkpoint")
            return
        self.heartbeat(uri, step)

    def check_early_stopping(self) -> bool:
        """Asks the server to judge the trial by the study's early-stopping
        rule now, against the latest results. Returns :attr:`should_stop`."""
        client = self._usable("check early stopping")
        if self._rank != 0:
            self._follow(client, None)
            return self.should_stop
        response = self._rpc(
            client,
            "CheckEarlyStopping",
            pb.CheckEarlyStoppingRequest(study_name=self.study_name, trial_id=self.id),
        )
        if response.should_stop:
            self._proto.state = response.state
            self._proto.stop_reason = response.reason
        return self.should_stop

    # ----- Context manager -----

    def __enter__(self) -> Trial:
        if self._held and not self._worker_holds and not self._finished:
            self._signals_entered = _signals.enter()
        return self

    def __exit__(self, kind: Any, error: Optional[BaseException], traceback: Any) -> None:
        try:
            if not self.held:
                return
            if self._rank != 0:
                self._let_go()  # rank 0 settles the trial
                return
            if isinstance(error, Exception):
                self._settle_exception(error)
            elif self._worker_holds:
                return  # the worker settles the trial from how the program ends
            elif error is None:
                warnings.warn(
                    f"trial {self.id} left its with-block unfinished; its lease is no longer "
                    "renewed and the server hands it to another worker once it runs out",
                    stacklevel=2,
                )
                self._lease.stop()  # type: ignore[union-attr]
            elif isinstance(error, _signals.Terminated):
                # What a spot machine's notice and a scheduler's preemption send.
                self._settle_quietly(
                    lambda reason: self.give_back(reason, preempted=True), "preempted (SIGTERM)"
                )
            elif isinstance(error, KeyboardInterrupt):
                # Ctrl-C takes the process away, as a preemption does: the
                # trial goes back to the queue and a rerun continues it.
                self._settle_quietly(
                    lambda reason: self.give_back(reason, preempted=True),
                    "interrupted (KeyboardInterrupt)",
                )
        finally:
            if self._signals_entered:
                self._signals_entered = False
                _signals.leave()

    def _settle_exception(self, error: Exception) -> None:
        """Settles the trial by the exception leaving its with-block (see
        the class's documentation)."""
        reason = describe_error(error)
        if isinstance(error, LeaseLostError):
            return  # another worker has it; nothing to settle
        if loses_the_worker(error):
            if isinstance(error, BrokenPipeError):
                reason += " (standard output closed: the worker reading it is gone)"
            self._settle_quietly(self.give_back, reason)
        elif is_pruned(error):
            self._settle_quietly(self._settle_pruned, reason)
        elif declares_infeasible(error, self.infeasible_exceptions):
            self._settle_quietly(self.infeasible, reason)
        else:
            self._settle_quietly(self.fail, reason)

    def _settle_pruned(self, reason: str) -> None:
        """Settles a trial whose code raised TrialPruned: one the study's
        early stopping stopped or paused completes with its last reported
        metrics (STOPPED, or still PAUSED); any other has no result, and
        is FAILED."""
        last = self._proto.measurements[-1] if self._proto.measurements else None
        if self.should_stop and last is not None:
            self.complete(dict(last.metrics))
            return
        why = "the study's early stopping had not stopped it"
        if last is None:
            why = "it reported no intermediate value"
        self.fail(f"{reason} (pruned by the objective, but {why}: no result to keep)")

    def _settle_quietly(self, settle: Any, reason: str) -> None:
        # The exception in flight is what the caller must see; a failure to
        # settle the trial only adds a warning.
        try:
            settle(reason)
        except HypertuneError as failure:
            warnings.warn(f"trial {self.id}: could not record {reason!r}: {failure}", stacklevel=3)
