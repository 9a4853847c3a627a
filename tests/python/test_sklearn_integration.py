"""hypertune.integration.sklearn.HypertuneSearchCV against scikit-learn
(Debian's python3-sklearn) and a real hypertuned: cv_results_ as
GridSearchCV's and as the study's trials, refit and delegation, several
metrics, early stopping of a partial_fit estimator, error_score, clone and
pickle, Ctrl-C, and the parameter domains it takes."""

from __future__ import annotations

import collections
import math
import os
import pickle
import signal
import subprocess
import sys
import textwrap

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

import pandas  # noqa: E402
import scipy.stats  # noqa: E402
from sklearn.base import BaseEstimator, ClassifierMixin, clone  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402
from sklearn.linear_model import LogisticRegression, SGDClassifier  # noqa: E402
from sklearn.metrics import accuracy_score, f1_score  # noqa: E402
from sklearn.model_selection import (  # noqa: E402
    GridSearchCV, StratifiedKFold, cross_val_score)
from sklearn.utils import estimator_checks  # noqa: E402

import hypertune  # noqa: E402
from helpers import poll, unique_name  # noqa: E402
from hypertune.integration.sklearn import HypertuneSearchCV, search_space  # noqa: E402

X, Y = make_classification(n_samples=150, n_features=6, n_informative=4, random_state=0)

SPACE = {
    "C": {"double_spec": {"min": 1e-3, "max": 1e2, "scale": "LOG"}},
    "fit_intercept": [True, False],
    "class_weight": [None, "balanced"],
}


def test_cv_results_are_gridsearchcvs_and_the_studys_trials(server) -> None:
    search = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, n_trials=5, cv=3,
                               random_state=3, server=server.address, algorithm="RANDOM")
    assert search.fit(X, Y) is search
    results = search.cv_results_
    grid = GridSearchCV(LogisticRegression(max_iter=300),
                        {"C": [1.0], "fit_intercept": [True], "class_weight": [None]}, cv=3)
    assert set(results) == set(grid.fit(X, Y).cv_results_)
    frame = pandas.DataFrame(results)
    assert frame.shape[0] == 5 == search.n_trials_
    assert search.n_splits_ == 3

    trials = search.study_.trials()
    assert [t.id for t in trials] == [t.id for t in search.trials_] == [1, 2, 3, 4, 5]
    folds = StratifiedKFold(3)
    for i, trial in enumerate(trials):
        params = results["params"][i]
        assert trial.state == "COMPLETED"
        assert params["C"] == trial.params["C"] == results["param_C"][i]
        assert params["fit_intercept"] in (True, False)  # the choices, not their labels
        assert str(params["fit_intercept"]) == trial.params["fit_intercept"]
        assert params["class_weight"] in (None, "balanced")
        assert str(params["class_weight"]) == trial.params["class_weight"]
        assert trial.metrics == {"score": pytest.approx(results["mean_test_score"][i], abs=0)}
        splits = [results[f"split{k}_test_score"][i] for k in range(3)]
        again = cross_val_score(LogisticRegression(max_iter=300, **params), X, Y, cv=folds)
        assert splits == list(again)
        assert results["std_test_score"][i] == pytest.approx(np.std(splits))
        assert results["mean_fit_time"][i] > 0

    means = results["mean_test_score"]
    for i in range(5):
        assert results["rank_test_score"][i] == 1 + sum(m > means[i] for m in means)
    assert search.best_index_ == int(np.argmax(means))
    assert search.best_score_ == means.max()
    assert search.best_params_ == results["params"][search.best_index_]
    assert search.best_trial_.id == search.study_.best().id == search.best_index_ + 1

    expected = LogisticRegression(max_iter=300, **search.best_params_).fit(X, Y)
    assert search.best_estimator_.get_params() == expected.get_params()
    assert list(search.predict(X)) == list(expected.predict(X))
    assert search.predict_proba(X).shape == (150, 2)
    assert search.score(X, Y) == accuracy_score(Y, expected.predict(X))
    assert list(search.classes_) == [0, 1]
    assert search.n_features_in_ == 6
    assert search.refit_time_ > 0
    assert not hasattr(search, "transform")  # LogisticRegression has none


