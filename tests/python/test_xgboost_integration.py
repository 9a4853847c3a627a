"""hypertune.integration.xgboost.HypertuneCallback against XGBoost
(Debian's python3-xgboost) and a real hypertuned: each round reported as
XGBoost logged it, training stopped where the study stops the trial
(xgboost.train, the scikit-learn wrapper, Study.optimize with Optuna's
habit of raising TrialPruned), the worker's trial by default, and XGBoost
under HypertuneSearchCV."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import textwrap

import pytest

xgb = pytest.importorskip("xgboost")
np = pytest.importorskip("numpy")
pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import make_classification  # noqa: E402

import hypertune  # noqa: E402
from helpers import program, unique_name  # noqa: E402
from hypertune.integration.sklearn import HypertuneSearchCV  # noqa: E402
from hypertune.integration.xgboost import HypertuneCallback  # noqa: E402

X, Y = make_classification(n_samples=300, n_features=8, random_state=0)
X_TRAIN, Y_TRAIN, X_VALID, Y_VALID = X[:200], Y[:200], X[200:], Y[200:]
ROUNDS = 15


# Three that learn, then one that cannot (eta 1e-6 leaves logloss at 0.693).
ETAS = (0.3, 0.5, 0.2, 1e-6)


def _study(client, etas=(), **spec):
    """eta searched, validation logloss minimized; MEDIAN early stopping
    that decides once three trials finished; ``etas`` enqueued."""
    study = client.create_study({"name": unique_name("xgb"), "spec": {
        "parameters": [{"name": "eta", "double_spec": {"min": 1e-6, "max": 1.0,
                                                       "scale": "LOG"}}],
        "metrics": [{"name": "logloss", "goal": "MINIMIZE"}],
        "early_stopping": {"rule": "MEDIAN", "min_trials": 3}, **spec}})
    for eta in etas:
        study.enqueue({"eta": eta})
    return study


def _matrices():
    """The training and validation DMatrix."""
    return xgb.DMatrix(X_TRAIN, label=Y_TRAIN), xgb.DMatrix(X_VALID, label=Y_VALID)


def test_train_reports_each_round_and_stops_when_the_study_says(client) -> None:
    study = _study(client, ETAS)
    dtrain, dvalid = _matrices()
    rounds = {}
    for _ in ETAS:
        with study.ask() as trial:
            history: dict = {}
            callback = HypertuneCallback(trial, "validation-logloss")
            booster = xgb.train(
                {"eta": trial.params["eta"], "objective": "binary:logistic",
                 "eval_metric": ["error", "logloss"], "seed": 0},
                dtrain, num_boost_round=ROUNDS, evals=[(dtrain, "train"), (dvalid, "validation")],
                evals_result=history, verbose_eval=False, callbacks=[callback])
            logged = history["validation"]["logloss"]
            assert [m.metrics for m in trial.measurements] == [
                {"logloss": value} for value in logged]
            assert [m.step for m in trial.measurements] == list(range(1, len(logged) + 1))
            rounds[trial.id] = (booster.num_boosted_rounds(), callback.stopped_round)
            trial.complete(logloss=logged[-1])
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED"] * 3 + ["STOPPED"]
    assert [rounds[t.id] for t in trials[:3]] == [(ROUNDS, None)] * 3
    trained, stopped = rounds[trials[3].id]
    assert trained == stopped < ROUNDS  # training ended at the round the study stopped it
    assert trials[3].metrics["logloss"] == trials[3].measurements[-1].metrics["logloss"]


def test_the_sklearn_wrapper_and_clone(client) -> None:
    study = _study(client, (0.3,))
    with study.ask() as trial:
        callback = HypertuneCallback(trial)  # the last evaluation's last metric
        model = xgb.XGBClassifier(n_estimators=ROUNDS, learning_rate=trial.params["eta"],
                                  eval_metric="logloss", callbacks=[callback])
        twin = clone(model)  # deep-copies its callbacks: the same trial
        assert twin.callbacks[0] is not callback and twin.callbacks[0].trial is trial
        assert copy.deepcopy(callback).trial is trial
        model.fit(X_TRAIN, Y_TRAIN, eval_set=[(X_VALID, Y_VALID)], verbose=False)
        logged = model.evals_result()["validation_0"]["logloss"]
        assert len(logged) == ROUNDS
        assert [m.metrics["logloss"] for m in trial.measurements] == logged
        trial.complete(logloss=logged[-1])
    assert study.trials()[0].state == "COMPLETED"

    # A key that is not evaluated: named with those that are; the trial FAILED.
    study.enqueue({"eta": 0.3})
    with pytest.raises(hypertune.InvalidArgumentError, match="'validation_0-logloss'"):
        with study.ask() as trial:
            xgb.XGBClassifier(n_estimators=2, eval_metric="logloss",
                              callbacks=[HypertuneCallback(trial, "valid-auc")]).fit(
                X_TRAIN, Y_TRAIN, eval_set=[(X_VALID, Y_VALID)], verbose=False)
    assert study.trials()[1].state == "FAILED"


def test_optimize_with_optunas_habit_of_raising_pruned(client) -> None:
    study = _study(client, ETAS)
    dtrain, dvalid = _matrices()

    def objective(trial):
        history: dict = {}
        xgb.train({"eta": trial.suggest_float("eta", 1e-6, 1.0, log=True),
                   "objective": "binary:logistic", "eval_metric": "logloss", "seed": 0},
                  dtrain, num_boost_round=ROUNDS, evals=[(dvalid, "validation")],
                  evals_result=history, verbose_eval=False,
                  callbacks=[HypertuneCallback(trial, raise_pruned=True)])
        return history["validation"]["logloss"][-1]

    study.optimize(objective, n_trials=len(ETAS))
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED"] * 3 + ["STOPPED"]
    stopped = trials[3]
    assert len(stopped.measurements) < ROUNDS
    assert stopped.metrics == stopped.measurements[-1].metrics


def test_under_hypertune_worker_the_workers_trial(client, server, tmp_path) -> None:
    study = _study(client, max_trials=2)
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(f"""
        import hypertune, xgboost as xgb
        from sklearn.datasets import make_classification
        from hypertune.integration.xgboost import HypertuneCallback

        X, y = make_classification(n_samples=200, n_features=8, random_state=0)
        trial = hypertune.current_trial()
        with trial:
            model = xgb.XGBClassifier(n_estimators={ROUNDS}, eval_metric="logloss",
                                      learning_rate=trial.params["eta"],
                                      callbacks=[HypertuneCallback()])
            model.fit(X[:150], y[:150], eval_set=[(X[150:], y[150:])], verbose=False)
            trial.complete(logloss=model.evals_result()["validation_0"]["logloss"][-1])
    """))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("HYPERTUNE_TRIAL_ID", None)
    result = subprocess.run(
        [program("hypertune"), "--server", server.address, "worker", study.name,
         "--max-trials", "2", "--log-dir", str(tmp_path / "logs"), "--",
         sys.executable, str(script)],
        env=env, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED", "COMPLETED"]
    for trial in trials:
        assert [m.step for m in trial.measurements] == list(range(1, ROUNDS + 1))
        assert trial.metrics["logloss"] == trial.measurements[-1].metrics["logloss"]


def test_xgboost_under_hypertunesearchcv(server) -> None:
    search = HypertuneSearchCV(
        xgb.XGBClassifier(n_estimators=10, eval_metric="logloss"),
        {"max_depth": {"integer_spec": {"min": 1, "max": 4}},
         "learning_rate": {"double_spec": {"min": 0.01, "max": 0.5, "scale": "LOG"}}},
        n_trials=3, cv=2, scoring="neg_log_loss", random_state=0, server=server.address)
    search.fit(X, Y)
    trials = search.study_.trials()
    assert [t.state for t in trials] == ["COMPLETED"] * 3
    assert isinstance(search.best_params_["max_depth"], int)
    assert search.best_estimator_.get_params()["max_depth"] == search.best_params_["max_depth"]
    assert search.best_score_ == max(t.metrics["neg_log_loss"] for t in trials)
