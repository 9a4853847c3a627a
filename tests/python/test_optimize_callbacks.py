"""Study.optimize as an Optuna user drives it, against a real hypertuned:
callbacks after each trial (in the calling thread, whatever the number of
workers), study.stop() from a callback or the objective, a timeout that
stops new trials while running ones finish, and the progress bar; with
the bad arguments named."""

from __future__ import annotations

import math
import re
import sys
import threading
import time

import pytest

import hypertune
from hypertune._proto import pb
from helpers import study_config, unique_name


def ended_states(study: hypertune.Study) -> list[str]:
    return [t.state for t in study.trials()]


@pytest.mark.parametrize("n_workers", [1, 3])
def test_callbacks_run_in_the_calling_thread_after_each_trial(
    client: hypertune.Client, n_workers: int
) -> None:
    study = client.create_study(study_config(unique_name()))
    caller = threading.get_ident()
    seen: list[tuple[int, str, float, int]] = []
    other: list[tuple[hypertune.Study, int]] = []

    def record(study_given: hypertune.Study, trial: hypertune.Trial) -> None:
        seen.append((trial.id, trial.state, trial.value, threading.get_ident()))

    study.optimize(
        lambda trial: trial.params["x"],
        n_trials=7,
        n_workers=n_workers,
        callbacks=[record, lambda s, t: other.append((s, t.id))],
    )
    assert sorted(trial_id for trial_id, *_ in seen) == list(range(1, 8))
    stored = {t.id: t for t in study.trials()}
    for trial_id, state, value, thread in seen:
        # The trial as stored once it ended, seen from the caller's thread.
        assert state == "COMPLETED" == stored[trial_id].state
        assert value == stored[trial_id].params["x"]
        assert thread == caller
    # Every callback, in order, each with the study optimized.
    assert [trial_id for _, trial_id in other] == [trial_id for trial_id, *_ in seen]
    assert all(s is study for s, _ in other)