def test_parallel_trials_each_a_trial_of_the_study(server) -> None:
    search = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, n_trials=6, cv=2,
                               n_jobs=2, random_state=1, server=server.address)
    search.fit(X, Y)
    trials = search.study_.trials()
    assert sorted(t.id for t in trials) == [1, 2, 3, 4, 5, 6]
    assert all(t.state == "COMPLETED" for t in trials)
    by_id = {t.id: t for t in trials}
    for i, trial in enumerate(search.trials_):
        assert by_id[trial.id].metrics["score"] == search.cv_results_["mean_test_score"][i]


def test_random_state_is_the_studys_seed(server) -> None:
    def suggested(seed):
        search = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, n_trials=3, cv=2,
                                   random_state=seed, server=server.address, algorithm="RANDOM")
        search.fit(X, Y)
        assert search.study_.spec.seed == seed
        return search.cv_results_["params"]

    assert suggested(11) == suggested(11) != suggested(12)


def test_several_metrics_refit_one_or_search_their_front(server) -> None:
    common = {"cv": 3, "n_trials": 4, "random_state": 2, "server": server.address,
              "scoring": ["accuracy", "f1"]}
    search = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, refit="f1", **common)
    search.fit(X, Y)
    assert search.study_.objectives == ["f1"]  # accuracy recorded
    results = search.cv_results_
    for metric in ("accuracy", "f1"):
        assert {f"mean_test_{metric}", f"rank_test_{metric}", f"split2_test_{metric}"} <= set(
            results)
    assert search.best_index_ == int(np.argmax(results["mean_test_f1"]))
    assert search.best_score_ == results["mean_test_f1"].max()
    assert search.score(X, Y) == f1_score(Y, search.predict(X))
    for i, trial in enumerate(search.trials_):
        assert trial.metrics == {"accuracy": results["mean_test_accuracy"][i],
                                 "f1": results["mean_test_f1"][i]}

    front = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, refit=False, **common)
    front.fit(X, Y)
    assert front.study_.objectives == ["accuracy", "f1"]
    assert not hasattr(front, "best_estimator_") and not hasattr(front, "best_index_")

    def pick(results):
        return int(np.argmin(results["mean_test_accuracy"]))

    chosen = HypertuneSearchCV(LogisticRegression(max_iter=300), SPACE, refit=pick, **common)
    chosen.fit(X, Y)
    assert chosen.best_index_ == pick(chosen.cv_results_)
    assert chosen.best_params_ == chosen.cv_results_["params"][chosen.best_index_]

    with pytest.raises(hypertune.InvalidArgumentError, match="name the one to refit on"):
        HypertuneSearchCV(LogisticRegression(), SPACE, **common).fit(X, Y)


class CountingSGD(SGDClassifier):
    """An SGDClassifier that counts its partial_fit calls by alpha."""

    calls: collections.Counter = collections.Counter()

    def partial_fit(self, X, y, classes=None, sample_weight=None):
        CountingSGD.calls[self.alpha] += 1
        return super().partial_fit(X, y, classes=classes, sample_weight=sample_weight)


