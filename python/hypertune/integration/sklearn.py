"""A scikit-learn search estimator whose trials are hypertune trials, in
the manner of Optuna's ``OptunaSearchCV`` and scikit-learn's
``RandomizedSearchCV``::

    from sklearn.linear_model import LogisticRegression
    from hypertune.integration.sklearn import HypertuneSearchCV

    search = HypertuneSearchCV(
        LogisticRegression(max_iter=500),
        {"C": {"double_spec": {"min": 1e-3, "max": 1e3, "scale": "LOG"}},
         "penalty": ["l1", "l2"], "solver": ["liblinear"]},
        n_trials=30, cv=5, n_jobs=2, server="127.0.0.1:50051")
    search.fit(X, y)
    search.best_params_, search.best_score_, search.predict(X_test)

Each candidate is a trial of a study on hypertuned (``study_``): the
service suggests the parameters, the search cross-validates them and
completes the trial with the mean test score of each metric, so the study
is what the dashboard, ``hypertune trials`` and ``study.trials_dataframe()``
show. ``cv_results_`` has the keys of ``GridSearchCV``'s, one row per trial
this ``fit`` ran to an outcome, in trial order (``trials_`` holds the
trials of the rows).

What a trial's cross-validation ends with settles it:

- every fold scored: COMPLETED with the folds' mean (STOPPED when the
  study's early stopping stopped it, with ``enable_pruning``);
- a fold's fit or scoring raised: with ``error_score`` a number, that
  number is the fold's score, as in scikit-learn; with ``error_score=nan``
  (the default) the trial is INFEASIBLE, its reason the exception (the
  parameters cannot work: the optimizer steers away); with
  ``error_score="raise"`` the trial is FAILED and the exception raised from
  ``fit``;
- Ctrl-C (KeyboardInterrupt) or SIGTERM: the trials running are given
  back (preempted, not failed) and the interruption raised from ``fit``; a
  later ``fit`` on the same ``study_name`` runs them again first.

Clone-safety: the constructor only stores its arguments (scikit-learn's
rule), and ``sklearn.base.clone`` copies every one of them but a
:class:`hypertune.Client` or :class:`hypertune.Study`, a connection, which
the clone shares (so a clone runs on the same study). A fitted search pickles without its connection: ``study_``,
``trials_`` and ``best_trial_`` are left out (``study_name_`` is kept).

docs/sklearn-xgboost.md says what maps from scikit-learn and Optuna and
what does not.
"""

from __future__ import annotations

import math
import numbers
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Optional

import numpy as np
from scipy.stats import rankdata
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone, is_classifier
from sklearn.metrics import check_scoring, get_scorer
from sklearn.model_selection import check_cv
from sklearn.utils import check_random_state, indexable
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from hypertune import _space
from hypertune.client import Client
from hypertune.errors import InvalidArgumentError
from hypertune.study import Study
from hypertune.trial import Trial, describe_error

#: The name of the one metric's columns in ``cv_results_`` (scikit-learn's).
SINGLE_METRIC = "score"

# scipy.stats distributions (RandomizedSearchCV's) that hypertune holds:
# name -> (kind, scale).
_SCIPY_DISTRIBUTIONS = {
    "uniform": ("double_spec", "LINEAR"),
    "loguniform": ("double_spec", "LOG"),
    "reciprocal": ("double_spec", "LOG"),
    "randint": ("integer_spec", "LINEAR"),
}

# Trial states that end a row of cv_results_.
_RESULT_STATES = ("COMPLETED", "STOPPED", "INFEASIBLE")


def _identity(value: Any) -> Any:
    return value


