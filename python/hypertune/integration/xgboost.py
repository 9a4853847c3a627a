"""An XGBoost training callback that reports each boosting round's
evaluation metric to a hypertune trial and stops training when the study's
early stopping stops the trial (or pauses it at an ASHA rung)::

    import xgboost as xgb
    from hypertune.integration.xgboost import HypertuneCallback

    with study.ask() as trial:                 # an exception: FAILED
        history = {}
        xgb.train({"eta": trial.params["eta"], "objective": "binary:logistic"},
                  dtrain, num_boost_round=200, evals=[(dvalid, "validation")],
                  evals_result=history,
                  callbacks=[HypertuneCallback(trial, "validation-logloss")])
        trial.complete(logloss=history["validation"]["logloss"][-1])

or with the scikit-learn wrapper::

    model = xgb.XGBClassifier(n_estimators=200, eval_metric="logloss",
                              callbacks=[HypertuneCallback(trial, "validation_0-logloss")])
    model.fit(X, y, eval_set=[(X_valid, y_valid)])

After round ``epoch`` (0-based) the callback reports the value of
``observation_key`` (``"<evaluation name>-<metric>"``, as Optuna's
XGBoostPruningCallback names it; default: the last evaluation set's last
metric, the one XGBoost's own early stopping watches) as the trial's metric
``metric`` (default: the study's objective) at step ``epoch + 1``, the
rounds trained. Once :attr:`Trial.should_stop` says the service stopped
the trial, it returns True, which ends XGBoost's training after that
round: the booster holds the rounds trained, and the trial, completed by
the caller with its last metrics, becomes STOPPED as a pruned trial does.
With ``raise_pruned=True`` it raises :class:`hypertune.TrialPruned`
instead, as Optuna's callback raises its TrialPruned: ``Study.optimize``
or the trial's ``with`` block then completes the trial with its last
reported metrics (STOPPED).

Without a ``trial`` the callback reports to
:func:`hypertune.current_trial`, the trial of the `hypertune worker` that
started the program. ``xgboost.cv`` works too: its mean over the folds is
reported (its evaluation names are ``"train"`` and ``"test"``).
scikit-learn's ``clone`` (and ``copy.deepcopy``) copies the callback with
the same trial: a trial is a handle to the service's, never copied.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

import xgboost

from hypertune.current import current_trial
from hypertune.errors import InvalidArgumentError
from hypertune.trial import TrialPruned

if TYPE_CHECKING:
    from hypertune.trial import Trial


def _latest(values: Any) -> float:
    """The last value of an evaluation log's list: a number, or for
    ``xgboost.cv`` a (mean, std) pair, of which the mean."""
    last = values[-1]
    if isinstance(last, (tuple, list)):
        last = last[0]
    return float(last)


class HypertuneCallback(xgboost.callback.TrainingCallback):
    """Reports ``observation_key`` after each boosting round to ``trial``
    (default :func:`hypertune.current_trial`) and stops training when the
    study stops the trial. See the module's documentation.

    Attributes:
        stopped_round: the number of rounds trained when the study stopped
            the trial, or None.
    """

    def __init__(self, trial: Optional[Trial] = None, observation_key: Optional[str] = None,
                 *, metric: Optional[str] = None, raise_pruned: bool = False):
        super().__init__()
        self.trial = trial
        self.observation_key = observation_key
        self.metric = metric
        self.raise_pruned = raise_pruned
        self.stopped_round: Optional[int] = None
        # The last step the trial holds, read when training starts.
        self._last_step: Optional[int] = None

    def __deepcopy__(self, memo: dict) -> HypertuneCallback:
        # scikit-learn's clone deep-copies an estimator's callbacks; the
        # copy reports to the same trial.
        return HypertuneCallback(self.trial, self.observation_key, metric=self.metric,
                                 raise_pruned=self.raise_pruned)

    def _trial(self) -> Trial:
        trial = self.trial if self.trial is not None else current_trial()
        if trial is None:
            raise InvalidArgumentError(
                "HypertuneCallback: no trial: pass one (study.ask()), or run the program "
                "under `hypertune worker`, whose trial hypertune.current_trial() is")
        return trial

    def _value(self, evals_log: Mapping[str, Mapping[str, Any]]) -> tuple[str, float]:
        """The key observed and its value after this round."""
        available = [f"{data}-{name}" for data, metrics in evals_log.items() for name in metrics]
        if not available:
            raise InvalidArgumentError(
                "HypertuneCallback: XGBoost evaluates nothing; give xgboost.train evals=[(dvalid, "
                "\"validation\")] (the scikit-learn wrapper: fit(..., eval_set=[(X, y)]))")
        key = self.observation_key or available[-1]
        data, _, name = key.partition("-")
        if data not in evals_log or name not in evals_log[data]:
            raise InvalidArgumentError(
                f"HypertuneCallback: observation_key {key!r} is not evaluated; the keys are "
                + ", ".join(repr(k) for k in available))
        return key, _latest(evals_log[data][name])

    def before_training(self, model: Any) -> Any:
        self.stopped_round = None
        # A trial resumed without its checkpoint has steps already; the
        # server refuses lower ones.
        self._last_step = max((m.step for m in self._trial().measurements), default=0)
        return model

    def after_iteration(self, model: Any, epoch: int,
                        evals_log: Mapping[str, Mapping[str, Any]]) -> bool:
        trial = self._trial()
        key, value = self._value(evals_log)
        step = int(epoch) + 1
        if self._last_step is None:
            self._last_step = max((m.step for m in trial.measurements), default=0)
        if step > self._last_step:
            if math.isnan(value):
                # Diverged: the parameters' fault (the trial INFEASIBLE).
                raise FloatingPointError(
                    f"HypertuneCallback: {key} is NaN after round {step}")
            trial.report(step, {self.metric or trial.objective or key: value})
            self._last_step = step
        if not trial.should_stop:
            return False
        self.stopped_round = step
        if self.raise_pruned:
            raise TrialPruned(f"trial {trial.id} stopped by the study after round {step}")
        return True


__all__ = ["HypertuneCallback"]
