"""The Python client across hypertuned crashes: the server is killed with
SIGKILL in the middle of a study and started again on the same port and
database while the client goes on. Nothing the server acknowledged is
lost, the client reconnects, and a watch resumes after the last change it
saw."""

from __future__ import annotations

import threading

import hypertune
from helpers import poll, study_config, unique_name


def test_kill9_in_the_middle_of_a_study_loses_nothing(own_server) -> None:
    client = hypertune.Client(own_server.address)
    study = client.create_study(study_config(unique_name(), max_trials=30, lease_seconds=5))
    acknowledged: dict[int, tuple[list[dict], dict]] = {}  # id -> (reports, final)
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            while (trial := study.ask()) is not None:
                reports = []
                for step in (1, 2, 3):
                    metrics = {"loss": trial.params["x"] + 1.0 / step}
                    trial.report(step, **metrics)
                    reports.append(metrics)
                final = {"loss": trial.params["x"]}
                trial.complete(**final)
                acknowledged[trial.id] = (reports, final)
        except BaseException as error:  # seen by the test, not lost in the thread
            errors.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    poll(lambda: len(acknowledged) >= 5 or errors, "5 trials completed before the kill")
    own_server.restart()  # kill -9, then the same port and database
    poll(lambda: len(acknowledged) >= 12 or errors, "trials completed after the restart")
    own_server.restart()
    thread.join()
    assert not errors, errors

    assert sorted(acknowledged) == list(range(1, 31))
    stored = {t.id: t for t in study.trials()}
    assert len(stored) == 30
    for trial_id, (reports, final) in acknowledged.items():
        trial = stored[trial_id]
        assert trial.state == "COMPLETED"
        assert trial.metrics == final
        assert [m.metrics for m in trial.measurements] == reports
        assert [m.step for m in trial.measurements] == [1, 2, 3]
    assert study.refresh().state == "COMPLETED"


def test_watch_resumes_after_a_restart(own_server) -> None:
    client = hypertune.Client(own_server.address)
    study = client.create_study(study_config(unique_name()))
    events: list[hypertune.TrialEvent] = []
    watch_errors: list[BaseException] = []

    def watch() -> None:
        try:
            for event in study.watch(timeout=300):
                events.append(event)
                if event.trial.id == 6 and event.trial.state == "COMPLETED":
                    return
        except BaseException as error:
            watch_errors.append(error)

    def completed(upto: int) -> bool:
        done = {e.trial.id for e in events if e.trial.state == "COMPLETED"}
        return done >= set(range(1, upto + 1)) or bool(watch_errors)

    watcher = threading.Thread(target=watch)
    watcher.start()
    for value in (0.1, 0.2, 0.3):
        trial = study.ask()
        trial.report(1, loss=value + 1)
        trial.complete(loss=value)
    poll(lambda: completed(3), "the watch to see trials 1-3 completed")

    own_server.restart()
    for value in (0.4, 0.5, 0.6):
        trial = study.ask()
        trial.report(1, loss=value + 1)
        trial.complete(loss=value)
    watcher.join()
    assert not watch_errors, watch_errors

    sequences = [e.sequence for e in events]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    finals = {e.trial.id: e.trial.metrics["loss"] for e in events if e.trial.state == "COMPLETED"}
    assert finals == {1: 0.1, 2: 0.2, 3: 0.3, 4: 0.4, 5: 0.5, 6: 0.6}
    # Every change the server reports since the start, the watch saw once.
    replay = []
    for event in study.watch(after=0, timeout=1.0):
        replay.append(event.sequence)
    assert set(replay) <= set(sequences)


def test_calls_made_while_the_server_is_down_succeed_once_it_is_back(own_server) -> None:
    client = hypertune.Client(own_server.address)
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    own_server.kill()
    outcome: list[object] = []

    def report() -> None:
        try:
            trial.report(1, loss=0.5)  # retried while the server is away
            outcome.append("reported")
        except BaseException as error:
            outcome.append(error)

    reporter = threading.Thread(target=report)
    reporter.start()
    own_server.start()
    reporter.join()
    assert outcome == ["reported"]
    trial.complete(loss=0.5)
    assert client.get_study(study.name).trial(trial.id).metrics == {"loss": 0.5}