def test_callbacks_see_infeasible_and_stopped_trials(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    seen: dict[int, str] = {}

    def objective(trial: hypertune.Trial) -> float:
        if trial.id == 2:
            raise MemoryError("out of memory")
        if trial.id == 3:
            # Stopped from outside (as the dashboard's stop button does):
            # the next renewal tells the trial, whose completion is STOPPED.
            client._call("StopTrial", pb.StopTrialRequest(study_name=study.name, trial_id=3))
            assert trial.heartbeat()
        return 0.5

    study.optimize(objective, n_trials=3, catch=(MemoryError,),
                   callbacks=[lambda s, t: seen.update({t.id: t.state})])
    assert seen == {1: "COMPLETED", 2: "INFEASIBLE", 3: "STOPPED"}
    assert ended_states(study) == ["COMPLETED", "INFEASIBLE", "STOPPED"]


def test_no_callback_for_the_trial_whose_exception_ends_the_run(
    client: hypertune.Client,
) -> None:
    study = client.create_study(study_config(unique_name()))
    seen: list[int] = []

    def objective(trial: hypertune.Trial) -> float:
        if trial.id == 2:
            raise RuntimeError("diverged")
        return 1.0

    with pytest.raises(RuntimeError, match="diverged"):
        study.optimize(objective, n_trials=5, callbacks=[lambda s, t: seen.append(t.id)])
    assert seen == [1]
    assert ended_states(study) == ["COMPLETED", "FAILED"]


def test_stop_from_a_callback_ends_the_run(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def stop_at_three(study_given: hypertune.Study, trial: hypertune.Trial) -> None:
        if trial.id == 3:
            study_given.stop()

    study.optimize(lambda trial: 1.0, n_trials=20, callbacks=[stop_at_three])
    assert ended_states(study) == ["COMPLETED"] * 3
    # The same Study object optimizes again afterwards: stop() ended one run.
    study.optimize(lambda trial: 1.0, n_trials=2)
    assert len(study.trials()) == 5


def test_stop_with_workers_lets_running_trials_finish(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    n_workers = 3
    stopped_after: list[int] = []

    def stop_at_first(study_given: hypertune.Study, trial: hypertune.Trial) -> None:
        if not stopped_after:
            stopped_after.append(len(study_given.trials()))
            study_given.stop()

    study.optimize(lambda trial: 1.0, n_trials=40, n_workers=n_workers,
                   callbacks=[stop_at_first])
    states = ended_states(study)
    # Trials already asked for when stop() came are run to the end; no
    # worker asks again (each may have been between its check and its ask).
    assert set(states) == {"COMPLETED"}
    assert len(states) <= stopped_after[0] + n_workers


def test_stop_from_the_objective(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial: hypertune.Trial) -> float:
        if trial.id == 2:
            study.stop()
        return 1.0

    study.optimize(objective, n_trials=10)
    assert ended_states(study) == ["COMPLETED", "COMPLETED"]


def test_stop_outside_optimize_is_refused(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.FailedPreconditionError, match="no optimize is running"):
        study.stop()


@pytest.mark.parametrize("n_workers", [1, 2])
def test_callback_exception_is_raised_after_the_trial_is_stored(
    client: hypertune.Client, n_workers: int
) -> None:
    study = client.create_study(study_config(unique_name()))

    def fail_on_second(study_given: hypertune.Study, trial: hypertune.Trial) -> None:
        if trial.id == 2:
            raise ValueError("callback broke")

    with pytest.raises(ValueError, match="callback broke"):
        study.optimize(lambda trial: trial.params["x"], n_trials=20, n_workers=n_workers,
                       callbacks=[fail_on_second])
    trials = study.trials()
    assert study.trial(2).state == "COMPLETED"
    assert study.trial(2).value == study.trial(2).params["x"]
    # The run ended there: every trial it started was finished, few started.
    assert all(t.state == "COMPLETED" for t in trials)
    assert len(trials) < 20
    if n_workers == 1:
        assert len(trials) == 2


def test_timeout_zero_starts_nothing(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    study.optimize(lambda trial: 1.0, timeout=0)
    assert study.trials() == []


@pytest.mark.parametrize("n_workers", [1, 2])
def test_timeout_lets_running_trials_finish_and_starts_no_more(
    client: hypertune.Client, n_workers: int
) -> None:
    study = client.create_study(study_config(unique_name()))
    timeout = 1.0
    began = time.monotonic()

    def objective(trial: hypertune.Trial) -> float:
        # Runs past the time limit: it still completes, and is the last.
        while time.monotonic() < began + timeout + 0.1:
            time.sleep(0.05)
        return trial.params["x"]

    study.optimize(objective, timeout=timeout, n_workers=n_workers)
    states = ended_states(study)
    assert 1 <= len(states) <= n_workers
    assert set(states) == {"COMPLETED"}


def test_timeout_ends_a_wait_at_the_parallel_limit(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_parallel_trials=1))
    held = study.ask()  # the one trial the study runs at a time
    study.optimize(lambda trial: 1.0, timeout=0.5)
    assert [t.state for t in study.trials()] == ["ACTIVE"]
    held.complete(loss=0.2)


def test_progress_bar_shows_the_best_value(client: hypertune.Client, capsys) -> None:
    pytest.importorskip("tqdm", reason="python3-tqdm is not installed")
    study = client.create_study(study_config(unique_name()))
    losses = iter([0.5, 0.25, 0.75])
    study.optimize(lambda trial: next(losses), n_trials=3, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "3/3" in err
    assert "best=0.25" in err
    assert ended_states(study) == ["COMPLETED"] * 3


def test_progress_bar_with_workers_and_several_objectives(
    client: hypertune.Client, capsys
) -> None:
    pytest.importorskip("tqdm", reason="python3-tqdm is not installed")
    config = study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
        {"name": "cost", "goal": "MINIMIZE", "role": "OBJECTIVE"},
    ])
    study = client.create_study(config)
    study.optimize(lambda trial: {"loss": trial.params["x"], "cost": 1.0}, n_trials=4,
                   n_workers=2, show_progress_bar=True)
    err = capsys.readouterr().err
    assert "4/4" in err and "best=" not in err  # no single best of two objectives
    assert len(study.trials()) == 4


def test_progress_bar_without_tqdm_warns_and_runs(
    client: hypertune.Client, monkeypatch
) -> None:
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm: ImportError
    study = client.create_study(study_config(unique_name()))
    with pytest.warns(UserWarning, match=r"show_progress_bar needs tqdm.*python3-tqdm"):
        study.optimize(lambda trial: 1.0, n_trials=2, show_progress_bar=True)
    assert ended_states(study) == ["COMPLETED"] * 2


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"timeout": -1}, "timeout: expected None or seconds >= 0, got -1"),
        ({"timeout": "60"}, "timeout: expected None or seconds >= 0, got '60'"),
        ({"timeout": True}, "timeout: expected None or seconds >= 0, got True"),
        ({"timeout": math.nan}, "timeout: expected None or seconds >= 0, got nan"),
        ({"callbacks": print}, "callbacks: expected a list of functions"),
        ({"callbacks": [print, 3]}, "callbacks[1]: expected a function callback(study, trial), "
                                    "got 3"),
    ],
)
def test_bad_arguments(client: hypertune.Client, arguments, message) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(message)):
        study.optimize(lambda trial: 1.0, n_trials=1, **arguments)
    assert study.trials() == []