def test_early_stopping_stops_a_partial_fit_estimator(client) -> None:
    study = client.create_study({"name": unique_name("sgd"), "spec": {
        "parameters": [{"name": "alpha", "double_spec": {"min": 1e-5, "max": 10,
                                                         "scale": "LOG"}}],
        "metrics": [{"name": "score", "goal": "MAXIMIZE"}],
        "early_stopping": {"rule": "MEDIAN", "min_trials": 3}}})
    for alpha in (1e-4, 1e-3, 1e-2, 10.0):  # the last one cannot learn
        study.enqueue({"alpha": alpha})
    CountingSGD.calls.clear()
    search = HypertuneSearchCV(CountingSGD(random_state=0), None, study=study, n_trials=4,
                               cv=3, enable_pruning=True, max_iter=12)
    search.fit(X, Y)
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED"] * 3 + ["STOPPED"]
    for trial in trials[:3]:
        assert [m.step for m in trial.measurements] == list(range(1, 13))
        assert CountingSGD.calls[trial.params["alpha"]] == 3 * 12
    stopped = trials[3]
    steps = len(stopped.measurements)
    assert steps < 12
    assert CountingSGD.calls[10.0] == 3 * steps  # trained no further than reported
    results = search.cv_results_
    for i, trial in enumerate(trials):
        last = trial.measurements[-1].metrics["score"]
        assert trial.metrics["score"] == last == results["mean_test_score"][i]
    assert search.best_index_ != 3 and search.best_trial_.state == "COMPLETED"

    with pytest.raises(hypertune.InvalidArgumentError, match="LogisticRegression has no partial_fit"):
        HypertuneSearchCV(LogisticRegression(), SPACE, enable_pruning=True).fit(X, Y)


class FailsAbove(ClassifierMixin, BaseEstimator):
    """Predicts the majority class; its fit raises for x > 0.5."""

    def __init__(self, x=0.0):
        self.x = x

    def fit(self, X, y):
        if self.x > 0.5:
            raise ValueError(f"x={self.x} is too large")
        self.classes_, counts = np.unique(y, return_counts=True)
        self.majority_ = self.classes_[np.argmax(counts)]
        return self

    def predict(self, X):
        return np.full(len(X), self.majority_)


def _enqueued_study(client, xs):
    study = client.create_study({"name": unique_name("fails"), "spec": {
        "parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
        "metrics": [{"name": "score", "goal": "MAXIMIZE"}]}})
    for x in xs:
        study.enqueue({"x": x})
    return study


def test_error_score_settles_the_trial(client) -> None:
    study = _enqueued_study(client, (0.25, 0.75, 0.5))
    search = HypertuneSearchCV(FailsAbove(), {"x": {"double_spec": {"min": 0, "max": 1}}},
                               study=study, n_trials=3, cv=3)
    search.fit(X, Y)
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED", "INFEASIBLE", "COMPLETED"]
    assert "3 of 3 folds raised" in trials[1].infeasible_reason
    assert "ValueError: x=0.75 is too large" in trials[1].infeasible_reason
    results = search.cv_results_
    assert math.isnan(results["mean_test_score"][1])
    assert list(results["rank_test_score"]) == [1, 3, 1]
    assert search.best_index_ == 0

    zero = _enqueued_study(client, (0.75, 0.25))
    HypertuneSearchCV(FailsAbove(), None, study=zero, n_trials=2, cv=3, error_score=0).fit(X, Y)
    assert [(t.state, t.metrics.get("score")) for t in zero.trials()][0] == ("COMPLETED", 0.0)

    raising = _enqueued_study(client, (0.75,))
    with pytest.raises(ValueError, match="too large"):
        HypertuneSearchCV(FailsAbove(), None, study=raising, n_trials=1, cv=3,
                          error_score="raise").fit(X, Y)
    assert raising.trials()[0].state == "FAILED"

    none = _enqueued_study(client, (0.75,))
    with pytest.raises(ValueError, match="no trial of this fit completed"):
        HypertuneSearchCV(FailsAbove(), None, study=none, n_trials=1, cv=3).fit(X, Y)


