"""An Optuna sampler whose suggestions come from hypertune's optimizer, so
that an Optuna script runs on hypertuned with one changed line::

    import hypertune.optuna

    study = optuna.create_study(sampler=hypertune.optuna.Sampler(server="localhost:50051"))
    study.optimize(objective, n_trials=100)

Each Optuna trial is one trial of a hypertune study (named as the Optuna
study, or ``study_name``), which the server's algorithm (GP_BANDIT by
default) suggests and which holds the result, so that hypertune's CLI and
dashboard show the study as it runs. docs/optuna-bridge.md says what maps
to what and where the mapping stops.

How a define-by-run space is learned: the first ``startup_trials`` Optuna
trials are sampled by the independent sampler (random by default) while
the bridge watches the distributions the objective asks for. Then the
server infers the space from those trials (InferOptunaSpace: the one
mapping, which ``hypertune import-optuna`` uses too; the order in which a
trial lists its parameters does not matter) and the bridge creates the
hypertune study over it: a parameter asked for only in some trials
becomes a conditional parameter of the parameter whose values tell when
it is asked for. The startup trials are recorded in the
study, and every later trial is suggested by it. The server lets a
parameter's range widen and its values grow, so a distribution that widens
widens the study; it does not let parameters be added, so one first asked
for after the study was created is served by the independent sampler, and
its values kept in the hypertune trial's attributes.

Needs Optuna (Debian: python3-optuna; written against Optuna 3.1).

Thread safety: a Sampler may serve a study optimized with ``n_jobs`` > 1.
Its state is guarded by a lock; each Optuna trial holds a hypertune trial
of its own; suggestions are asked for one at a time, so that a trial the
bridge queues to record it is taken by the thread that queued it.
"""

from __future__ import annotations

import json
import math
import re
import threading
import warnings
from collections.abc import Sequence
from typing import Any, Optional

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    IntDistribution,
)
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial, TrialState

from hypertune import _server_info, _space
from hypertune._proto import pb
from hypertune.client import Client
from hypertune.errors import AlreadyExistsError, InvalidArgumentError, NotFoundError
from hypertune.study import Study
from hypertune.trial import Trial

#: The hypertune trial attribute that names the Optuna trial it records.
TRIAL_NUMBER_ATTRIBUTE = "optuna.trial_number"
#: The attribute holding, as JSON, the values Optuna used that the
#: hypertune trial does not hold (a parameter the study lacks, or one it
#: held inactive).
OTHER_PARAMS_ATTRIBUTE = "optuna.other_params"

#: The stop reason of the STOPPED trial, without a result, that records an
#: Optuna trial pruned before it reported anything.
PRUNED_WITHOUT_VALUE = "Optuna trial {number} was pruned before any intermediate value"
_PRUNED_WITHOUT_VALUE = re.compile(r"^Optuna trial (\d+) was pruned before any intermediate value")

#: The failure reason of the FAILED trial that records an Optuna trial
#: whose state is FAIL.
FAILED_REASON = (
    "Optuna trial {number} failed (FAIL: an exception, or a NaN value; Optuna does not tell "
    "the sampler which)"
)

