"""Hugging Face Transformers' hyperparameter search on a hypertune study.

:func:`run_hp_search` has the shape of Transformers' search backends
(``run_hp_search_optuna(trainer, n_trials, direction, **kwargs)``, which
``Trainer.hyperparameter_search`` calls, returning a ``BestRun``), with the
search space and objective passed in, since Transformers' enum of backends
(``HPSearchBackend``) cannot name one more::

    from hypertune.integration.transformers import run_hp_search

    best = run_hp_search(
        trainer, n_trials=20, direction="minimize",
        hp_space=[{"name": "learning_rate",
                   "double_spec": {"min": 1e-6, "max": 1e-3, "scale": "LOG"}},
                  {"name": "per_device_train_batch_size",
                   "discrete_spec": {"values": [16, 32, 64]}}],
        server="127.0.0.1:50051", study_name="bert-sst2")
    print(best.run_id, best.objective, best.hyperparameters)

Each trial's parameters that are fields of ``trainer.args`` (a
``TrainingArguments``) are set there; a ``model_init`` taking one argument
is handed the :class:`hypertune.Trial`, so that model parameters come from
``trial.params``. During training :class:`HypertuneTrainerCallback`
reports each evaluation's objective to the trial and sets
``control.should_training_stop`` when the service stops it early.

Transformers is imported only if installed, for its ``TrainerCallback``
base class and ``BestRun``; without it the same duck-typed classes serve
(a trainer needs ``args``, ``state``, ``control``, ``train()``,
``evaluate()``, ``add_callback`` and ``remove_callback``).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from hypertune.client import Client
from hypertune.errors import InvalidArgumentError

if TYPE_CHECKING:
    from hypertune.study import Study
    from hypertune.trial import Trial

try:
    from transformers import TrainerCallback as _CallbackBase
except ImportError:
    _CallbackBase = object


@dataclass(frozen=True)
class _BestRun:
    """Transformers' BestRun, where Transformers is not installed."""

    run_id: str
    objective: Union[float, list[float]]
    hyperparameters: dict[str, Any]
    run_summary: Optional[Any] = None


try:
    from transformers.trainer_utils import BestRun
except ImportError:
    BestRun = _BestRun  # type: ignore[misc, assignment]

# Transformers' speed metrics, left out of the default objective.
_SPEED_SUFFIXES = ("_runtime", "_per_second", "_samples_per_second", "_steps_per_second")


def default_compute_objective(metrics: Mapping[str, float]) -> float:
    """What Transformers' default objective is: the evaluation loss when it
    is the only metric, else the sum of the other metrics (``epoch`` and
    the speed metrics left out)."""
    rest = {name: value for name, value in metrics.items()
            if name not in ("eval_loss", "epoch") and not name.endswith(_SPEED_SUFFIXES)}
    if rest:
        return float(sum(rest.values()))
    if "eval_loss" not in metrics:
        raise InvalidArgumentError(
            "compute_objective: the evaluation returned no eval_loss and no other metric: "
            + ", ".join(metrics)
        )
    return float(metrics["eval_loss"])


class HypertuneTrainerCallback(_CallbackBase):  # type: ignore[misc, valid-type]
    """A TrainerCallback (``transformers.TrainerCallback`` when installed)
    that reports ``compute_objective(metrics)`` of each evaluation to
    ``trial`` as its metric ``metric`` (default: the study's objective) at
    step ``state.global_step``, and sets ``control.should_training_stop``
    when :attr:`Trial.should_stop` says the service stopped or paused the
    trial. An evaluation at a step already reported (the final one after
    training, or any step of a resumed trial up to those it had recorded)
    is kept as :attr:`objective` but not reported again."""

    def __init__(
        self,
        trial: Trial,
        compute_objective: Optional[Callable[[Mapping[str, float]], float]] = None,
        metric: Optional[str] = None,
    ):
        self.trial = trial
        self.compute_objective = compute_objective or default_compute_objective
        self.metric = metric or trial.objective
        #: The latest evaluation's objective, or None before one.
        self.objective: Optional[float] = None
        # A resumed trial (promoted by ASHA, or handed over by a lost
        # worker) has steps recorded already; the server refuses lower ones.
        self._last_step: Optional[int] = max((m.step for m in trial.measurements), default=None)

    def on_evaluate(self, args: Any, state: Any, control: Any,
                    metrics: Optional[Mapping[str, float]] = None, **kwargs: Any) -> Any:
        if not metrics:
            return control
        self.objective = float(self.compute_objective(dict(metrics)))
        step = int(state.global_step)
        if self._last_step is None or step > self._last_step:
            self.trial.report(step, {self.metric: self.objective})
            self._last_step = step
        if self.trial.should_stop:
            control.should_training_stop = True
        return control


def _goal(direction: Any) -> str:
    if not isinstance(direction, str) or direction.lower() not in ("minimize", "maximize"):
        raise InvalidArgumentError(
            f'direction: expected "minimize" or "maximize", got {direction!r} (one objective)'
        )
    return direction.upper()