def test_clone_params_and_pickle(client, server) -> None:
    search = HypertuneSearchCV(LogisticRegression(C=2.0), SPACE, n_trials=2, cv=2,
                               server=server.address, scoring="accuracy", random_state=0)
    copy = clone(search)
    assert copy is not search and copy.estimator is not search.estimator
    assert copy.get_params(deep=True).keys() == search.get_params(deep=True).keys()
    assert copy.get_params()["estimator__C"] == 2.0
    assert copy.param_distributions == search.param_distributions
    copy.set_params(estimator__C=5.0, n_trials=3)
    assert (copy.estimator.C, copy.n_trials, search.estimator.C) == (5.0, 3, 2.0)
    name = type(search).__name__
    estimator_checks.check_parameters_default_constructible(name, search)
    estimator_checks.check_get_params_invariance(name, search)
    estimator_checks.check_set_params(name, search)
    estimator_checks.check_no_attributes_set_in_init(name, search)

    # A search given a Client or a Study clones with the same connection.
    for given in ({"client": client}, {"study": _enqueued_study(client, (0.5,))}):
        held = HypertuneSearchCV(LogisticRegression(), SPACE, n_trials=1, **given)
        copied = clone(held).get_params(deep=False)
        assert all(copied[key] is value for key, value in given.items())

    # Nested cross-validation clones the search per outer fold: a study each.
    outer = cross_val_score(search, X, Y, cv=2)
    assert len(outer) == 2 and all(0 <= s <= 1 for s in outer)

    search.fit(X, Y)
    assert search.study_.spec.metrics[0].name == "accuracy"
    loaded = pickle.loads(pickle.dumps(search))
    assert list(loaded.predict(X)) == list(search.predict(X))
    assert loaded.study_name_ == search.study_.name and not hasattr(loaded, "study_")
    assert loaded.best_params_ == search.best_params_


@pytest.mark.parametrize("signum, n_jobs", [(signal.SIGINT, 1), (signal.SIGINT, 2),
                                            (signal.SIGTERM, 1), (signal.SIGTERM, 2)])