_FINISHED = (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


category_label = _space.category_label
spec_dict = _space.spec_dict


def parameter_spec(
    client: Client, name: str, distribution: BaseDistribution
) -> tuple[Optional[dict], str]:
    """The hypertune ParameterSpec (as a config dict) that the server maps
    an Optuna distribution to (InferOptunaSpace, service/rpc/optuna_space.h),
    and "" ; or None and why hypertune cannot hold it."""
    request = pb.InferOptunaSpaceRequest(
        distributions=[optuna.distributions.distribution_to_json(distribution)]
    )
    trial = request.trials.add(number=0, state="COMPLETE")
    low = 0.0 if isinstance(distribution, CategoricalDistribution) else distribution.low
    trial.params.add(name=name, distribution=0, value=float(low))
    try:
        answer = client.transport.call("InferOptunaSpace", request)
    except InvalidArgumentError as error:
        return None, str(error)
    mapped = answer.parameters[0].spec
    if mapped.name != name:
        return None, _NOT_AN_IDENTIFIER.format(name=mapped.name)
    return spec_dict(mapped), ""


_NOT_AN_IDENTIFIER = (
    'hypertune parameter names are identifiers (a letter or "_", then letters, digits and '
    '"._-"): the server would name it {name!r}'
)


_kind = _space.kind_of


def _domain_equal(a: dict, b: dict) -> bool:
    kind = _kind(a)
    return kind == _kind(b) and a[kind] == b[kind]


def widened(old: dict, new: dict, max_values: Optional[int] = None) -> Optional[dict]:
    """``old`` (a ParameterSpec dict, with its conditions) grown to take in
    ``new``'s domain too, as the server's UpdateStudy allows (ranges widen,
    value lists grow, kind and scale stay); None when the kinds or scales
    differ, or the values would pass ``max_values`` (the server's
    max_values_per_parameter). Equal to ``old`` when ``new`` adds nothing."""
    kind = _kind(old)
    if kind != _kind(new):
        return None
    grown = json.loads(json.dumps(old))
    o, n = old[kind], new[kind]
    if kind in ("double_spec", "integer_spec"):
        if o.get("scale", "LINEAR") != n.get("scale", "LINEAR"):
            return None
        grown[kind]["min"] = min(o["min"], n["min"])
        grown[kind]["max"] = max(o["max"], n["max"])
    elif kind == "discrete_spec":
        values = sorted(set(o["values"]) | set(n["values"]))
        if max_values is not None and len(values) > max_values:
            return None
        grown[kind]["values"] = values
    else:
        values = list(o["values"]) + [v for v in n["values"] if v not in o["values"]]
        if max_values is not None and len(values) > max_values:
            return None
        grown[kind]["values"] = values
    return grown


def to_optuna(value: Any, distribution: BaseDistribution) -> tuple[bool, Any]:
    """(True, the value as ``distribution`` takes it) for a hypertune
    trial's value, or (False, None) where the distribution does not hold it
    (another range, a choice it lacks)."""
    if isinstance(distribution, CategoricalDistribution):
        for choice in distribution.choices:
            if isinstance(value, str):
                if category_label(choice) == value:
                    return True, choice
            elif _is_number(choice) and _close(float(choice), float(value)):
                return True, choice  # numeric choices are a DISCRETE parameter
        return False, None
    if isinstance(value, str):
        return False, None
    if isinstance(distribution, IntDistribution):
        if float(value) != int(value):
            return False, None
        number: Any = int(value)
    else:
        number = float(value)
    return bool(distribution._contains(distribution.to_internal_repr(number))), number


def to_parameter_value(name: str, value: Any, spec: dict) -> pb.ParameterValue:
    """Optuna's ``value`` of parameter ``name`` as the ParameterValue that
    ``spec`` (its ParameterSpec dict) takes."""
    kind = _kind(spec)
    if kind == "categorical_spec":
        return pb.ParameterValue(name=name, string_value=category_label(value))
    if kind == "integer_spec":
        return pb.ParameterValue(name=name, int_value=int(value))
    return pb.ParameterValue(name=name, double_value=float(value))


def _in_domain(value: Any, spec: dict) -> bool:
    kind = _kind(spec)
    domain = spec[kind]
    if kind == "categorical_spec":
        return category_label(value) in domain["values"]
    if isinstance(value, (str, bool)) or value is None:
        return False
    if kind == "discrete_spec":
        return any(_close(float(value), v) for v in domain["values"])
    return domain["min"] <= value <= domain["max"]


def _same_value(optuna_value: Any, hypertune_value: Any, spec: dict) -> bool:
    if _kind(spec) == "categorical_spec":
        return category_label(optuna_value) == hypertune_value
    if isinstance(optuna_value, str) or isinstance(hypertune_value, str):
        return False
    return _close(float(optuna_value), float(hypertune_value))


_close = _space.close


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _space_request(
    trials: Sequence[FrozenTrial], leave_out: set[str]
) -> pb.InferOptunaSpaceRequest:
    """``trials`` as InferOptunaSpace takes them (without the parameters
    named in ``leave_out``)."""
    request = pb.InferOptunaSpaceRequest()
    index: dict[str, int] = {}
    for trial in trials:
        sent = request.trials.add(number=trial.number, state=trial.state.name)
        for name, distribution in trial.distributions.items():
            if name in leave_out:
                continue
            text = optuna.distributions.distribution_to_json(distribution)
            if text not in index:
                index[text] = len(request.distributions)
                request.distributions.append(text)
            param = sent.params.add(name=name, distribution=index[text])
            try:
                param.value = float(distribution.to_internal_repr(trial.params[name]))
            except (KeyError, TypeError, ValueError) as error:
                param.problem = f"parameter {name!r}: {error!r}"
    return request


_PARAMETER_NAMED = re.compile(r'parameter "((?:[^"\\]|\\.)*)"')


def infer_parameters(
    trials: Sequence[FrozenTrial], client: Client
) -> tuple[list[dict], dict[str, str]]:
    """The hypertune parameters of the space ``trials`` asked for, as the
    server infers it (InferOptunaSpace: parents before their children,
    whatever order a trial lists its parameters in), and the parameters
    left out with why: those the server leaves out, those whose name it
    would change (not an identifier) with their children, and one whose
    distributions it refuses (another kind in some trials, choices that
    read alike)."""
    left_out: dict[str, str] = {}
    while True:
        if not any(set(t.distributions) - set(left_out) for t in trials):
            return [], left_out
        try:
            answer = client.transport.call(
                "InferOptunaSpace", _space_request(trials, set(left_out))
            )
            break
        except InvalidArgumentError as error:
            named = _PARAMETER_NAMED.search(str(error))
            if named is None or named.group(1) in left_out:
                raise
            left_out[named.group(1)] = str(error)
    for gone in answer.left_out:
        left_out[gone.optuna_name] = gone.reason
    dropped: set[str] = set()  # spec names
    parameters = []
    for parameter in answer.parameters:
        spec = parameter.spec
        if spec.name != parameter.optuna_name:
            left_out[parameter.optuna_name] = _NOT_AN_IDENTIFIER.format(name=spec.name)
            dropped.add(spec.name)
        elif spec.parent in dropped:
            left_out[parameter.optuna_name] = f"its parent {spec.parent!r} is left out"
            dropped.add(spec.name)
        else:
            parameters.append(spec_dict(spec))
    return parameters, left_out


def _active(specs: dict[str, dict], values: dict[str, Any]) -> set[str]:
    """The parameters of ``specs`` (in spec order) that are active for
    Optuna's ``values``: unconditional ones, and those whose parent is
    active and holds one of their categories."""
    active: set[str] = set()
    for name, spec in specs.items():
        parent = spec.get("parent")
        if not parent:
            active.add(name)
        elif parent in active and parent in values:
            value = values[parent]
            if category_label(value) in spec.get("parent_categories", []):
                active.add(name)
            elif not isinstance(value, str) and float(value) in spec.get("parent_values", []):
                active.add(name)  # a study made elsewhere, with a numeric parent
    return active


class Sampler(BaseSampler):
    """An Optuna sampler backed by a hypertune study.

    Args:
        server: hypertuned's ``HOST:PORT`` (as for :class:`hypertune.Client`;
            default ``$HYPERTUNE_SERVER``, else 127.0.0.1:50051). Ignored
            when ``client`` is given.
        study_name: the hypertune study; default the Optuna study's name.
            An existing study of that name is continued (its spec as it
            is); otherwise it is created once the space is learned.
        client: a :class:`hypertune.Client` to use instead of one of
            ``server``'s.
        algorithm: the study's algorithm when the bridge creates it:
            GP_BANDIT (default), TPE, RANDOM or QUASI_RANDOM.
        startup_trials: Optuna trials sampled by ``independent_sampler``
            before the study is created from the distributions they asked
            for (at least 1; more trials see more branches of a
            define-by-run space).
        independent_sampler: samples what hypertune does not: the startup
            trials, and parameters the study lacks; default Optuna's
            RandomSampler(seed).
        seed: the hypertune study's seed and the default independent
            sampler's.
    """

    def __init__(
        self,
        server: Optional[str] = None,
        study_name: Optional[str] = None,
        *,
        client: Optional[Client] = None,
        algorithm: str = "GP_BANDIT",
        startup_trials: int = 4,
        independent_sampler: Optional[BaseSampler] = None,
        seed: Optional[int] = None,
    ):
        if algorithm not in ("GP_BANDIT", "TPE", "RANDOM", "QUASI_RANDOM"):
            raise InvalidArgumentError(
                f"algorithm: expected GP_BANDIT, TPE, RANDOM or QUASI_RANDOM, got {algorithm!r}"
            )
        if not isinstance(startup_trials, int) or isinstance(startup_trials, bool) or (
            startup_trials < 1
        ):
            raise InvalidArgumentError(
                f"startup_trials: expected an integer >= 1, got {startup_trials!r}"
            )
        self._owns_client = client is None
        self._client = client if client is not None else Client(server)
        self._study_name = study_name
        self._algorithm = algorithm
        self._startup_trials = startup_trials
        self._independent = independent_sampler or RandomSampler(seed=seed)
        self._seed = seed
        self._lock = threading.RLock()
        self._queue_lock = threading.Lock()
        self._study: Optional[Study] = None
        # The study's parameters as config dicts, in spec order.
        self._specs: dict[str, dict] = {}
        # The distribution each parameter had in the latest Optuna trial
        # that asked for it.
        self._last_seen: dict[str, BaseDistribution] = {}
        # Optuna trial numbers the study records.
        self._recorded: set[int] = set()
        # Optuna trial id -> the hypertune trial suggested for it.
        self._held: dict[int, Trial] = {}
        # Startup trials that ended, by number, until the study is created.
        self._pending: dict[int, FrozenTrial] = {}
        self._warned: set[str] = set()
        # (name, distribution JSON) -> parameter_spec's answer.
        self._mapped: dict[tuple[str, str], tuple[Optional[dict], str]] = {}

    # ----- What it is -----

    @property
    def client(self) -> Client:
        return self._client

    @property
    def hypertune_study(self) -> Optional[Study]:
        """The hypertune study, once created or found (None during the
        startup trials)."""
        return self._study

    def close(self) -> None:
        """Closes the client the sampler made (not one it was given)."""
        if self._owns_client:
            self._client.close()

    def reseed_rng(self) -> None:
        self._independent.reseed_rng()

    # ----- Optuna's protocol -----

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        """The study's unconditional parameters whose distribution is the
        one Optuna last asked for (so that Optuna takes hypertune's joint
        suggestion for them); empty during the startup trials. Creates the
        hypertune study once ``startup_trials`` trials have finished."""
        with self._lock:
            if self._study is None:
                self._open(study)
            if self._study is None:
                return {}
            space = {}
            for name, spec in self._specs.items():
                seen = self._last_seen.get(name)
                if spec.get("parent") or seen is None:
                    continue
                mapped, _ = self._map(name, seen)
                if mapped is not None and _domain_equal(mapped, spec):
                    space[name] = seen
            return space

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        """Asks the hypertune study for this Optuna trial's hypertune trial
        (held until :meth:`after_trial`) and returns its values for
        ``search_space``."""
        with self._lock:
            hypertune_study = self._study
        if hypertune_study is None:
            return {}
        # Not between another thread's queueing of a trial to record and its
        # taking it: queued trials are handed out first.
        with self._queue_lock:
            held = hypertune_study.ask()
        if held is None:
            self._warn_once(
                "completed",
                f"hypertune study {hypertune_study.name!r} is COMPLETED (its budget is spent): "
                "the independent sampler samples the rest",
            )
            return {}
        with self._lock:
            self._held[trial._trial_id] = held
        values = {}
        suggested = held.params
        for name, distribution in search_space.items():
            if name in suggested:
                fits, value = to_optuna(suggested[name], distribution)
                if fits:
                    values[name] = value
        return values

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        """The held hypertune trial's value where it has one that
        ``param_distribution`` holds (a conditional parameter, a widened
        range); otherwise the independent sampler's. A distribution wider
        than the study's parameter widens the study."""
        with self._lock:
            held = self._held.get(trial._trial_id)
            if self._study is not None:
                self._widen(param_name, param_distribution)
        if held is not None:
            suggested = held.params
            if param_name in suggested:
                fits, value = to_optuna(suggested[param_name], param_distribution)
                if fits:
                    return value
        return self._independent.sample_independent(study, trial, param_name, param_distribution)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Optional[Sequence[float]],
    ) -> None:
        """Tells hypertune how the trial ended: COMPLETE -> COMPLETED with
        the value(s), PRUNED -> STOPPED at its last intermediate value
        (without a result where it reported none), FAIL -> FAILED (left out
        of the model, as Optuna's samplers leave FAIL out); a value of
        ±inf makes it INFEASIBLE. The intermediate values are reported as
        measurements first."""
        with self._lock:
            for name, distribution in trial.distributions.items():
                self._last_seen[name] = distribution
                if self._study is not None and name in self._specs:
                    self._widen(name, distribution)
            held = self._held.pop(trial._trial_id, None)
            hypertune_study = self._study
            # Optuna stores the trial's end after this call.
            finished = _with_state(trial, state, values)
            if hypertune_study is None:
                # A startup trial: recorded when the study is created (which
                # may read the storage before this trial's end is in it).
                self._pending[trial.number] = finished
                return
        if held is None and trial.number in self._recorded:
            return
        if held is not None:
            if self._agrees(held, finished):
                self._finish(held, finished, self._other_params(held, finished))
                with self._lock:
                    self._recorded.add(trial.number)
                return
            # Optuna ran values other than hypertune's (an enqueued trial,
            # a distribution narrower than the study's): the suggestion was
            # not evaluated, so it is given back (FAILED: the study's
            # max_retries is 0), and the trial as run is recorded instead.
            held.give_back(f"Optuna trial {trial.number} ran other values; recorded apart")
        self._record(finished)

    # ----- The hypertune study -----

    def _open(self, study: optuna.Study) -> None:
        """Finds the hypertune study, or creates it once enough trials have
        finished. REQUIRES: self._lock held."""
        name = self._study_name or study.study_name
        try:
            found = self._client.get_study(name)
        except NotFoundError:
            found = None
        except InvalidArgumentError as error:  # GetStudy judges the name alone
            raise InvalidArgumentError(
                f"hypertune.optuna.Sampler: study name {name!r}: {error}; pass study_name= "
                "a name of letters, digits and '._-'"
            ) from None
        if found is not None:
            self._load(found, study)
            return
        by_number = dict(self._pending)
        by_number.update((t.number, t) for t in study.get_trials(deepcopy=False, states=_FINISHED))
        finished = [by_number[number] for number in sorted(by_number)]
        if len(finished) < self._startup_trials:
            return
        parameters, left_out = infer_parameters(finished, self._client)
        for param, why in left_out.items():
            self._warn_once(
                f"left:{param}",
                f"parameter {param!r} is sampled by the independent sampler: {why}",
            )
        if not parameters:
            self._warn_once("empty", "no parameter hypertune can hold was asked for yet")
            return
        directions = study.directions
        metrics = [
            {
                "name": metric,
                "goal": "MAXIMIZE" if direction == StudyDirection.MAXIMIZE else "MINIMIZE",
                **({"role": "OBJECTIVE"} if len(directions) > 1 else {}),
            }
            for metric, direction in zip(_metric_names(len(directions)), directions)
        ]
        config = {
            "name": name,
            "spec": {
                "parameters": parameters,
                "metrics": metrics,
                "algorithm": self._algorithm,
                # No retries: Optuna runs a trial once.
                "max_retries": 0,
                **({"seed": self._seed} if self._seed is not None else {}),
            },
            "attributes": {
                "optuna.study": study.study_name[: self._limits().max_attribute_value_bytes]
            },
        }
        try:
            created = self._client.create_study(config)
        except AlreadyExistsError:
            created = self._client.get_study(name)  # another process was first
        except InvalidArgumentError as error:
            raise InvalidArgumentError(
                f"hypertune.optuna.Sampler: cannot create hypertune study {name!r}: {error}"
            ) from None
        self._load(created, study)
        for trial in finished:
            if trial.number not in self._recorded:
                self._record(trial)
        self._pending.clear()

    def _load(self, hypertune_study: Study, study: optuna.Study) -> None:
        """Takes ``hypertune_study`` as the study, and what it already
        records. REQUIRES: self._lock held."""
        names = [m.name for m in hypertune_study.spec.metrics]
        expected = _metric_names(len(study.directions))
        if names[: len(expected)] != expected:
            raise InvalidArgumentError(
                f"hypertune study {hypertune_study.name!r}: its metrics ({', '.join(names)}) are "
                f"not the Optuna study's objectives ({', '.join(expected)}); choose another "
                "study_name"
            )
        self._study = hypertune_study
        self._specs = {p.name: spec_dict(p) for p in hypertune_study.spec.parameters}
        for trial in hypertune_study.trials():
            number = optuna_trial_number(trial)
            if number is not None:
                self._recorded.add(number)
        for trial in study.get_trials(deepcopy=False):
            for name, distribution in trial.distributions.items():
                self._last_seen[name] = distribution

    def _limits(self) -> pb.ServerLimits:
        return _server_info.limits(self._client)

    def _map(self, name: str, distribution: BaseDistribution) -> tuple[Optional[dict], str]:
        """parameter_spec, asked of the server once per distribution."""
        key = (name, optuna.distributions.distribution_to_json(distribution))
        if key not in self._mapped:
            self._mapped[key] = parameter_spec(self._client, name, distribution)
        return self._mapped[key]

    def _widen(self, name: str, distribution: BaseDistribution) -> None:
        """Widens the study's parameter ``name`` to ``distribution`` where
        it is narrower and the server allows it. REQUIRES: self._lock held."""
        spec = self._specs.get(name)
        if spec is None:
            if self._study is not None:
                self._warn_once(
                    f"new:{name}",
                    f"parameter {name!r} was first asked for after hypertune study "
                    f"{self._study.name!r} was created (the server adds no parameters to a "
                    "study): the independent sampler samples it, and the trials keep its "
                    f"values in their {OTHER_PARAMS_ATTRIBUTE!r} attribute",
                )
            return
        mapped, _ = self._map(name, distribution)
        if mapped is None:
            return
        grown = widened(spec, mapped, self._limits().max_values_per_parameter)
        if grown is None:
            self._warn_once(
                f"kind:{name}",
                f"parameter {name!r}: Optuna asks for a {type(distribution).__name__} of another "
                "kind or scale than the hypertune study's; the independent sampler samples it",
            )
            return
        if grown == spec:
            return
        specs = dict(self._specs)
        specs[name] = grown
        assert self._study is not None
        self._study.update(parameters=list(specs.values()))
        self._specs = specs

    # ----- Recording a trial -----

    def _agrees(self, held: Trial, trial: FrozenTrial) -> bool:
        """Whether Optuna used the held trial's value for every parameter
        both hold."""
        suggested = held.params
        for name, value in trial.params.items():
            spec = self._specs.get(name)
            if spec is None or name not in suggested:
                continue
            if not _same_value(value, suggested[name], spec):
                return False
        return True

    def _other_params(self, held: Optional[Trial], trial: FrozenTrial) -> dict[str, Any]:
        """Optuna's values that the hypertune trial does not hold."""
        holds = held.params if held is not None else {}
        if held is None:
            holds = {
                n: v for n, v in trial.params.items()
                if n in self._specs and n in _active(self._specs, trial.params)
            }
        return {n: v for n, v in trial.params.items() if n not in holds}

    def _record(self, trial: FrozenTrial) -> None:
        """Records an Optuna trial whose values hypertune did not suggest
        (a startup trial, an enqueued one): COMPLETE as a completed trial
        with those values; PRUNED, FAIL and an infinite value as a trial
        queued with those values, taken, and finished as :meth:`_finish`
        does. Not recorded
        (with a warning) if it lacks a value the study needs."""
        assert self._study is not None
        with self._lock:
            for name, distribution in trial.distributions.items():
                if name in self._specs:
                    self._widen(name, distribution)
            specs = dict(self._specs)
        active = _active(specs, trial.params)
        missing = [n for n in specs if n in active and n not in trial.params]
        outside = [
            n for n in specs
            if n in active and n in trial.params and not _in_domain(trial.params[n], specs[n])
        ]
        if missing or outside:
            problem = (
                f"it has no value for {', '.join(missing)}" if missing
                else f"its value of {', '.join(outside)} is outside the study's domain"
            )
            self._warn_once(
                f"unrecorded:{trial.number}",
                f"Optuna trial {trial.number} is not recorded in hypertune study "
                f"{self._study.name!r}: {problem}",
            )
            return
        parameters = [
            to_parameter_value(n, trial.params[n], specs[n]) for n in specs if n in active
        ]
        attributes = _attributes(
            trial.number, self._other_params(None, trial), self._limits().max_attribute_value_bytes
        )
        name = self._study.name
        if trial.state == TrialState.COMPLETE and all(math.isfinite(v) for v in trial.values):
            final = pb.Measurement(
                step=trial.last_step or 0,
                metrics=dict(zip(_metric_names(len(trial.values)), trial.values)),
            )
            proto = pb.Trial(
                state=pb.Trial.COMPLETED, parameters=parameters,
                final_measurement=final, attributes=attributes,
            )
            self._client.transport.call(
                "CreateTrial", pb.CreateTrialRequest(study_name=name, trial=proto),
                idempotent=False,
            )
        else:
            proto = pb.Trial(state=pb.Trial.REQUESTED, parameters=parameters)
            # One queued at a time, so that this thread takes its own.
            with self._queue_lock:
                queued = self._client.transport.call(
                    "CreateTrial", pb.CreateTrialRequest(study_name=name, trial=proto),
                    idempotent=False,
                )
                taken = self._study.ask()
            if taken is None or taken.id != queued.id:
                # Another worker of the study took it first; ours is let be.
                if taken is not None:
                    taken.give_back("taken by mistake by the Optuna bridge", preempted=True)
                self._client.transport.call("StopTrial", pb.StopTrialRequest(
                    study_name=name, trial_id=queued.id,
                    reason=f"Optuna trial {trial.number} ({trial.state.name}); recorded only"))
            else:
                self._finish(taken, trial, self._other_params(None, trial))
        with self._lock:
            self._recorded.add(trial.number)

    def _finish(self, held: Trial, trial: FrozenTrial, other_params: dict[str, Any]) -> None:
        """Reports ``trial``'s intermediate values on ``held`` and finishes
        it in the state that matches Optuna's."""
        for key, value in _attributes(
            trial.number, other_params, self._limits().max_attribute_value_bytes
        ).items():
            held.set_attribute(key, value)
        objective = held.objective
        assert self._study is not None
        single = len(self._study.objectives) == 1
        if single:
            for step, value in sorted(trial.intermediate_values.items()):
                if math.isfinite(value):
                    held.report(step, {objective: value})
        if trial.state == TrialState.COMPLETE:
            names = _metric_names(len(trial.values))
            held.complete(dict(zip(names, trial.values)))
        elif trial.state == TrialState.PRUNED:
            if trial.values and single:
                self._client.transport.call("StopTrial", pb.StopTrialRequest(
                    study_name=held.study_name, trial_id=held.id, reason="pruned by Optuna"))
                held.complete({objective: trial.values[0]})
            else:
                # STOPPED without a result (the model leaves it out). A trial
                # given back keeps no attributes, so its stop reason names it.
                self._client.transport.call("StopTrial", pb.StopTrialRequest(
                    study_name=held.study_name, trial_id=held.id,
                    reason=PRUNED_WITHOUT_VALUE.format(number=trial.number)))
                held.give_back("pruned by Optuna")
        else:
            # FAILED, left out of the model as Optuna's samplers leave FAIL
            # out. Optuna 3.1 gives after_trial FAIL and no values for an
            # exception, a NaN and a KeyboardInterrupt alike, and records
            # why only after this call, so the bridge cannot tell them apart.
            held.fail(FAILED_REASON.format(number=trial.number))

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"hypertune.optuna: {message}", stacklevel=3)


