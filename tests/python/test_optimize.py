"""Study.optimize, Optuna-style, against a real hypertuned: the README's
ten-line example and docs/python.md's notebook example exactly as shown,
worker threads, functions that raise or return the wrong thing."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import warnings

import pytest

import hypertune
from helpers import ROOT, study_config, unique_name
from hypertune._proto import pb


def python_block(page: str, heading: str) -> str:
    """The first ```python block after `heading` in the page at ROOT/page."""
    with open(os.path.join(ROOT, page)) as file:
        text = file.read()
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def run_example(code: str, server) -> subprocess.CompletedProcess:
    env = dict(os.environ, HYPERTUNE_SERVER=server.address,
               PYTHONPATH=os.pathsep.join(sys.path))
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def test_readme_example_runs_as_shown(server) -> None:
    result = run_example(python_block("README.md", "## Python in ten lines"), server)
    study = hypertune.Client(server.address).get_study("readme")
    assert study.trial_counts == {"COMPLETED": 20}
    best = study.best()
    assert f"best: {best.value} {best.params}" in result.stdout


def test_readme_example_runs_twice_and_three_at_once(own_server) -> None:
    # The config leaves out the algorithm, which the server fills in: a
    # rerun loads the study instead of calling it different.
    code = python_block("README.md", "## Python in ten lines")
    run_example(code, own_server)
    again = run_example(code, own_server)
    assert "best:" in again.stdout
    # Its budget spent, the rerun says so rather than returning in silence.
    assert "study 'readme' has spent its budget (max_trials=20)" in again.stderr
    study = hypertune.Client(own_server.address).get_study("readme")
    assert study.trial_counts == {"COMPLETED": 20}
    study.delete()

    env = dict(os.environ, HYPERTUNE_SERVER=own_server.address,
               PYTHONPATH=os.pathsep.join(sys.path))
    processes = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        assert "best:" in out
    study = hypertune.Client(own_server.address).get_study("readme")
    assert study.trial_counts == {"COMPLETED": 20}


def test_if_exists_load_still_sees_a_real_difference(client: hypertune.Client) -> None:
    config = study_config(unique_name())
    del config["spec"]["algorithm"]  # the server fills in GP_BANDIT
    study = client.create_study(config)
    assert study.spec.algorithm == pb.GP_BANDIT
    assert client.create_study(config, if_exists="load").name == study.name
    config["spec"]["algorithm"] = "GP_BANDIT"  # what was filled in, said
    assert client.create_study(config, if_exists="load").name == study.name
    config["spec"]["algorithm"] = "RANDOM"
    with pytest.raises(hypertune.AlreadyExistsError, match=r"\(algorithm differ\)"):
        client.create_study(config, if_exists="load")
    config["spec"]["algorithm"] = None
    config["spec"]["max_trials"] = 7
    with pytest.raises(hypertune.AlreadyExistsError, match=r"\(max_trials differ\)"):
        client.create_study(config, if_exists="load")


def test_n_trials_are_this_many_more_and_the_budget_says_when_it_stops(
        client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_trials=5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning while the budget lasts
        study.optimize(lambda t: t.params["x"], n_trials=2)
        study.optimize(lambda t: t.params["x"], n_trials=2)
    assert len(study.trials()) == 4
    with pytest.warns(UserWarning) as caught:
        study.optimize(lambda t: t.params["x"], n_trials=2)
    assert len(study.trials()) == 5
    assert [str(w.message) for w in caught] == [
        f"optimize: study {study.name!r} has spent its budget (max_trials=5): 1 of the 2 "
        "trials asked for (n_trials) ran in this call; raise it with "
        "study.update(max_trials=6) and call optimize again"]
    assert caught[0].filename == __file__  # pointing at the call
    with pytest.warns(UserWarning, match=r"0 of the 3 trials asked for"):
        study.optimize(lambda t: t.params["x"], n_trials=3)
    study.update(max_trials=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        study.optimize(lambda t: t.params["x"], n_trials=3)
    assert len(study.trials()) == 8


def test_notebook_example_runs_as_shown(server) -> None:
    pytest.importorskip("pandas", reason="python3-pandas is not installed")
    result = run_example(python_block("docs/python.md", "# The Python client"), server)
    study = hypertune.Client(server.address).get_study("notebook")
    assert study.trial_counts == {"COMPLETED": 50}
    best = study.best()
    assert f"best: {best.value} {best.params}" in result.stdout
    assert "[50 rows x" in result.stdout


def test_threads_run_the_budget_once(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_trials=24))
    threads_seen = set()
    lock = threading.Lock()

    def objective(trial: hypertune.Trial) -> float:
        with lock:
            threads_seen.add(threading.get_ident())
        trial.report(1, loss=trial.params["x"] + 1)
        return trial.params["x"] * trial.params["y"]

    study.optimize(objective, n_workers=4)
    trials = study.trials()
    assert len(trials) == 24 and all(t.state == "COMPLETED" for t in trials)
    assert all(t.value == t.params["x"] * t.params["y"] for t in trials)
    assert len(threads_seen) > 1
    assert study.refresh().state == "COMPLETED"


def test_n_trials_and_dict_results(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    study.optimize(lambda t: {"loss": t.params["x"], "y_seen": t.params["y"]}, n_trials=5)
    study.optimize(lambda t: {"loss": t.params["x"], "y_seen": t.params["y"]}, n_trials=3,
                   n_workers=2)
    trials = study.trials()
    assert len(trials) == 8
    assert all(t.metrics == {"loss": t.params["x"], "y_seen": t.params["y"]} for t in trials)


def test_function_that_finishes_the_trial_itself(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial: hypertune.Trial) -> None:
        if trial.params["y"] > 3:
            trial.infeasible("y too large")
        else:
            trial.complete(loss=trial.params["x"])

    study.optimize(objective, n_trials=6)
    for trial in study.trials():
        assert trial.state == ("INFEASIBLE" if trial.params["y"] > 3 else "COMPLETED")


def test_exception_marks_failed_and_ends_the_run(client: hypertune.Client) -> None:
    # Optuna's FAIL: recorded, left out of the model, and raised.
    study = client.create_study(study_config(unique_name()))
    calls = []

    def objective(trial: hypertune.Trial) -> float:
        calls.append(trial.id)
        if len(calls) == 3:
            raise RuntimeError("diverged")
        return 1.0

    with pytest.raises(RuntimeError, match="diverged"):
        study.optimize(objective, n_trials=10)
    states = [t.state for t in study.trials()]
    assert states == ["COMPLETED", "COMPLETED", "FAILED"]
    assert study.trial(3).failure_reason == "RuntimeError: diverged"
    assert study.trial(3).infeasible_reason == ""


def test_caught_exceptions_are_recorded_and_the_run_goes_on(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial: hypertune.Trial) -> float:
        if trial.id % 3 == 1:
            raise MemoryError("out of memory")  # the parameters' doing
        if trial.id % 3 == 2:
            raise ValueError("bad batch")  # the code's
        return 0.5

    study.optimize(objective, n_trials=6, n_workers=3, catch=(MemoryError, ValueError))
    trials = study.trials()
    assert len(trials) == 6
    for trial in trials:
        if trial.id % 3 == 1:
            assert (trial.state, trial.infeasible_reason) == ("INFEASIBLE", "MemoryError: out of memory")
        elif trial.id % 3 == 2:
            assert (trial.state, trial.failure_reason) == ("FAILED", "ValueError: bad batch")
        else:
            assert trial.state == "COMPLETED"


class TooDeep(Exception):
    pass


def test_infeasible_results_and_declared_exceptions(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    ended = []

    def objective(trial: hypertune.Trial) -> float:
        return [float("nan"), float("inf"), 0.5][trial.id - 1] if trial.id <= 3 else _deeper(trial)

    def _deeper(trial: hypertune.Trial) -> float:
        if trial.id == 4:
            raise TooDeep("12 layers do not fit")
        raise hypertune.Infeasible("batch does not fit")

    study.optimize(objective, n_trials=5, catch=(TooDeep, hypertune.Infeasible),
                   infeasible=(TooDeep,), callbacks=[lambda s, t: ended.append(t.state)])
    stored = {t.id: (t.state, t.infeasible_reason) for t in study.trials()}
    assert stored == {
        1: ("INFEASIBLE", 'metric "loss" is NaN'),
        2: ("INFEASIBLE", 'metric "loss" is infinite'),
        3: ("COMPLETED", ""),
        4: ("INFEASIBLE", "TooDeep: 12 layers do not fit"),
        5: ("INFEASIBLE", "Infeasible: batch does not fit"),
    }
    assert ended == ["INFEASIBLE", "INFEASIBLE", "COMPLETED", "INFEASIBLE", "INFEASIBLE"]


def test_exception_in_a_worker_thread_is_raised(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial: hypertune.Trial) -> float:
        raise KeyError("no such column")

    with pytest.raises(KeyError, match="no such column"):
        study.optimize(objective, n_trials=8, n_workers=2)
    assert all(t.state == "FAILED" for t in study.trials())


@pytest.mark.parametrize(
    "result, message",
    [
        (None, "the function returned None for trial 1"),
        ("0.5", "metric \"loss\": expected a number, got str '0.5'"),
        ({"loss": [1]}, 'metric "loss": expected a number, got list [1]'),
    ],
)
def test_wrong_return_value_names_it(client: hypertune.Client, result, message) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        study.optimize(lambda trial: result, n_trials=1)
    assert message in str(raised.value)
    assert study.trial(1).state == "FAILED"  # the code's mistake, not the parameters'
    assert message in study.trial(1).failure_reason


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"n_trials": -1}, "n_trials: expected None or an integer >= 0, got -1"),
        ({"n_trials": 2.5}, "n_trials: expected None or an integer >= 0, got 2.5"),
        ({"n_workers": 0}, "n_workers: expected an integer >= 1, got 0"),
        ({"catch": "ValueError"}, "catch: expected an exception class or a tuple of them"),
        ({"catch": (ValueError, 3)}, "catch: expected an exception class or a tuple of them"),
    ],
)
def test_bad_arguments(client: hypertune.Client, arguments, message) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(message)):
        study.optimize(lambda trial: 1.0, **arguments)
    assert study.trials() == []


def test_a_grid_study_runs_every_point_once_then_completes(server) -> None:
    # GRID (docs/study-config.md, "Grid search"): 4 x 3 x 2 points over three
    # worker threads, without n_trials: optimize returns once the grid is
    # exhausted and the server has completed the study.
    client = hypertune.Client(server.address)
    study = client.create_study({
        "name": unique_name("grid"),
        "spec": {
            "parameters": [
                {"name": "lr", "double_spec": {"min": 1e-4, "max": 1e-1, "scale": "LOG",
                                               "grid_points": 4}},
                {"name": "layers", "integer_spec": {"min": 1, "max": 3}},
                {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam"]}},
            ],
            "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "algorithm": "GRID",
        },
    })
    seen = []
    lock = threading.Lock()

    def objective(trial: hypertune.Trial) -> float:
        with lock:
            seen.append((trial.params["lr"], trial.params["layers"],
                         trial.params["optimizer"]))
        return trial.params["lr"] * trial.params["layers"]

    study.optimize(objective, n_workers=3, timeout=120)
    assert len(seen) == 24
    assert len(set(seen)) == 24
    assert {lr for lr, _, _ in seen} == {1e-4, 1e-3, 1e-2, 1e-1}
    study = client.get_study(study.name)
    assert study.state == "COMPLETED"
    assert study.trial_counts == {"COMPLETED": 24}
    assert study.best().params == {"lr": 1e-4, "layers": 1,
                                   "optimizer": study.best().params["optimizer"]}

    # A DOUBLE without grid_points is refused, naming it.
    with pytest.raises(hypertune.InvalidArgumentError, match=r'parameters\[0\] \("x"\)\.grid_points'):
        client.create_study({
            "name": unique_name("grid"),
            "spec": {"parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
                     "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
                     "algorithm": "GRID"},
        })