def test_an_interrupted_search_gives_its_trials_back(client, server, tmp_path, signum,
                                                     n_jobs) -> None:
    name = unique_name("interrupted")
    marks = tmp_path / "marks"
    marks.mkdir()
    script = tmp_path / "search.py"
    script.write_text(textwrap.dedent(f"""
        import os, threading
        from sklearn.base import BaseEstimator, ClassifierMixin
        from sklearn.datasets import make_classification
        from hypertune.integration.sklearn import HypertuneSearchCV

        class Forever(ClassifierMixin, BaseEstimator):
            def __init__(self, x=0.0):
                self.x = x
            def fit(self, X, y):
                open(os.path.join({str(marks)!r}, str(threading.get_ident())), "w").close()
                threading.Event().wait()  # until interrupted

        X, y = make_classification(n_samples=40, random_state=0)
        HypertuneSearchCV(Forever(), {{"x": {{"double_spec": {{"min": 0, "max": 1}}}}}},
                          n_trials=3, cv=2, n_jobs={n_jobs}, server={server.address!r},
                          study_name={name!r}).fit(X, y)
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as process:
        # Signalled while fitting, as a user's Ctrl-C is: not in the moment
        # between the server granting a trial and the client holding it.
        poll(lambda: len(os.listdir(marks)) == n_jobs, f"the search's {n_jobs} fit(s) to start")
        process.send_signal(signum)
        output, _ = process.communicate(timeout=60)
    if signum == signal.SIGINT:
        assert process.returncode != 0 and "KeyboardInterrupt" in output, output
        reason = "interrupted (KeyboardInterrupt)"
    else:
        assert process.returncode == 143, output  # 128 + SIGTERM, as hypertune.Terminated
        reason = "preempted (SIGTERM)"
    trials = client.get_study(name).trials()
    assert len(trials) == n_jobs
    for trial in trials:
        assert (trial.state, trial.preemption_count, trial.retry_count) == ("REQUESTED", 1, 0)
        assert reason in trial.failure_reason

    # The next fit on the study runs those trials again first.
    again = HypertuneSearchCV(FailsAbove(), {"x": {"double_spec": {"min": 0, "max": 1}}},
                              n_trials=n_jobs, cv=2, server=server.address, study_name=name,
                              error_score=0)
    again.fit(X, Y)
    trials = client.get_study(name).trials()
    assert [(t.state, t.attempt) for t in trials] == [("COMPLETED", 2)] * n_jobs
    assert sorted(t.id for t in again.trials_) == list(range(1, n_jobs + 1))


def test_the_domains_it_takes() -> None:
    specs, decode = search_space({
        "a": scipy.stats.uniform(1, 2),
        "b": scipy.stats.loguniform(1e-4, 1e-1),
        "c": scipy.stats.randint(2, 10),
        "d": [1, 10, 100],
        "e": ["gini", None, 3],
        "f": {"integer_spec": {"min": 1, "max": 4}},
    })
    assert specs == [
        {"name": "a", "double_spec": {"min": 1.0, "max": 3.0, "scale": "LINEAR"}},
        {"name": "b", "double_spec": {"min": 1e-4, "max": 1e-1, "scale": "LOG"}},
        {"name": "c", "integer_spec": {"min": 2, "max": 9, "scale": "LINEAR"}},
        {"name": "d", "discrete_spec": {"values": [1.0, 10.0, 100.0]}},
        {"name": "e", "categorical_spec": {"values": ["gini", "None", "3"]}},
        {"name": "f", "integer_spec": {"min": 1, "max": 4}},
    ]
    assert decode["e"]("None") is None and decode["e"]("3") == 3 and decode["e"]("gini") == "gini"
    assert decode["d"](10) == 10 and isinstance(decode["d"](10.0), int)
    config = [{"name": "x", "double_spec": {"min": 0, "max": 1}}]
    assert search_space(config)[0] == config

    with pytest.raises(hypertune.InvalidArgumentError, match=r"scipy.stats.norm has no"):
        search_space({"a": scipy.stats.norm()})
    with pytest.raises(hypertune.InvalidArgumentError, match=r"\['a'\].*is not a domain"):
        search_space({"a": 3})
    with pytest.raises(hypertune.InvalidArgumentError, match="an empty list"):
        search_space({"a": []})

    optuna = pytest.importorskip("optuna")
    specs, decode = search_space({
        "lr": optuna.distributions.FloatDistribution(1e-5, 1e-1, log=True),
        "n": optuna.distributions.IntDistribution(16, 64, step=16),
        "act": optuna.distributions.CategoricalDistribution(["relu", None]),
    })
    assert specs == [
        {"name": "lr", "double_spec": {"min": 1e-5, "max": 1e-1, "scale": "LOG"}},
        {"name": "n", "discrete_spec": {"values": [16.0, 32.0, 48.0, 64.0]}},
        {"name": "act", "categorical_spec": {"values": ["relu", "None"]}},
    ]
    assert decode["act"]("None") is None


def test_a_study_that_searches_another_space_is_refused(client) -> None:
    study = _enqueued_study(client, ())
    with pytest.raises(hypertune.InvalidArgumentError, match="searches 'x' as"):
        HypertuneSearchCV(FailsAbove(), {"x": {"double_spec": {"min": 0, "max": 2}}},
                          study=study).fit(X, Y)
    with pytest.raises(hypertune.InvalidArgumentError, match="has no parameter 'y'"):
        HypertuneSearchCV(FailsAbove(), {"y": [1, 2]}, study=study).fit(X, Y)


def test_a_transformer_searched_transforms(server) -> None:
    from sklearn.decomposition import PCA  # pylint: disable=import-outside-toplevel

    search = HypertuneSearchCV(PCA(), {"n_components": [1, 2, 3]}, n_trials=3, cv=2,
                               random_state=0, server=server.address, algorithm="GRID")
    search.fit(X)  # PCA's own score: the log-likelihood
    assert sorted(p["n_components"] for p in search.cv_results_["params"]) == [1, 2, 3]
    assert search.transform(X).shape == (150, search.best_params_["n_components"])
    assert np.array_equal(search.inverse_transform(search.transform(X)),
                          search.best_estimator_.inverse_transform(
                              search.best_estimator_.transform(X)))
    assert not hasattr(search, "predict")
