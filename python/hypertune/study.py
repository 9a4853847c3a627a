"""Studies: their history, and the trials to run next.

A Study calls the server through its Client's Transport (_transport.py),
and knows the Client by its public face (:class:`Owner`): client.py
imports this module, not the reverse.

Thread safety: a Study may be shared by threads; each ask() or suggest()
hands the calling thread trials of its own (see _client_ids.py).
"""

from __future__ import annotations

import json
import math
import operator
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Union

import grpc

from hypertune import _client_ids
from hypertune._lease import renewal_interval
from hypertune._optimize import Stops, optimize, workers
from hypertune._proto import objective_metrics, pb
from hypertune._retry import failure
from hypertune._transport import Transport
from hypertune.errors import FailedPreconditionError, InvalidArgumentError
from hypertune.trial import (
    Holder,
    Trial,
    decode_attributes,
    encode_attributes,
    stored_text,
)

if TYPE_CHECKING:
    import pandas

# ask()'s wait while the study is at its parallel limit or paused.
_WAIT_INITIAL = 0.2
_WAIT_MAX = 2.0

TRIAL_STATES = tuple(
    name for name in pb.Trial.State.keys() if name != "STATE_UNSPECIFIED"
)


@dataclass(frozen=True)
class TrialEvent:
    """One change of a study's trials, as :meth:`Study.watch` yields it:
    the trial as it is after the change, and the study's sequence number of
    the change (pass it as ``after`` to resume watching)."""

    sequence: int
    trial: Trial


def _trial_states(states: Union[str, Iterable[str], None]) -> list[int]:
    if states is None:
        return []
    if isinstance(states, str):
        states = [states]
    numbers = []
    for state in states:
        name = state.upper() if isinstance(state, str) else state
        if name not in TRIAL_STATES:
            raise InvalidArgumentError(
                f"states: unknown trial state {state!r}; expected some of: "
                + ", ".join(TRIAL_STATES)
            )
        numbers.append(pb.Trial.State.Value(name))
    return numbers


def _describe(value: Any) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 40 else text[:37] + '...'}"


def _names(names: Iterable[str]) -> str:
    return ", ".join(f'"{name}"' for name in names)


def _parameter_value(spec: pb.ParameterSpec, value: Any, where: str) -> pb.ParameterValue:
    """``value`` as the ParameterValue of ``spec``'s type; the server checks
    it against the bounds and values."""
    kind = spec.WhichOneof("kind")
    problem = f'{where}: parameter "{spec.name}"'
    if kind == "categorical_spec":
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{problem}: expected a str, got {_describe(value)}")
        return pb.ParameterValue(name=spec.name, string_value=value)
    if isinstance(value, (bool, str, bytes)):
        raise InvalidArgumentError(f"{problem}: expected a number, got {_describe(value)}")
    if kind == "integer_spec":
        try:
            whole = operator.index(value)  # int, and NumPy integers
        except TypeError:
            if not (isinstance(value, float) and value.is_integer()):
                raise InvalidArgumentError(
                    f"{problem}: expected an integer, got {_describe(value)}"
                ) from None
            whole = int(value)
        return pb.ParameterValue(name=spec.name, int_value=whole)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"{problem}: expected a number, got {_describe(value)}"
        ) from None
    if math.isnan(number):
        raise InvalidArgumentError(f"{problem}: NaN is not a value")
    return pb.ParameterValue(name=spec.name, double_value=number)


def _active(spec: pb.StudySpec, values: Mapping[str, Any]) -> dict[str, Optional[bool]]:
    """Each parameter of ``spec``: True when active under ``values``, False
    when inactive, None when that depends on a parent ``values`` leaves
    open (a partial configuration)."""
    by_name = {p.name: p for p in spec.parameters}
    active: dict[str, Optional[bool]] = {}

    def of(name: str) -> Optional[bool]:
        if name in active:
            return active[name]
        param = by_name[name]
        if not param.parent:
            answer: Optional[bool] = True
        else:
            parent = of(param.parent) if param.parent in by_name else False
            if parent is not True:
                answer = parent
            elif param.parent not in values:
                answer = None
            else:
                chosen = values[param.parent]
                if by_name[param.parent].WhichOneof("kind") == "categorical_spec":
                    answer = chosen in param.parent_categories
                else:
                    answer = any(chosen == v for v in param.parent_values)
        active[name] = answer
        return answer

    for name in by_name:
        of(name)
    return active


# Optuna's names of trial states, for trials_dataframe(style="optuna");
# INFEASIBLE and PAUSED, which Optuna lacks, keep theirs.
_OPTUNA_STATES = {
    "COMPLETED": "COMPLETE",
    "STOPPED": "PRUNED",
    "FAILED": "FAIL",
    "ACTIVE": "RUNNING",
    "STOPPING": "RUNNING",
    "REQUESTED": "WAITING",
}