def _search_space(hp_space: Any) -> list:
    space = hp_space() if callable(hp_space) else hp_space
    if not isinstance(space, list) or not space or not all(isinstance(p, dict) for p in space):
        raise InvalidArgumentError(
            "hp_space: expected a list of parameter dicts as in a study config, e.g. "
            '[{"name": "learning_rate", "double_spec": {"min": 1e-5, "max": 1e-3, '
            '"scale": "LOG"}}] (or a function returning one), got ' + repr(space)[:80]
        )
    return space


def _takes_trial(model_init: Any) -> bool:
    try:
        return len(inspect.signature(model_init).parameters) == 1
    except (TypeError, ValueError):
        return False


def _apply(trainer: Any, trial: Trial) -> Callable[[], None]:
    """Sets the trial's parameters on ``trainer.args`` and hands a one-
    argument ``model_init`` the trial; returns what undoes both."""
    args = trainer.args
    saved = {name: getattr(args, name) for name in trial.params if hasattr(args, name)}
    for name in saved:
        setattr(args, name, trial.params[name])
    original_init = getattr(trainer, "model_init", None)
    if original_init is not None and _takes_trial(original_init):
        # Trainer calls a zero-argument model_init with nothing.
        trainer.model_init = lambda: original_init(trial)

    def undo() -> None:
        for name, value in saved.items():
            setattr(args, name, value)
        if original_init is not None:
            trainer.model_init = original_init

    return undo


def run_hp_search(
    trainer: Any,
    n_trials: int,
    direction: str = "minimize",
    hp_space: Union[list, Callable[[], list], None] = None,
    compute_objective: Optional[Callable[[Mapping[str, float]], float]] = None,
    *,
    server: Optional[str] = None,
    study_name: str = "transformers-search",
    metric: str = "objective",
    client: Optional[Client] = None,
    **spec: Any,
) -> Any:
    """Runs up to ``n_trials`` trainings of ``trainer`` on trials of the
    study ``study_name`` and returns the study's best as a ``BestRun``
    (``run_id``: the trial id; ``objective``; ``hyperparameters``).

    ``hp_space``: the study's parameters, as in a study config (a list, or a
    function returning it). ``compute_objective(metrics)``: the value
    optimized toward ``direction`` from an evaluation's metrics (default:
    ``trainer.compute_objective`` if set, else as Transformers' default:
    :func:`default_compute_objective`), recorded as the metric ``metric``.
    The study is created on ``server`` (or through ``client``), or reused
    if it exists with the same spec; ``spec`` adds fields to it
    (``algorithm="GP_BANDIT"``, ``seed=0``, ``early_stopping={...}``).

    Each training runs in the trial's ``with`` block: an exception marks the
    trial FAILED (INFEASIBLE for out of memory and the other errors the
    parameters cause) and is raised here. Without an evaluation during
    training, ``trainer.evaluate()`` is called once it ends. A study whose
    budget is spent ends the search early. No checkpoint is kept: a trial
    paused at an ASHA rung and promoted later is trained again from the
    start (reporting only past the steps it had recorded).
    """
    if hp_space is None:
        raise InvalidArgumentError("hp_space: the search space is required (a list of parameters)")
    if isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 1:
        raise InvalidArgumentError(f"n_trials: expected an integer >= 1, got {n_trials!r}")
    objective_of = compute_objective or getattr(trainer, "compute_objective", None) \
        or default_compute_objective
    config = {
        "name": study_name,
        "spec": {"parameters": _search_space(hp_space),
                 "metrics": [{"name": metric, "goal": _goal(direction)}], **spec},
    }
    own_client = client is None
    connected = client if client is not None else Client(server)
    try:
        study = connected.create_study(config, if_exists="load")
        for _ in range(n_trials):
            trial = study.ask()
            if trial is None:
                break
            _train_one(trainer, trial, objective_of, metric)
        return _best_run(study)
    finally:
        if own_client:
            connected.close()


def _train_one(trainer: Any, trial: Trial, objective_of: Callable, metric: str) -> None:
    callback = HypertuneTrainerCallback(trial, objective_of, metric)
    undo = _apply(trainer, trial)
    trainer.add_callback(callback)
    try:
        with trial:
            trainer.train()
            if callback.objective is None:
                # No evaluation during training. A Trainer's evaluate()
                # calls on_evaluate itself; a look-alike's may not.
                metrics = trainer.evaluate()
                if callback.objective is None and metrics:
                    callback.on_evaluate(trainer.args, trainer.state, trainer.control,
                                         metrics=metrics)
            if callback.objective is None:
                raise InvalidArgumentError(
                    f"trial {trial.id}: trainer.evaluate() returned no metrics"
                )
            trial.complete({metric: callback.objective})
    finally:
        trainer.remove_callback(callback)
        undo()


def _best_run(study: Study) -> Any:
    best = study.best()
    if best is None:
        raise InvalidArgumentError(
            f"study {study.name!r}: no trial completed, so there is no best run"
        )
    return BestRun(str(best.id), best.value, best.params)