def _choice_decoder(choices: Sequence[Any]) -> Callable[[Any], Any]:
    """Maps a trial's value back to the choice it stands for: a category's
    label (``_space.category_label``) or a DISCRETE number, to the object
    given (``None``, ``True``, ``3`` stay what they were)."""
    by_label = {_space.category_label(c): c for c in choices}

    def decode(value: Any) -> Any:
        if isinstance(value, str):
            return by_label.get(value, value)
        for choice in choices:
            if _is_number(choice) and _space.close(float(choice), float(value)):
                return choice
        return value

    return decode


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _choices_spec(name: str, choices: Sequence[Any]) -> dict:
    """A list of values: DISCRETE when all are numbers (ordered, as the
    optimizer should see ``C: [0.1, 1, 10]``), else CATEGORICAL over their
    labels."""
    if not choices:
        raise InvalidArgumentError(f"param_distributions[{name!r}]: an empty list of values")
    if all(_is_number(c) for c in choices):
        values = sorted({float(c) for c in choices})
        if len(values) > _space.MAX_VALUES:
            raise InvalidArgumentError(
                f"param_distributions[{name!r}]: more than {_space.MAX_VALUES} values")
        return {"name": name, "discrete_spec": {"values": values}}
    spec, why = _space.categorical_spec(name, choices)
    if spec is None:
        raise InvalidArgumentError(f"param_distributions[{name!r}]: {why}")
    return spec


def _optuna_spec(name: str, distribution: Any) -> Optional[dict]:
    """An Optuna distribution (FloatDistribution, IntDistribution,
    CategoricalDistribution, matched by their fields without importing
    Optuna) through the client's one Optuna mapping (_space.py); None
    when ``distribution`` is not one."""
    kind = type(distribution).__name__
    if not kind.endswith("Distribution"):
        return None
    if hasattr(distribution, "choices"):
        spec, why = _space.categorical_spec(name, list(distribution.choices))
    elif kind.startswith("Int"):
        spec, why = _space.int_spec(name, int(distribution.low), int(distribution.high),
                                    int(getattr(distribution, "step", 1) or 1),
                                    bool(getattr(distribution, "log", False)))
    elif hasattr(distribution, "low"):
        spec, why = _space.float_spec(name, float(distribution.low), float(distribution.high),
                                      getattr(distribution, "step", None),
                                      bool(getattr(distribution, "log", False)))
    else:
        return None
    if spec is None:
        raise InvalidArgumentError(f"param_distributions[{name!r}]: {kind}: {why}")
    return spec


def _scipy_spec(name: str, frozen: Any) -> Optional[dict]:
    """A frozen scipy.stats distribution (RandomizedSearchCV's) as a
    range: uniform, loguniform (reciprocal) and randint map; None when
    ``frozen`` is not one; any other distribution is refused by name."""
    dist = getattr(frozen, "dist", None)
    if dist is None or not hasattr(frozen, "support"):
        return None
    found = _SCIPY_DISTRIBUTIONS.get(getattr(dist, "name", ""))
    if found is None:
        raise InvalidArgumentError(
            f"param_distributions[{name!r}]: scipy.stats.{getattr(dist, 'name', dist)} has no "
            "hypertune range; uniform, loguniform (reciprocal) and randint map, or give a "
            "hypertune spec such as {\"double_spec\": {\"min\": ..., \"max\": ...}}")
    kind, scale = found
    low, high = frozen.support()
    if kind == "integer_spec":
        return {"name": name, kind: {"min": int(low), "max": int(high), "scale": scale}}
    return {"name": name, kind: {"min": float(low), "max": float(high), "scale": scale}}