# `hypertune import-optuna` keeps a numeric (or bool) user attribute KEY of
# an Optuna trial twice: as the attribute (its JSON text, unmarked) and as
# the metric "user_attr.KEY", for plots. Attribute keys and metric names are
# made identifiers alike, but for a key starting with a digit, whose
# attribute gets a leading "_" ("1st" -> "_1st", metric "user_attr.1st").
_IMPORTED_COPY = "user_attr."


def _attribute_of_copy(metric: str) -> Optional[str]:
    """The attribute key whose import copy ``metric`` may be, or None."""
    if not metric.startswith(_IMPORTED_COPY):
        return None
    key = metric[len(_IMPORTED_COPY):]
    return key if key[:1].isalpha() or key[:1] == "_" else "_" + key


def _imported_user_attrs(trial: Trial) -> dict[str, Any]:
    """``trial.user_attrs``, those with an import's metric copy as the
    number or bool they were in Optuna (the import stored their JSON text
    without marking it JSON)."""
    values = trial.user_attrs
    for metric in trial.metrics:
        key = _attribute_of_copy(metric)
        if key is not None and isinstance(values.get(key), str):
            try:
                values[key] = json.loads(values[key])
            except ValueError:
                pass  # text after all: left as it is
    return values


# The column groups trials_dataframe(attrs=...) names, by column prefix;
# "values" is Optuna's other name for "value".
_GROUPS = ("number", "value", "datetime_start", "datetime_complete", "duration", "params",
           "user_attrs", "state", "feasible", "metrics", "intermediate")
_PREFIXED = ("values", "params", "user_attrs", "metrics", "intermediate")


def _column_group(column: str) -> str:
    """The attrs group of a column of the Optuna layout."""
    for prefix in _PREFIXED:
        if column.startswith(prefix + "_"):
            return "value" if prefix == "values" else prefix
    return column


def _column_groups(attrs: Optional[Iterable[str]], style: str) -> Optional[set[str]]:
    """The groups trials_dataframe keeps: those ``attrs`` names (and the
    intermediate columns, which ``intermediate`` asks for), or None for
    all."""
    if attrs is None:
        return None
    where = "trials_dataframe: attrs"
    if style != "optuna":
        raise InvalidArgumentError(f'{where}: selects columns of style="optuna" only')
    if isinstance(attrs, str):
        raise InvalidArgumentError(f"{where}: expected a tuple of names, got {attrs!r}")
    groups = {"intermediate"}
    for name in attrs:
        if name == "system_attrs":
            continue  # Optuna's default asks for them; hypertune keeps none
        group = "value" if name == "values" else name
        if group not in _GROUPS or group == "intermediate":
            raise InvalidArgumentError(
                f"{where}: unknown {name!r}; expected some of: "
                + ", ".join(g for g in _GROUPS if g != "intermediate")
                + ", values, system_attrs"
            )
        groups.add(group)
    return groups


def _optuna_value_name(metric: str) -> str:
    """The suffix of an objective's ``values_`` column: the metric's name,
    or for an Optuna import's "value_0", "value_1"... Optuna's own "0",
    "1"..."""
    index = metric[len("value_"):] if metric.startswith("value_") else ""
    return index if index.isdigit() else metric


class Owner(Holder, Protocol):
    """What a Study is reached through: a :class:`~hypertune.Client`,
    whose settings are read as they are at each use."""

    #: Who holds the trials asked for (see _client_ids.py).
    client_id: str
    #: Whether held trials are renewed from the background.
    heartbeats: bool
    #: Seconds between renewals; None: a third of the lease.
    heartbeat_interval: Optional[float]

    def delete_study(self, name: str) -> None: ...