def optuna_trial_number(trial: Trial) -> Optional[int]:
    """The number of the Optuna trial that hypertune ``trial`` records, or
    None (a suggestion Optuna did not run, a trial of other clients)."""
    number = trial.attributes.get(TRIAL_NUMBER_ATTRIBUTE)
    if number is not None and number.isdigit():
        return int(number)
    matched = _PRUNED_WITHOUT_VALUE.match(trial.stop_reason)
    return int(matched.group(1)) if matched else None


def _metric_names(count: int) -> list[str]:
    """The hypertune metrics of an Optuna study's objectives: "value" for
    one, "value_0", "value_1", ... for several."""
    return ["value"] if count == 1 else [f"value_{i}" for i in range(count)]


def _attributes(number: int, other_params: dict[str, Any], max_bytes: int) -> dict[str, str]:
    """The attributes of the hypertune trial recording Optuna trial
    ``number``; the other parameters only when their JSON fits ``max_bytes``
    (the server's max_attribute_value_bytes)."""
    attributes = {TRIAL_NUMBER_ATTRIBUTE: str(number)}
    if other_params:
        text = json.dumps(other_params, default=repr, sort_keys=True)
        if len(text.encode()) <= max_bytes:
            attributes[OTHER_PARAMS_ATTRIBUTE] = text
    return attributes


def _with_state(
    trial: FrozenTrial, state: TrialState, values: Optional[Sequence[float]]
) -> FrozenTrial:
    """``trial`` (still RUNNING when after_trial sees it) with the state and
    values it is about to be stored with."""
    finished = FrozenTrial(
        number=trial.number, state=state, value=None,
        values=list(values) if values is not None else None,
        datetime_start=trial.datetime_start, datetime_complete=trial.datetime_complete,
        params=trial.params, distributions=trial.distributions,
        user_attrs=trial.user_attrs, system_attrs=trial.system_attrs,
        intermediate_values=trial.intermediate_values, trial_id=trial._trial_id,
    )
    return finished


__all__ = ["FAILED_REASON", "OTHER_PARAMS_ATTRIBUTE", "PRUNED_WITHOUT_VALUE",
           "TRIAL_NUMBER_ATTRIBUTE", "Sampler", "category_label", "infer_parameters",
           "optuna_trial_number", "parameter_spec", "spec_dict", "to_optuna", "widened"]