def search_space(param_distributions: Any) -> tuple[list[dict], dict[str, Callable]]:
    """The study's parameters for ``param_distributions`` and, per
    parameter, the function from a trial's value to the estimator's.

    ``param_distributions`` is a list of parameter dicts as a study config
    holds them (conditional ones too), or a dict from the estimator's
    parameter name to its domain: a hypertune spec (``{"double_spec":
    {...}}``), a list of values (numbers: DISCRETE; else CATEGORICAL, the
    values given back as they were), an Optuna distribution, or a frozen
    scipy.stats uniform, loguniform or randint.

    Raises:
        InvalidArgumentError: a domain of none of these forms, named.
    """
    if isinstance(param_distributions, (list, tuple)) and all(
            isinstance(p, Mapping) and "name" in p for p in param_distributions):
        specs = [dict(p) for p in param_distributions]
        return specs, {p["name"]: _identity for p in specs}
    if not isinstance(param_distributions, Mapping) or not param_distributions:
        raise InvalidArgumentError(
            "param_distributions: expected a dict of parameter name -> domain, or a list of "
            "parameter dicts as in a study config, got " + repr(param_distributions)[:80])
    specs: list[dict] = []
    decoders: dict[str, Callable] = {}
    for name, domain in param_distributions.items():
        decoders[name] = _identity
        if isinstance(domain, Mapping):
            kinds = [k for k in _space.KINDS if k in domain]
            if len(kinds) != 1:
                raise InvalidArgumentError(
                    f"param_distributions[{name!r}]: expected one of " + ", ".join(_space.KINDS)
                    + f", got {dict(domain)!r}")
            specs.append({"name": name, **domain})
            continue
        if isinstance(domain, (list, tuple, np.ndarray)):
            choices = list(domain)
            specs.append(_choices_spec(name, choices))
            decoders[name] = _choice_decoder(choices)
            continue
        spec = _optuna_spec(name, domain)
        if spec is not None and "categorical_spec" in spec:
            decoders[name] = _choice_decoder(list(domain.choices))
        if spec is None:
            spec = _scipy_spec(name, domain)
        if spec is None:
            raise InvalidArgumentError(
                f"param_distributions[{name!r}]: {type(domain).__name__} {domain!r} is not a "
                "domain; give a hypertune spec ({\"double_spec\": {\"min\": 0, \"max\": 1}}), "
                "a list of values, an Optuna distribution or a scipy.stats uniform, "
                "loguniform or randint")
        specs.append(spec)
    return specs, decoders


def _rows(data: Any, indices: np.ndarray) -> Any:
    """The rows ``indices`` of an array, a DataFrame, a sparse matrix or a
    list."""
    if data is None:
        return None
    if hasattr(data, "iloc"):
        return data.iloc[indices]
    if hasattr(data, "shape"):
        return data[indices]
    return [data[i] for i in indices]


def _rank(means: np.ndarray) -> np.ndarray:
    """scikit-learn's rank of the mean scores: 1 for the highest, ties the
    lowest rank, NaN last."""
    if np.isnan(means).all():
        return np.ones(len(means), dtype=np.int32)
    filled = np.where(np.isnan(means), np.nanmin(means) - 1, means)
    return rankdata(-filled, method="min").astype(np.int32)


class _Fold:
    """One split's data, cut once and shared by every trial (read only)."""

    def __init__(self, X: Any, y: Any, train: np.ndarray, test: np.ndarray,
                 fit_params: Mapping[str, Any], n_samples: int):
        self.X_train, self.X_test = _rows(X, train), _rows(X, test)
        self.y_train, self.y_test = _rows(y, train), _rows(y, test)
        # Sample-aligned fit parameters (sample_weight) follow the split,
        # as scikit-learn's do; any other is passed as it is.
        self.fit_params = {
            key: _rows(value, train) if hasattr(value, "__len__") and not isinstance(value, str)
            and len(value) == n_samples else value
            for key, value in fit_params.items()
        }


class _Record:
    """What one trial's cross-validation gave: per fold and metric the
    test (and train) scores, fit and score seconds."""

    def __init__(self, trial: Trial, params: dict, metrics: Sequence[str], n_folds: int):
        self.trial = trial
        self.params = params
        self.test = {m: np.full(n_folds, np.nan) for m in metrics}
        self.train = {m: np.full(n_folds, np.nan) for m in metrics}
        self.fit_time = np.zeros(n_folds)
        self.score_time = np.zeros(n_folds)
        self.errors: list[BaseException] = []

    def means(self) -> dict[str, float]:
        return {m: float(np.mean(scores)) for m, scores in self.test.items()}


def _estimator_has(attr: str) -> Callable[[Any], bool]:
    """available_if's check: the refitted best estimator has ``attr``, or,
    before ``fit``, the estimator searched."""

    def check(self: Any) -> bool:
        if hasattr(self, "best_estimator_"):
            getattr(self.best_estimator_, attr)
        else:
            getattr(self.estimator, attr)
        return True

    return check


def _delegate(name: str) -> Any:
    """The search's method ``name``: ``best_estimator_``'s, present when
    the estimator has it."""

    def method(self: Any, X: Any) -> Any:
        check_is_fitted(self, "best_estimator_")
        return getattr(self.best_estimator_, name)(X)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"``best_estimator_.{name}(X)``."
    return available_if(_estimator_has(name))(method)