class Study:
    """A study on the server: its spec, its trials, and the trials to run
    next. Get one from :meth:`Client.create_study`, :meth:`Client.get_study`
    or :meth:`Client.list_studies`."""

    def __deepcopy__(self, memo: dict) -> "Study":
        """The same study: a connection is shared, not copied (so that
        ``sklearn.base.clone`` of an estimator holding one works)."""
        return self

    def __init__(self, client: Owner, proto: pb.Study):
        self._client = client
        self._transport: Transport = client.transport
        self._proto = proto
        # One event per optimize() running on this object; stop() sets them.
        self._stops = Stops()

    # ----- What the study is -----

    @property
    def name(self) -> str:
        return self._proto.name

    @property
    def spec(self) -> pb.StudySpec:
        """The ``hypertune.v1.StudySpec``: parameters, metrics, algorithm,
        budget."""
        return self._proto.spec

    @property
    def state(self) -> str:
        """ACTIVE, PAUSED or COMPLETED, as last read (see :meth:`refresh`)."""
        return pb.Study.State.Name(self._proto.state)

    @property
    def objectives(self) -> list[str]:
        """The names of the metrics optimized: those with role OBJECTIVE, or
        the first metric where no metric sets a role."""
        return [m.name for m in objective_metrics(self.spec, self._proto.metric_roles)]

    @property
    def objective(self) -> str:
        """The name of the primary objective (the first of
        :attr:`objectives`): what early stopping judges."""
        found = objective_metrics(self.spec, self._proto.metric_roles)
        return found[0].name if found else ""

    @property
    def goal(self) -> str:
        """MAXIMIZE or MINIMIZE: the primary objective's goal."""
        found = objective_metrics(self.spec, self._proto.metric_roles)
        return pb.MetricSpec.Goal.Name(found[0].goal) if found else ""

    @property
    def attributes(self) -> dict[str, str]:
        """Free-form notes kept with the study (the config's
        ``"attributes"``, ``create_study(attributes=...)``, or an Optuna
        study's user attributes) as stored text: a value that was not a str
        is its JSON text here."""
        return stored_text(self._proto.attributes)

    @property
    def user_attrs(self) -> dict[str, Any]:
        """The notes of :attr:`attributes` as the Python values they were
        set as (like Optuna's ``study.user_attrs``; see
        :meth:`Trial.set_attribute` for the rule)."""
        return decode_attributes(self._proto.attributes)

    @property
    def trial_counts(self) -> dict[str, int]:
        """Trials by state, as last read."""
        return dict(self._proto.trial_counts)

    @property
    def proto(self) -> pb.Study:
        """The ``hypertune.v1.Study`` message as last returned by the server."""
        return self._proto

    @property
    def transport(self) -> Transport:
        """The connection the study calls through, its Client's
        (hypertune's own plumbing: calls, retries, servers, metadata)."""
        return self._transport

    def __repr__(self) -> str:
        return f"Study(name={self.name!r}, state={self.state!r}, trials={self.trial_counts!r})"

    def refresh(self) -> Study:
        """Reads the study again (state, trial counts); returns self."""
        self._proto = self._transport.call("GetStudy", pb.GetStudyRequest(name=self.name))
        return self

    def _set_state(self, state: int) -> None:
        request = pb.SetStudyStateRequest(name=self.name, state=state)
        self._proto = self._transport.call("SetStudyState", request)

    def pause(self) -> None:
        """Stops suggestions; running trials may still report."""
        self._set_state(pb.Study.PAUSED)

    def resume(self) -> None:
        """Restarts suggestions of a paused study."""
        self._set_state(pb.Study.ACTIVE)

    def update(self, parameters: Optional[list] = None, **fields) -> None:
        """Changes the study's spec: budget and lease fields by name
        (``max_trials=60``, ``max_device_hours=8``, ``lease_seconds=120``;
        early stopping as ``early_stopping={"max_resource": 81}``), and with
        ``parameters`` (a list of parameter dicts, as in the config) a wider
        search space. The server records each update (:attr:`changes`);
        raising the budget of a COMPLETED study makes it ACTIVE."""
        from google.protobuf import json_format
        from google.protobuf.field_mask_pb2 import FieldMask

        spec = dict(fields)
        paths = [name for name in fields if name != "early_stopping"]
        for name in (fields.get("early_stopping") or {}):
            paths.append(f"early_stopping.{name}")
        if parameters is not None:
            spec["parameters"] = parameters
            paths.append("parameters")
        if not paths:
            raise InvalidArgumentError("update: name a field to change")
        request = pb.UpdateStudyRequest(
            name=self.name,
            spec=json_format.ParseDict(spec, pb.StudySpec()),
            update_mask=FieldMask(paths=paths),
        )
        self._proto = self._transport.call("UpdateStudy", request)

    @property
    def changes(self) -> list:
        """Every update of the study (StudyChange messages), oldest first,
        as last read."""
        return list(self._proto.changes)

    def delete(self) -> None:
        """Deletes the study and its trials."""
        self._client.delete_study(self.name)

    # ----- Its history -----

    def _record(self, proto: pb.Trial) -> Trial:
        return Trial(self._client, proto, self.spec)

    def trial(self, trial_id: int) -> Trial:
        """Trial ``trial_id`` as stored (a record: it only reads)."""
        request = pb.GetTrialRequest(study_name=self.name, trial_id=trial_id)
        return self._record(self._transport.call("GetTrial", request))

    def trials(self, states: Union[str, Iterable[str], None] = None) -> list[Trial]:
        """The study's trials by id, only those in ``states`` (e.g.
        ``["COMPLETED", "STOPPED"]``) if given. Records: they only read."""
        request = pb.ListTrialsRequest(
            study_name=self.name, page_size=1000, states=_trial_states(states)
        )
        trials: list[Trial] = []
        while True:
            page = self._transport.call("ListTrials", request)
            trials.extend(self._record(t) for t in page.trials)
            if not page.next_page_token:
                return trials
            request.page_token = page.next_page_token

    def optimal_trials(self) -> list[Trial]:
        """The best feasible COMPLETED trials: the best one for a single
        objective, the Pareto front for several."""
        request = pb.ListOptimalTrialsRequest(study_name=self.name)
        return [self._record(t) for t in self._transport.call("ListOptimalTrials", request).trials]

    def best(self) -> Optional[Trial]:
        """The best trial so far (the one of :meth:`optimal_trials`), or
        None before any trial completed.

        Raises:
            FailedPreconditionError: the study has several objectives, so no
                single best trial: :meth:`optimal_trials` answers the
                Pareto front.
        """
        objectives = self.objectives
        if len(objectives) > 1:
            raise FailedPreconditionError(
                f"study {self.name!r} best(): the study has several objectives ("
                + ", ".join(objectives)
                + "), so no single best trial; study.optimal_trials() answers the trials "
                "none beats on every objective (the Pareto front)"
            )
        optimal = self.optimal_trials()
        return optimal[0] if optimal else None

    # ----- Optuna's names for the best so far -----

    def _single(self, what: str) -> None:
        """Raises unless the study has one objective; ``what`` is the name
        asked for."""
        objectives = self.objectives
        if len(objectives) > 1:
            raise FailedPreconditionError(
                f"study {self.name!r} {what}: the study has {len(objectives)} objectives ("
                + ", ".join(objectives)
                + "), so no single best; study.best_trials is the Pareto front (the trials "
                "none beats on every objective), each with its metrics"
            )

    @property
    def best_trial(self) -> Trial:
        """The best feasible COMPLETED trial so far (Optuna's
        ``study.best_trial``; :meth:`best` answers None instead of
        raising).

        Raises:
            ValueError: no trial has completed yet (or none completed
                feasible).
            FailedPreconditionError: the study has several objectives:
                :attr:`best_trials` is the Pareto front.
        """
        self._single("best_trial")
        optimal = self.optimal_trials()
        if not optimal:
            counts = {k: v for k, v in self.refresh().trial_counts.items() if v}
            raise ValueError(
                f"study {self.name!r} has no best trial yet: no trial has COMPLETED with a "
                "feasible result (trials by state: "
                + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none")
                + ")"
            )
        return optimal[0]

    @property
    def best_value(self) -> float:
        """The objective's value of :attr:`best_trial` (which says what it
        raises)."""
        self._single("best_value")
        value = self.best_trial.value
        assert value is not None  # the best trial is COMPLETED with its objective
        return value

    @property
    def best_params(self) -> dict[str, Any]:
        """The parameters of :attr:`best_trial` (which says what it
        raises)."""
        self._single("best_params")
        return self.best_trial.params

    @property
    def best_trials(self) -> list[Trial]:
        """The best feasible COMPLETED trials (Optuna's
        ``study.best_trials``): the Pareto front of a study with several
        objectives, the best trial of one with one; empty before any
        completed. The same as :meth:`optimal_trials`."""
        return self.optimal_trials()

    @property
    def directions(self) -> list[str]:
        """MINIMIZE or MAXIMIZE for each objective of :attr:`objectives`,
        in that order (Optuna's ``study.directions``, as strings)."""
        return [pb.MetricSpec.Goal.Name(m.goal) for m in objective_metrics(self.spec, self._proto.metric_roles)]

    @property
    def direction(self) -> str:
        """MINIMIZE or MAXIMIZE: the objective's goal (Optuna's
        ``study.direction``, as a string).

        Raises:
            FailedPreconditionError: the study has several objectives:
                :attr:`directions` has each one's.
        """
        directions = self.directions
        if len(directions) > 1:
            raise FailedPreconditionError(
                f"study {self.name!r} direction: the study has {len(directions)} objectives ("
                + ", ".join(self.objectives)
                + "); study.directions has each one's goal"
            )
        return directions[0] if directions else ""

    def watch(self, after: int = 0, timeout: Optional[float] = None) -> Iterator[TrialEvent]:
        """Yields the study's trial changes as they happen, those after
        sequence number ``after`` first (0 = from the start).

        A dropped stream (the server restarted) is opened again after the
        last sequence seen, so nothing is missed or repeated (with several
        servers, on the one calls move on to: the leader a standby names,
        else the next); UNAVAILABLE is raised after the client's
        ``max_attempts`` reconnections fail in a row. With ``timeout``, the
        watch ends after that many seconds; otherwise it lasts until the
        caller stops iterating.
        """
        transport = self._transport
        policy = transport.policy
        deadline = None if timeout is None else time.monotonic() + timeout
        failures = 0
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return
            if transport.closed:
                raise FailedPreconditionError(f"WatchTrials of study {self.name!r}: the client is closed")
            request = pb.WatchTrialsRequest(study_name=self.name, after_sequence=after)
            index, stream = transport.open_stream("WatchTrials", request, timeout=left)
            try:
                for event in stream:
                    after = event.sequence
                    failures = 0
                    yield TrialEvent(event.sequence, self._record(event.trial))
                code, details = grpc.StatusCode.UNAVAILABLE, "the server ended the stream"
            except grpc.RpcError as err:
                code, details = err.code(), err.details() or ""
            finally:
                stream.cancel()
            if code == grpc.StatusCode.DEADLINE_EXCEEDED and deadline is not None:
                return
            failures += 1
            if code != grpc.StatusCode.UNAVAILABLE or failures >= policy.max_attempts:
                raise failure(code, f"WatchTrials of study {self.name!r}: {details}", failures)
            if not transport.move_on(index, details):
                transport.backoff(policy.jittered(failures))

    def trials_dataframe(
        self,
        states: Union[str, Iterable[str], None] = None,
        *,
        intermediate: bool = False,
        style: Optional[str] = None,
        attrs: Optional[Iterable[str]] = None,
    ) -> pandas.DataFrame:
        """The trials as a pandas DataFrame, one row per trial. Needs
        pandas (Debian: python3-pandas).

        ``style="hypertune"`` (the default): indexed by trial id, the
        columns of ``hypertune trials --format csv`` (``state``, one column
        per parameter, one per final metric, ``step`` (the last), then
        ``elapsed_seconds``, ``start_time``, ``end_time``, ``client_id`` and
        ``infeasible_reason``), then ``feasible``, then one
        ``user_attrs_KEY`` column per attribute (its Python value, as
        :attr:`Trial.user_attrs`), by key.

        ``style="optuna"``: Optuna's layout and names, a RangeIndex and the
        columns ``number`` (id - 1), ``value`` (one objective) or
        ``values_NAME`` (one per objective), ``datetime_start``,
        ``datetime_complete``, ``duration``, ``params_NAME``,
        ``user_attrs_KEY``, ``state`` with Optuna's names (COMPLETE,
        PRUNED for STOPPED, FAIL, RUNNING for ACTIVE and STOPPING,
        WAITING for REQUESTED; INFEASIBLE and PAUSED, which Optuna lacks,
        as they are), then ``feasible`` and ``metrics_NAME`` for each
        final metric that is not an objective (constraints, recorded
        ones). ``attrs`` (which implies this style), as Optuna's, keeps
        only the columns of the groups it names: ``number``, ``value``
        (or ``values``), ``datetime_start``, ``datetime_complete``,
        ``duration``, ``params``, ``user_attrs``, ``state``, ``feasible``,
        ``metrics``; ``system_attrs``, of Optuna's default, adds none
        (hypertune keeps none).

        ``feasible``: whether the trial's result meets the study's
        constraints: True or False for a COMPLETED or STOPPED trial with a
        result (True for every one of a study without constraints), None
        for a trial without a result (INFEASIBLE, FAILED, not finished).

        With ``intermediate=True`` (off by default, as in Optuna: a long
        run makes many), one ``intermediate_METRIC_STEP`` column per metric
        and step of the intermediate measurements (``report``), by metric
        (the study's order) then step: ``frame.filter(like=
        "intermediate_loss_")`` is the loss curve of each trial, one row
        per trial. A value a trial lacks is None (NaN in a numeric column).

        A study imported from Optuna (``hypertune import-optuna``) keeps a
        numeric user attribute both as the attribute and as the metric
        ``user_attr.KEY``: the frame has it once, as ``user_attrs_KEY``,
        with its number.
        """
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "Study.trials_dataframe needs pandas (apt-get install python3-pandas)"
            ) from None
        if style is None:
            style = "hypertune" if attrs is None else "optuna"
        if style not in ("hypertune", "optuna"):
            raise InvalidArgumentError(
                f'trials_dataframe: style: expected "hypertune" or "optuna", got {style!r}'
            )
        groups = _column_groups(attrs, style)
        trials = self.trials(states)
        params = [p.name for p in self.spec.parameters]
        declared = [m.name for m in self.spec.metrics]
        metrics = list(declared)
        attributes: set[str] = set()
        curves: dict[str, set[int]] = {}  # metric -> its steps
        notes: dict[int, dict[str, Any]] = {}  # trial id -> its user_attrs
        for trial in trials:
            params += [name for name in trial.params if name not in params]
            metrics += [name for name in trial.metrics if name not in metrics]
            notes[trial.id] = _imported_user_attrs(trial)
            attributes.update(notes[trial.id])
            for measurement in trial.proto.measurements:
                for name in measurement.metrics:
                    curves.setdefault(name, set()).add(measurement.step)
        # An import's copies of user attributes as metrics: shown once.
        copies = {
            name for name in metrics
            if name not in declared and _attribute_of_copy(name) in attributes
        }
        metrics = [name for name in metrics if name not in copies]
        curve_metrics = [name for name in metrics if name in curves]
        curve_metrics += sorted(
            name for name in curves if name not in metrics and name not in copies
        )
        intermediate_columns = [
            (name, step) for name in curve_metrics for step in sorted(curves[name])
        ] if intermediate else []
        keys = sorted(attributes)
        constrained = any(m.role == pb.MetricSpec.CONSTRAINT for m in self.spec.metrics)
        objectives = self.objectives if style == "optuna" else []
        others = [name for name in metrics if name not in objectives]
        rows = []
        for trial in trials:
            values, final = trial.params, trial.metrics
            reported = {
                (name, m.step): value
                for m in trial.proto.measurements
                for name, value in m.metrics.items()
            }
            has_result = trial.proto.HasField("final_measurement") and trial.state in (
                "COMPLETED", "STOPPED")
            feasible = trial.feasible
            if feasible is None and has_result and not constrained:
                feasible = True
            if not has_result:
                feasible = None
            curve = [reported.get(column) for column in intermediate_columns]
            attrs = [notes[trial.id].get(key) for key in keys]
            if style == "optuna":
                rows.append(
                    [trial.number]
                    + [final.get(name) for name in objectives]
                    + [trial.start_time, trial.end_time]
                    + [values.get(name) for name in params]
                    + attrs
                    + [_OPTUNA_STATES.get(trial.state, trial.state), feasible]
                    + [final.get(name) for name in others]
                    + curve
                )
                continue
            steps = [m.step for m in trial.proto.measurements]
            if trial.proto.HasField("final_measurement"):
                steps.append(trial.proto.final_measurement.step)
            rows.append(
                [trial.state]
                + [values.get(name) for name in params]
                + [final.get(name) for name in metrics]
                + [
                    max(steps) if steps else None,
                    trial.proto.final_measurement.elapsed_seconds
                    if trial.proto.HasField("final_measurement")
                    else None,
                    trial.start_time,
                    trial.end_time,
                    trial.client_id,
                    trial.infeasible_reason,
                    feasible,
                ]
                + attrs
                + curve
            )
        curve_names = [f"intermediate_{name}_{step}" for name, step in intermediate_columns]
        attribute_names = [f"user_attrs_{key}" for key in keys]
        if style == "optuna":
            if len(objectives) == 1:
                value_names = ["value"]
            else:
                value_names = [f"values_{_optuna_value_name(name)}" for name in objectives]
            columns = ["number", *value_names, "datetime_start", "datetime_complete",
                       *[f"params_{name}" for name in params], *attribute_names, "state",
                       "feasible", *[f"metrics_{name}" for name in others], *curve_names]
            frame = pandas.DataFrame(rows, columns=columns)
            for name in ("datetime_start", "datetime_complete"):
                frame[name] = pandas.to_datetime(frame[name], utc=True)
            frame.insert(
                frame.columns.get_loc("datetime_complete") + 1,
                "duration",
                frame["datetime_complete"] - frame["datetime_start"],
            )
            if groups is not None:
                frame = frame[[c for c in frame.columns if _column_group(c) in groups]]
            return frame
        columns = ["state", *params, *metrics, "step", "elapsed_seconds", "start_time",
                   "end_time", "client_id", "infeasible_reason", "feasible",
                   *attribute_names, *curve_names]
        frame = pandas.DataFrame(
            rows, columns=columns, index=pandas.Index([t.id for t in trials], name="id")
        )
        for name in ("start_time", "end_time"):
            frame[name] = pandas.to_datetime(frame[name], utc=True)
        return frame

    # ----- The trials to run -----

    def _hold(self, proto: pb.Trial, slot: _client_ids.SharedSlot) -> Trial:
        client = self._client
        renew_every = None
        if client.heartbeats:
            renew_every = client.heartbeat_interval or renewal_interval(self.spec.lease_seconds)
        return Trial(client, proto, self.spec, held=True, renew_every=renew_every, slot=slot)

    def _suggest(self, count: int, client_id: str) -> pb.SuggestTrialsResponse:
        request = pb.SuggestTrialsRequest(study_name=self.name, count=count, client_id=client_id)
        # Asking again under the same client id returns the same trials.
        response = self._transport.call("SuggestTrials", request)
        self._proto.state = response.study_state
        return response

    def suggest(self, count: int = 1) -> list[Trial]:
        """Asks for up to ``count`` trials to run now, held by this process
        (their leases renewed in the background until they are finished).
        Returns fewer, or none, at the study's parallel limit, while it is
        paused, or once its budget is spent (then :attr:`state` is
        COMPLETED)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InvalidArgumentError(f"count: expected an integer >= 1, got {count!r}")
        slot = _client_ids.acquire(self._client.client_id)
        try:
            response = self._suggest(count, slot.client_id)
        except BaseException:
            slot.release()
            raise
        shared = _client_ids.SharedSlot(slot, len(response.trials))
        return [self._hold(trial, shared) for trial in response.trials]

    def ask(self) -> Optional[Trial]:
        """The next trial to run, held by this process (its lease renewed
        in the background until it is finished), or None once the study is
        COMPLETED (its budget spent). Waits (0.2 s doubling to 2 s) while
        the study is at its parallel limit or paused.

        Threads may ask concurrently: each gets a trial of its own. A
        promoted ASHA trial comes back with its :attr:`Trial.checkpoint_uri`
        and measurements, to resume from.
        """
        return self._ask()

    def _ask(
        self, stop: Optional[threading.Event] = None, deadline: Optional[float] = None
    ) -> Optional[Trial]:
        """ask(), which also answers None once ``stop`` is set or the
        monotonic clock passes ``deadline`` (optimize's study.stop() and
        timeout), instead of waiting on."""
        slot = _client_ids.acquire(self._client.client_id)
        wait = _WAIT_INITIAL
        try:
            while True:
                response = self._suggest(1, slot.client_id)
                if response.trials:
                    return self._hold(response.trials[0], _client_ids.SharedSlot(slot, 1))
                if response.study_state == pb.Study.COMPLETED:
                    slot.release()
                    return None
                if deadline is not None:
                    wait = min(wait, deadline - time.monotonic())
                if (stop is not None and stop.is_set()) or wait <= 0:
                    slot.release()
                    return None
                if stop is not None:
                    stop.wait(wait)
                else:
                    time.sleep(wait)
                wait = min(_WAIT_MAX, wait * 2)
        except BaseException:
            slot.release()
            raise

    # ----- Trials of one's own choosing -----

    def enqueue(
        self,
        params: Optional[Mapping[str, Any]] = None,
        *,
        fixed: Optional[Mapping[str, Any]] = None,
        attributes: Optional[Mapping[str, Any]] = None,
    ) -> Trial:
        """Queues a trial of one's own choosing (like Optuna's
        ``enqueue_trial``): the next worker to ask gets it, before any new
        suggestion. Returns it, REQUESTED (a record: it only reads).

        Give either ``params``, a whole configuration (a value for each
        parameter active under it, conditional ones included, and no
        other), or ``fixed``, a part of one: the study's algorithm suggests
        the other parameters at once, from the trials so far, and the trial
        is queued whole. ``attributes`` are noted
        on the trial as :meth:`Trial.set_attribute` notes them (any JSON
        value).

        Raises:
            InvalidArgumentError (a ValueError): neither or both of
                ``params`` and ``fixed``; a parameter the study lacks, one
                missing from ``params``, one inactive under the others, or
                a value of the wrong type or out of bounds, each named.
        """
        if (params is None) == (fixed is None):
            raise InvalidArgumentError(
                "enqueue: give either params (a whole configuration) or fixed (a part of one)"
            )
        partial = params is None
        given = fixed if partial else params
        where = f"enqueue: {'fixed' if partial else 'params'}"
        if not isinstance(given, Mapping):
            raise InvalidArgumentError(f"{where}: expected a dict, got {_describe(given)}")
        specs = {p.name: p for p in self.spec.parameters}
        unknown = [name for name in given if name not in specs]
        if unknown:
            raise InvalidArgumentError(
                f"{where}: unknown parameter {_names(unknown)}; the study's parameters are "
                + _names(specs)
            )
        active = _active(self.spec, given)
        inactive = [name for name in given if active[name] is False]
        if inactive:
            raise InvalidArgumentError(
                f"{where}: parameter {_names(inactive)} is not active under the values given "
                "(its parent's value does not enable it); leave it out"
            )
        missing = [name for name, on in active.items() if on and name not in given]
        if missing and not partial:
            raise InvalidArgumentError(
                f"{where}: missing parameter {_names(missing)}; a whole configuration has every "
                "active parameter (enqueue(fixed=...) lets the server suggest the others)"
            )
        trial = pb.Trial(
            state=pb.Trial.REQUESTED,
            parameters=[
                _parameter_value(spec, given[name], where)
                for name, spec in specs.items()
                if name in given
            ],
            attributes=encode_attributes(attributes or {}, "enqueue: attributes"),
        )
        request = pb.CreateTrialRequest(study_name=self.name, trial=trial, partial=partial)
        # Not retried: a lost reply after the trial was queued would queue it twice.
        return self._record(self._transport.call("CreateTrial", request, idempotent=False))

    def stop(self) -> None:
        """Ends the :meth:`optimize` running on this Study object once its
        running trials finish (like Optuna's ``study.stop()``): no trial
        starts after the call. Call it from the objective or a callback.

        Raises:
            FailedPreconditionError: no optimize is running on this object.
        """
        self._stops.stop_all(self.name)

    def optimize(
        self,
        fn: Callable[[Trial], Union[float, dict[str, float], None]],
        n_trials: Optional[int] = None,
        n_workers: int = 1,
        catch: tuple[type[BaseException], ...] = (),
        *,
        timeout: Optional[float] = None,
        callbacks: Optional[Sequence[Callable[[Study, Trial], Any]]] = None,
        show_progress_bar: bool = False,
        infeasible: tuple[type[BaseException], ...] = (),
        n_jobs: Optional[int] = None,
    ) -> None:
        """Runs ``fn`` on trials of the study, as Optuna's optimize does.

        ``fn(trial)`` trains with ``trial.params`` (or, as an Optuna
        objective, ``trial.suggest_float(...)`` and its kin, which check the
        call against the study's space) and returns the objective's value,
        a dict of metrics, or (several objectives) a tuple of their values
        in the order of :attr:`objectives`; it may also report
        intermediate values, watch ``trial.should_stop`` and finish the trial
        itself; raising :class:`hypertune.TrialPruned` (or Optuna's) once
        ``trial.should_prune()`` keeps the trial STOPPED with its last
        reported metrics, and the run goes on. ``n_workers`` (or Optuna's
        ``n_jobs``, -1 for one per CPU) threads run trials at once, until
        ``n_trials`` trials have run in this call (as in Optuna: this many
        more; None: until the study's budget is spent), ``timeout`` seconds
        have passed (no trial starts after that; running ones finish), or
        :meth:`stop` is called. The study's budget (``max_trials``,
        ``max_device_hours``) caps the call: when it ends the call before
        ``n_trials`` trials ran, a warning says so and how to raise it.

        What ``fn`` ends with settles its trial:

        - a value or dict: COMPLETED (a NaN or infinite metric:
          INFEASIBLE);
        - an exception: FAILED with its type and message, left out of the
          model (Optuna's FAIL); INFEASIBLE instead, a region the optimizer
          avoids, for :class:`hypertune.Infeasible`, out of memory
          (MemoryError, torch.cuda.OutOfMemoryError), FloatingPointError
          and the classes in ``infeasible``. Exceptions in ``catch`` (a
          class or a tuple of them) are
          recorded and the run goes on; any other is recorded and raised
          here, once the other threads' running trials are done;
        - a BrokenPipeError (stdout closed) or a lost server: the trial is
          given back to run again, not judged;
        - KeyboardInterrupt (Ctrl-C): the trials being run are given back
          (preempted, not failed) and KeyboardInterrupt is raised; calling
          optimize again continues the study, those trials first.

        A trial handed over after its worker was lost (this or another
        process) comes back as a new attempt (:attr:`Trial.attempt`): ``fn``
        resumes from :attr:`Trial.checkpoint_uri` at
        ``trial.checkpoint_step + 1``, or starts afresh at step 1.

        Each callback is called as ``callback(study, trial)`` in the calling
        thread after each trial ends (COMPLETED, STOPPED, INFEASIBLE or
        FAILED by a caught exception, or PAUSED at an ASHA rung; not the
        trial whose exception ends the run, nor one given back or whose
        lease was lost), with the trial as the server last returned it; it
        may call ``study.stop()``. An exception from a callback ends the
        run as one from ``fn`` does (the trial's result is stored already).
        ``show_progress_bar`` shows a tqdm bar (Debian: python3-tqdm) on
        stderr with the best value so far; without tqdm, a warning and no
        bar.
        """
        optimize(
            self,
            fn,
            ask=self._ask,
            stops=self._stops,
            n_trials=n_trials,
            n_workers=workers(n_workers, n_jobs),
            catch=catch,
            timeout=timeout,
            callbacks=callbacks,
            show_progress_bar=show_progress_bar,
            infeasible=infeasible,
        )