class HypertuneSearchCV(MetaEstimatorMixin, BaseEstimator):
    """Hyperparameter search with cross-validation, each candidate a trial
    of a hypertune study.

    Args:
        estimator: the scikit-learn estimator searched (cloned per fold).
        param_distributions: the search space (see :func:`search_space`);
            None with a ``study`` given: the study's space.
        n_trials: trials this ``fit`` runs (as many more on a reused study).
        timeout: seconds after which no trial starts (running ones finish).
        cv: scikit-learn's ``cv`` (None: 5-fold, stratified for
            classifiers).
        scoring: None (the estimator's ``score``), a scorer name or
            callable; several (a list of names or a dict name -> scorer)
            make a multi-metric search, whose ``refit`` names the metric
            optimized (the others recorded) or, False or a callable, makes
            them all objectives of the study (a Pareto search).
        n_jobs: trials run at once, each by a thread holding its own
            hypertune trial (-1: one per CPU; None: 1). Folds run in turn.
        refit: refit the best parameters on the whole data
            (``best_estimator_``): True, a metric's name (multi-metric), a
            callable ``refit(cv_results_) -> best_index_``, or False.
        error_score: a fold's score when its fit or scoring raises; NaN
            (default) marks the trial INFEASIBLE, "raise" raises.
        return_train_score: also score each fold's training data.
        random_state: the study's seed (an int, or a RandomState drawn
            from); None: the server's default.
        enable_pruning: train with ``partial_fit`` up to ``max_iter``
            iterations, report each iteration's mean CV score and stop
            when the study's early stopping says so (the trial STOPPED).
        max_iter: iterations of ``partial_fit`` with ``enable_pruning``.
        early_stopping: the ``early_stopping`` of a study created here,
            as in a study config (default with ``enable_pruning``:
            ``{"rule": "MEDIAN"}``, Optuna's default pruner).
        study: a :class:`hypertune.Study` to run on (its space must hold
            ``param_distributions``' domains); a clone shares it.
        study_name: the study to create or load (same spec) on the
            server; default a new ``sklearn-<Estimator>-<random>`` per fit.
        client: a :class:`hypertune.Client` (a clone shares it); or
        server: ``HOST:PORT`` of hypertuned (default
            ``$HYPERTUNE_SERVER``, else 127.0.0.1:50051).
        algorithm: the study's algorithm ("GP_BANDIT", "TPE", "RANDOM",
            "QUASI_RANDOM", "GRID"); None: the server's default.

    Attributes (after ``fit``): ``cv_results_``, ``best_index_``,
    ``best_score_``, ``best_params_``, ``best_estimator_`` (with
    ``refit``), ``refit_time_``, ``n_splits_``, ``scorer_``,
    ``multimetric_``, ``study_``, ``study_name_``, ``trials_`` (the trial
    of each row), ``best_trial_``, ``n_trials_``, ``classes_``,
    ``n_features_in_``.
    """

    # scikit-learn's rule: the constructor stores its arguments only, and
    # fit sets the fitted attributes (name_).
    # pylint: disable=attribute-defined-outside-init

    def __init__(
        self,
        estimator: Any,
        param_distributions: Any = None,
        *,
        n_trials: int = 10,
        timeout: Optional[float] = None,
        cv: Any = None,
        scoring: Any = None,
        n_jobs: Optional[int] = None,
        refit: Any = True,
        error_score: Any = np.nan,
        return_train_score: bool = False,
        random_state: Any = None,
        enable_pruning: bool = False,
        max_iter: int = 1000,
        early_stopping: Optional[Mapping[str, Any]] = None,
        study: Optional[Study] = None,
        study_name: Optional[str] = None,
        client: Optional[Client] = None,
        server: Optional[str] = None,
        algorithm: Optional[str] = None,
    ):
        self.estimator = estimator
        self.param_distributions = param_distributions
        self.n_trials = n_trials
        self.timeout = timeout
        self.cv = cv
        self.scoring = scoring
        self.n_jobs = n_jobs
        self.refit = refit
        self.error_score = error_score
        self.return_train_score = return_train_score
        self.random_state = random_state
        self.enable_pruning = enable_pruning
        self.max_iter = max_iter
        self.early_stopping = early_stopping
        self.study = study
        self.study_name = study_name
        self.client = client
        self.server = server
        self.algorithm = algorithm

    # ----- What fit reads of its arguments -----

    def _scorers(self) -> tuple[dict[str, Callable], bool]:
        """The scorers by metric name, and whether there are several."""
        scoring = self.scoring
        if scoring is None or isinstance(scoring, str) or callable(scoring):
            return {SINGLE_METRIC: check_scoring(self.estimator, scoring)}, False
        if isinstance(scoring, (list, tuple, set)):
            names = list(scoring)
            if not names or not all(isinstance(n, str) for n in names) or \
                    len(set(names)) != len(names):
                raise InvalidArgumentError(
                    f"scoring: expected distinct scorer names, got {scoring!r}")
            return {n: get_scorer(n) for n in names}, True
        if isinstance(scoring, Mapping) and scoring:
            return {k: get_scorer(v) if isinstance(v, str) else v
                    for k, v in scoring.items()}, True
        raise InvalidArgumentError(
            "scoring: expected None, a scorer name or callable, a list of names or a dict "
            f"name -> scorer, got {scoring!r}")

    def _objectives(self, names: list[str], multimetric: bool) -> list[str]:
        """The metrics the study optimizes: the one; with several, the
        ``refit`` one, or all of them when ``refit`` is False or a
        callable."""
        if not multimetric:
            return names
        refit = self.refit
        if isinstance(refit, str):
            if refit not in names:
                raise InvalidArgumentError(
                    f"refit: {refit!r} is not one of the scorers ({', '.join(names)})")
            return [refit]
        if refit is True:
            raise InvalidArgumentError(
                "refit: with several scorers, name the one to refit on (refit='accuracy'), "
                "give a callable refit(cv_results_) -> best index, or False")
        return names

    def _metric_names(self, names: list[str], multimetric: bool) -> dict[str, str]:
        """cv_results_' metric name -> the study's: the scorers' names; the
        one metric is named after its scorer when that is a name."""
        if not multimetric and isinstance(self.scoring, str):
            return {SINGLE_METRIC: self.scoring}
        return {name: name for name in names}

    def _seed(self) -> Optional[int]:
        if self.random_state is None:
            return None
        if isinstance(self.random_state, numbers.Integral) and not isinstance(
                self.random_state, bool):
            return int(self.random_state)
        return int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))

    def _open_study(self, specs: Optional[list[dict]], metrics: list[dict]) -> Study:
        """The study given, else the one created (or loaded) on the
        server."""
        if self.study is not None:
            _check_study_space(self.study, specs)
            held = {m.name for m in self.study.spec.metrics}
            missing = [m["name"] for m in metrics if m["name"] not in held]
            if missing:
                raise InvalidArgumentError(
                    f"study: study {self.study.name!r} has no metric "
                    + ", ".join(repr(m) for m in missing) + " (its metrics: "
                    + ", ".join(repr(m) for m in sorted(held)) + ")")
            return self.study
        if specs is None:
            raise InvalidArgumentError(
                "param_distributions: required unless a study is given (whose space is used)")
        spec: dict[str, Any] = {"parameters": specs, "metrics": metrics}
        seed = self._seed()
        if seed is not None:
            spec["seed"] = seed
        if self.algorithm is not None:
            spec["algorithm"] = self.algorithm
        if self.early_stopping is not None:
            spec["early_stopping"] = dict(self.early_stopping)
        elif self.enable_pruning:
            spec["early_stopping"] = {"rule": "MEDIAN"}
        name = self.study_name or (
            f"sklearn-{type(self.estimator).__name__}-{uuid.uuid4().hex[:8]}")
        client = self.client if self.client is not None else Client(self.server)
        return client.create_study({"name": name, "spec": spec}, if_exists="load")

    def _check_arguments(self) -> None:
        if isinstance(self.n_trials, bool) or not isinstance(self.n_trials, numbers.Integral) \
                or self.n_trials < 1:
            raise InvalidArgumentError(f"n_trials: expected an integer >= 1, got {self.n_trials!r}")
        if self.enable_pruning:
            if not hasattr(self.estimator, "partial_fit"):
                raise InvalidArgumentError(
                    f"enable_pruning: {type(self.estimator).__name__} has no partial_fit, "
                    "which early stopping trains with")
            if isinstance(self.max_iter, bool) or not isinstance(
                    self.max_iter, numbers.Integral) or self.max_iter < 1:
                raise InvalidArgumentError(
                    f"max_iter: expected an integer >= 1, got {self.max_iter!r}")
        if not (self.error_score == "raise" or _is_number(self.error_score)):
            raise InvalidArgumentError(
                f"error_score: expected 'raise' or a number, got {self.error_score!r}")
        if self.client is not None and self.server is not None:
            raise InvalidArgumentError("client, server: give one of them, not both")

    # ----- Fitting -----

    def fit(self, X: Any, y: Any = None, *, groups: Any = None, **fit_params: Any) -> Any:
        """Runs ``n_trials`` trials, each cross-validating the estimator
        with the trial's parameters, then (with ``refit``) fits the best
        on all of ``X``, ``y``. ``fit_params`` go to each fold's ``fit``
        (``partial_fit``), sample-aligned ones split with the data."""
        self._check_arguments()
        X, y, groups = indexable(X, y, groups)
        specs, decoders = (None, {}) if self.param_distributions is None and \
            self.study is not None else search_space(self.param_distributions)
        scorers, multimetric = self._scorers()
        names = list(scorers)
        objectives = self._objectives(names, multimetric)
        study_metric = self._metric_names(names, multimetric)
        metrics = [
            {"name": study_metric[n], "goal": "MAXIMIZE",
             **({"role": "OBJECTIVE" if n in objectives else "RECORDED"} if multimetric else {})}
            for n in names
        ]
        study = self._open_study(specs, metrics)
        cv = check_cv(self.cv, y, classifier=is_classifier(self.estimator))
        splits = list(cv.split(X, y, groups))
        n_samples = len(X) if not hasattr(X, "shape") else X.shape[0]
        folds = [_Fold(X, y, train, test, fit_params, n_samples) for train, test in splits]
        classes = np.unique(y) if self.enable_pruning and is_classifier(self.estimator) else None
        records: dict[int, _Record] = {}
        lock = threading.Lock()

        def objective(trial: Trial) -> None:
            params = {name: decoders.get(name, _identity)(value)
                      for name, value in trial.params.items()}
            record = _Record(trial, params, names, len(folds))
            if self.enable_pruning:
                self._partial_fit_trial(trial, record, folds, scorers, study_metric, classes)
            else:
                self._fit_trial(record, folds, scorers)
            self._settle(trial, record, study_metric)
            with lock:
                records[trial.id] = record

        study.optimize(objective, n_trials=int(self.n_trials), n_jobs=self.n_jobs or 1,
                       timeout=self.timeout)
        self.study_ = study
        self.study_name_ = study.name
        self.multimetric_ = multimetric
        self.scorer_ = scorers if multimetric else scorers[SINGLE_METRIC]
        self.n_splits_ = len(splits)
        ordered = [records[i] for i in sorted(records)]
        self.trials_ = [study.trial(r.trial.id) for r in ordered]
        self.n_trials_ = len(ordered)
        self.cv_results_ = self._results(ordered, names)
        self._choose_best(names, objectives, multimetric)
        if self.refit:
            best = clone(self.estimator).set_params(**self.best_params_)
            start = time.perf_counter()
            if y is None:
                best.fit(X, **fit_params)
            else:
                best.fit(X, y, **fit_params)
            self.refit_time_ = time.perf_counter() - start
            self.best_estimator_ = best
            for name in ("n_features_in_", "feature_names_in_"):
                if hasattr(best, name):
                    setattr(self, name, getattr(best, name))
        return self

    def _score(self, estimator: Any, X: Any, y: Any, scorers: Mapping[str, Callable],
               into: dict[str, np.ndarray], k: int) -> None:
        for name, scorer in scorers.items():
            into[name][k] = scorer(estimator, X, y) if y is not None else scorer(estimator, X)

    def _fail_fold(self, record: _Record, k: int, error: BaseException) -> None:
        """A fold whose fit or scoring raised: raised again with
        ``error_score="raise"``, else scored ``error_score``."""
        if self.error_score == "raise":
            raise error
        record.errors.append(error)
        for scores in (*record.test.values(), *record.train.values()):
            scores[k] = self.error_score

    def _fit_trial(self, record: _Record, folds: list[_Fold],
                   scorers: Mapping[str, Callable]) -> None:
        for k, fold in enumerate(folds):
            estimator = clone(self.estimator).set_params(**record.params)
            start = time.perf_counter()
            try:
                if fold.y_train is None:
                    estimator.fit(fold.X_train, **fold.fit_params)
                else:
                    estimator.fit(fold.X_train, fold.y_train, **fold.fit_params)
                record.fit_time[k] = time.perf_counter() - start
                start = time.perf_counter()
                self._score(estimator, fold.X_test, fold.y_test, scorers, record.test, k)
                if self.return_train_score:
                    self._score(estimator, fold.X_train, fold.y_train, scorers, record.train, k)
                record.score_time[k] = time.perf_counter() - start
            except Exception as error:
                self._fail_fold(record, k, error)

    def _partial_fit_trial(self, trial: Trial, record: _Record, folds: list[_Fold],
                           scorers: Mapping[str, Callable], study_metric: Mapping[str, str],
                           classes: Optional[np.ndarray]) -> None:
        """Trains each fold's estimator one ``partial_fit`` at a time,
        reporting the folds' mean scores after each iteration (step 1,
        2, ...), until ``max_iter`` or the study stops the trial."""
        estimators = [clone(self.estimator).set_params(**record.params) for _ in folds]
        failed = [False] * len(folds)
        start_step = max((m.step for m in trial.measurements), default=0) + 1
        for step in range(start_step, int(self.max_iter) + 1):
            for k, fold in enumerate(folds):
                if failed[k]:
                    continue
                extra = {"classes": classes} if classes is not None else {}
                start = time.perf_counter()
                try:
                    estimators[k].partial_fit(fold.X_train, fold.y_train, **extra,
                                              **fold.fit_params)
                    record.fit_time[k] += time.perf_counter() - start
                    start = time.perf_counter()
                    self._score(estimators[k], fold.X_test, fold.y_test, scorers, record.test, k)
                    if self.return_train_score:
                        self._score(estimators[k], fold.X_train, fold.y_train, scorers,
                                    record.train, k)
                    record.score_time[k] += time.perf_counter() - start
                except Exception as error:
                    failed[k] = True
                    self._fail_fold(record, k, error)
            means = record.means()
            if any(math.isnan(v) for v in means.values()):
                return  # settled INFEASIBLE: a NaN cannot be reported
            trial.report(step, {study_metric[n]: v for n, v in means.items()})
            if trial.should_stop:
                return

    def _settle(self, trial: Trial, record: _Record, study_metric: Mapping[str, str]) -> None:
        """Completes the trial with the folds' mean scores (STOPPED if the
        study stopped it); INFEASIBLE when a fold raised and NaN is its
        score, or a mean is not finite."""
        means = record.means()
        if record.errors and any(math.isnan(v) for v in means.values()):
            trial.infeasible(f"{len(record.errors)} of {len(record.fit_time)} folds raised "
                             f"(error_score=nan): {describe_error(record.errors[0])}")
            return
        trial.complete({study_metric[n]: v for n, v in means.items()})

    # ----- Results -----

    def _results(self, records: list[_Record], names: list[str]) -> dict[str, Any]:
        """cv_results_, with GridSearchCV's keys."""
        n = len(records)
        results: dict[str, Any] = {}
        for key, times in (("fit_time", [r.fit_time for r in records]),
                           ("score_time", [r.score_time for r in records])):
            array = np.array(times).reshape(n, -1)
            results[f"mean_{key}"] = array.mean(axis=1) if n else np.array([])
            results[f"std_{key}"] = array.std(axis=1) if n else np.array([])
        param_names = sorted({p for r in records for p in r.params})
        for name in param_names:
            column = np.ma.MaskedArray(np.empty(n, dtype=object), mask=True)
            for i, record in enumerate(records):
                if name in record.params:
                    column[i] = record.params[name]
            results[f"param_{name}"] = column
        results["params"] = [dict(r.params) for r in records]
        sets = ("test", "train") if self.return_train_score else ("test",)
        for metric in names:
            for which in sets:
                scores = np.array([getattr(r, which)[metric] for r in records]).reshape(
                    n, self.n_splits_)
                for k in range(self.n_splits_):
                    results[f"split{k}_{which}_{metric}"] = scores[:, k]
                results[f"mean_{which}_{metric}"] = scores.mean(axis=1)
                results[f"std_{which}_{metric}"] = scores.std(axis=1)
                if which == "test":
                    results[f"rank_test_{metric}"] = _rank(scores.mean(axis=1))
        return results

    def _choose_best(self, names: list[str], objectives: list[str], multimetric: bool) -> None:
        """best_index_ (and best_score_, best_params_, best_trial_): the
        completed trial of this fit with the highest mean test score of the
        refit metric; or what a callable ``refit`` picks."""
        refit = self.refit
        if multimetric and not refit:
            return  # several metrics and no refit: no single best (as GridSearchCV)
        if callable(refit):
            index = refit(self.cv_results_)
            if isinstance(index, bool) or not isinstance(index, numbers.Integral) or \
                    not 0 <= index < self.n_trials_:
                raise InvalidArgumentError(
                    f"refit: the callable returned {index!r}, not an index of cv_results_ "
                    f"(0 to {self.n_trials_ - 1})")
        else:
            metric = objectives[0] if multimetric else names[0]
            means = self.cv_results_[f"mean_test_{metric}"]
            done = [i for i, t in enumerate(self.trials_)
                    if t.state == "COMPLETED" and not math.isnan(means[i])]
            if not done:
                raise ValueError(
                    f"HypertuneSearchCV: no trial of this fit completed (study "
                    f"{self.study_name_!r}: "
                    + ", ".join(f"trial {t.id} {t.state}" for t in self.trials_)
                    + "); see the trials' infeasible_reason, or set error_score='raise'")
            index = max(done, key=lambda i: (means[i], -i))
            self.best_score_ = float(means[index])
        self.best_index_ = int(index)
        self.best_params_ = dict(self.cv_results_["params"][index])
        self.best_trial_ = self.trials_[index]

    def __getstate__(self) -> dict:
        """Pickled without the connection (a study, its trials)."""
        state = dict(super().__getstate__())  # a copy: the instance keeps them
        for name in ("study_", "trials_", "best_trial_"):
            state.pop(name, None)
        return state

    # ----- The best estimator's methods -----

    @property
    def classes_(self) -> np.ndarray:
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_.classes_

    def _best(self) -> Any:
        check_is_fitted(self, "best_estimator_")
        return self.best_estimator_

    predict = _delegate("predict")
    predict_proba = _delegate("predict_proba")
    predict_log_proba = _delegate("predict_log_proba")
    decision_function = _delegate("decision_function")
    transform = _delegate("transform")
    inverse_transform = _delegate("inverse_transform")
    score_samples = _delegate("score_samples")

    def score(self, X: Any, y: Any = None) -> float:
        """The refit metric's score of ``best_estimator_`` on ``X``, ``y``."""
        best = self._best()
        scorer = self.scorer_
        if self.multimetric_:
            if not isinstance(self.refit, str):
                raise InvalidArgumentError(
                    "score: with several scorers and a callable refit, no metric is the "
                    "one to score with")
            scorer = self.scorer_[self.refit]
        return float(scorer(best, X, y) if y is not None else scorer(best, X))


def _check_study_space(study: Study, specs: Optional[list[dict]]) -> None:
    """Refuses a study whose space does not search ``specs``' domains."""
    if specs is None:
        return
    held = {p.name: _space.spec_dict(p) for p in study.spec.parameters}
    for spec in specs:
        name = spec["name"]
        if name not in held:
            raise InvalidArgumentError(
                f"study: study {study.name!r} has no parameter {name!r} (its parameters: "
                + ", ".join(repr(n) for n in held) + ")")
        if not _space.same_domain(held[name], spec):
            raise InvalidArgumentError(
                f"study: study {study.name!r} searches {name!r} as {{"
                + _space.describe_domain(held[name]) + "}, param_distributions as {"
                + _space.describe_domain(spec) + "}")


__all__ = ["HypertuneSearchCV", "search_space"]
