"""Trials through the Python client, against a real hypertuned: typed
parameters, reports and completion, infeasible and given-back trials,
early stopping and ASHA pauses, the lease (renewed in the background, a
stale epoch refused), and a trial used as a context manager."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import warnings

import grpc
import pytest

import hypertune
from helpers import poll, study_config, unique_name
from hypertune._proto import pb
from hypertune._retry import failure


def test_params_have_python_types(client: hypertune.Client) -> None:
    study = client.create_study({
        "name": unique_name(),
        "spec": {
            "parameters": [
                {"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1, "scale": "LOG"}},
                {"name": "layers", "integer_spec": {"min": 1, "max": 8}},
                {"name": "batch_size", "discrete_spec": {"values": [16, 32, 64]}},
                {"name": "dropout", "discrete_spec": {"values": [0.0, 0.25, 0.5]}},
                {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam"]}},
            ],
            "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "algorithm": "RANDOM",
            "seed": 11,
        },
    })
    for trial in study.suggest(count=4):
        params = trial.params
        assert list(params) == ["lr", "layers", "batch_size", "dropout", "optimizer"]
        assert type(params["lr"]) is float and 1e-4 <= params["lr"] <= 0.1
        assert type(params["layers"]) is int and 1 <= params["layers"] <= 8
        assert type(params["batch_size"]) is int and params["batch_size"] in (16, 32, 64)
        assert type(params["dropout"]) is float and params["dropout"] in (0.0, 0.25, 0.5)
        assert type(params["optimizer"]) is str and params["optimizer"] in ("sgd", "adam")
        trial.complete(loss=params["lr"])


def test_report_and_complete(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    assert trial.held and trial.state == "ACTIVE" and trial.lease_epoch == 1
    trial.report(1, loss=0.9, accuracy=0.5)
    trial.report(2, {"loss": 0.7, "accuracy": 0.6})
    trial.report(2, loss=0.7, accuracy=0.6)  # the same again: a harmless retry
    # The server answers a report with that measurement alone; the trial in
    # hand keeps its whole curve.
    assert [(m.step, m.metrics["loss"]) for m in trial.measurements] == [(1, 0.9), (2, 0.7)]
    trial.complete(loss=0.65, accuracy=0.62)
    assert not trial.held and trial.state == "COMPLETED"

    stored = study.trial(trial.id)
    assert stored.state == "COMPLETED"
    assert [(m.step, m.metrics) for m in stored.measurements] == [
        (1, {"loss": 0.9, "accuracy": 0.5}), (2, {"loss": 0.7, "accuracy": 0.6})]
    assert all(m.elapsed_seconds >= 0 for m in stored.measurements)
    assert stored.metrics == {"loss": 0.65, "accuracy": 0.62} and stored.value == 0.65
    assert stored.proto.final_measurement.step == 2
    assert stored.end_time >= stored.start_time
    with pytest.raises(hypertune.FailedPreconditionError, match="already finished"):
        trial.report(3, loss=0.1)
    # The objective alone, by value.
    other = study.ask()
    other.complete(0.3)
    assert study.trial(other.id).metrics == {"loss": 0.3}


def test_attributes_of_study_and_trial(client: hypertune.Client) -> None:
    config = study_config(unique_name())
    config["attributes"] = {"dataset": "fashion-mnist v2"}
    study = client.create_study(config)
    assert study.attributes == {"dataset": "fashion-mnist v2"}
    trial = study.ask()
    trial.set_attribute("model", "/ckpt/model.pt")
    trial.set_attribute("epochs_run", 3)
    assert trial.attributes == {"model": "/ckpt/model.pt", "epochs_run": "3"}
    trial.complete(loss=0.4)
    stored = study.trial(trial.id)
    assert stored.attributes == {"model": "/ckpt/model.pt", "epochs_run": "3"}
    # The server's limits name the field.
    other = study.ask()
    other.set_attribute("log", "x" * 5000)
    with pytest.raises(hypertune.InvalidArgumentError, match=r'attributes\["log"\]'):
        other.complete(loss=0.5)
    with pytest.raises(hypertune.FailedPreconditionError, match="not a trial this process holds"):
        stored.set_attribute("k", "v")


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.report("3", loss=0.5), "report: step: expected an integer, got str '3'"),
        (lambda t: t.report(1.5, loss=0.5), "step: expected an integer, got float 1.5"),
        (lambda t: t.report(True, loss=0.5), "step: expected an integer, got bool True"),
        (lambda t: t.report(1, loss="0.5"), 'metric "loss": expected a number, got str \'0.5\''),
        (lambda t: t.report(1, loss=None), 'metric "loss": expected a number, got NoneType'),
        (lambda t: t.report(1, loss=[0.5]), 'metric "loss": expected a number, got list'),
        (lambda t: t.report(1, loss=True), 'metric "loss": expected a number, got bool True'),
        (lambda t: t.report(1, loss=float("nan")), 'metric "loss" is NaN'),
        (lambda t: t.report(1), "report: no metrics"),
        (lambda t: t.report(1, {3: 0.5}), "metric names are strings, got int 3"),
        (lambda t: t.complete(loss="low"), 'complete: metric "loss": expected a number'),
        (lambda t: t.complete(), "complete: no metrics"),
        (lambda t: t.set_checkpoint(""), "set_checkpoint: uri: expected a non-empty string"),
    ],
)
def test_wrong_python_types_name_the_field(client: hypertune.Client, call, message) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        call(trial)
    assert message in str(raised.value)
    assert f"trial {trial.id}" in str(raised.value)
    assert trial.held  # nothing was sent: the trial is still ours
    trial.complete(loss=1.0)


def test_server_refuses_a_step_below_the_latest(client: hypertune.Client) -> None:
    trial = client.create_study(study_config(unique_name())).ask()
    trial.report(5, loss=1.0)
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        trial.report(4, loss=0.5)
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert trial.held
    trial.complete(loss=0.5)


def test_a_report_without_the_objective_is_refused(client: hypertune.Client) -> None:
    # The README's loop with the metric misspelt: stored, it would leave early
    # stopping blind to the whole trial.
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        trial.report(1, los=0.3)
    assert str(raised.value) == (
        f'INVALID_ARGUMENT: trial {trial.id} report: unknown metric "los" and no "loss", '
        "the objective that early stopping judges; the study's metrics are \"loss\"")
    assert trial.held and study.trial(trial.id).measurements == []
    # Metrics the study does not name are kept beside its objective.
    trial.report(1, loss=0.3, train_loss=0.2)
    assert study.trial(trial.id).measurements[0].metrics == {"loss": 0.3, "train_loss": 0.2}
    trial.complete(loss=0.3)

    several = client.create_study(study_config(unique_name(), metrics=[
        {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
        {"name": "latency", "goal": "MINIMIZE", "role": "OBJECTIVE"},
    ]))
    trial = several.ask()
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        trial.report(1, latency=2.0)
    assert str(raised.value).endswith(
        f'trial {trial.id} report: no "acc", the objective that early stopping judges; '
        "the study's metrics are \"acc\", \"latency\"")
    trial.report(1, acc=0.5)
    trial.complete(acc=0.6, latency=2.0)


def test_nan_on_completion_marks_infeasible(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    trial.complete(loss=float("nan"))
    assert trial.state == "INFEASIBLE" and not trial.held
    assert study.trial(trial.id).infeasible_reason == 'metric "loss" is NaN'


def test_infeasible_and_give_back(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_parallel_trials=1))
    first = study.ask()
    first.infeasible("out of memory")
    assert study.trial(first.id).state == "INFEASIBLE"
    assert study.trial(first.id).infeasible_reason == "out of memory"

    second = study.ask()
    second.report(1, loss=0.5)
    second.set_checkpoint("file:///checkpoints/trial-2.pt")
    second.give_back("preempted")
    stored = study.trial(second.id)
    assert stored.state == "REQUESTED"
    assert stored.failure_reason == "preempted"
    assert stored.checkpoint_uri == "file:///checkpoints/trial-2.pt"

    # The next worker gets it back, to resume from its checkpoint.
    resumed = study.ask()
    assert resumed.id == second.id and resumed.lease_epoch == second.lease_epoch + 1
    assert resumed.checkpoint_uri == "file:///checkpoints/trial-2.pt"
    assert [m.step for m in resumed.measurements] == [1]
    resumed.report(2, loss=0.25)
    resumed.complete(loss=0.25)


def test_the_checkpoint_step_is_where_a_handed_over_trial_resumes(
        client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_parallel_trials=1))
    trial = study.ask()
    for step in (1, 2, 3):
        trial.report(step, loss=1.0 / step)
    # A checkpoint saved at step 2, recorded after step 3 was reported.
    trial.set_checkpoint("file:///ckpt/step-2.pt", step=2)
    assert trial.checkpoint_step == 2
    trial.give_back("preempted", preempted=True)

    resumed = study.ask()
    assert (resumed.id, resumed.attempt) == (trial.id, 2)
    assert (resumed.checkpoint_uri, resumed.checkpoint_step) == ("file:///ckpt/step-2.pt", 2)
    assert [m.step for m in resumed.measurements] == [1, 2]
    [earlier] = resumed.earlier_attempts
    assert [m.step for m in earlier.measurements] == [3]
    assert earlier.end_reason == "preempted"
    start = resumed.checkpoint_step + 1
    resumed.report(start, loss=0.3)  # other metrics than the lost step 3's
    resumed.complete(loss=0.3)
    assert study.trial(trial.id).metrics == {"loss": 0.3}


def test_stale_lease_epoch_is_refused(client: hypertune.Client, server) -> None:
    # A lease of 1 s that nobody renews: the trial goes to the next worker.
    study = client.create_study(study_config(unique_name(), lease_seconds=1, max_parallel_trials=1))
    lapsed = hypertune.Client(server.address, client_id="lapsed", heartbeats=False)
    old = lapsed.get_study(study.name).ask()
    old.report(1, loss=0.9)
    new = hypertune.Client(server.address, client_id="new").get_study(study.name).ask()
    assert new.id == old.id and new.lease_epoch == old.lease_epoch + 1

    with pytest.raises(hypertune.LeaseLostError) as raised:
        old.report(2, loss=0.1)
    error = raised.value
    assert error.code == grpc.StatusCode.FAILED_PRECONDITION
    assert isinstance(error, hypertune.FailedPreconditionError)
    assert f"trial {old.id} of study \"{study.name}\" is no longer held under lease epoch 1" in str(error)
    assert not old.held
    # Later calls fail the same way without reaching the server.
    with pytest.raises(hypertune.LeaseLostError):
        old.complete(loss=0.1)

    # A new attempt without a checkpoint: it starts afresh, and the lapsed
    # attempt's curve is kept apart, never the trial's result.
    assert (old.attempt, new.attempt) == (1, 2)
    assert new.measurements == [] and new.checkpoint_step == 0
    new.report(1, loss=0.5)  # step 1 again, with other values
    new.report(2, loss=0.4)
    new.complete(loss=0.4)
    stored = study.trial(old.id)
    assert stored.metrics == {"loss": 0.4}
    assert [m.metrics for m in stored.measurements] == [{"loss": 0.5}, {"loss": 0.4}]
    [earlier] = stored.earlier_attempts
    assert (earlier.number, earlier.client_id) == (1, "lapsed")
    assert [(m.step, m.metrics) for m in earlier.measurements] == [(1, {"loss": 0.9})]


def test_lease_is_renewed_in_the_background(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), lease_seconds=1))
    trial = study.ask()
    granted_until = trial.proto.lease_expire_time_ms
    # Renewed every third of a second: well past its first expiry, still ours.
    poll(lambda: study.trial(trial.id).proto.lease_expire_time_ms > granted_until + 2000,
         "the lease to be renewed past two more seconds")
    assert study.trial(trial.id).state == "ACTIVE"
    assert study.trial(trial.id).lease_epoch == trial.lease_epoch
    trial.complete(loss=0.1)
    assert not trial._lease.running


def test_a_renewal_refused_after_the_completion_loses_no_lease(
        client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    trial.complete(loss=0.1)
    # A background renewal in flight during the completion, refused after
    # it: the completion's own doing, not a lost lease.
    refused = failure(grpc.StatusCode.FAILED_PRECONDITION, "trial is not running")
    assert trial._lease.observe(refused) is None
    assert trial._lease.lost is None
    with pytest.raises(hypertune.FailedPreconditionError, match="already finished"):
        trial.report(2, loss=0.1)


def test_median_rule_stops_a_poor_trial(client: hypertune.Client) -> None:
    study = client.create_study(study_config(
        unique_name(), early_stopping={"rule": "MEDIAN", "min_trials": 3, "grace_steps": 1}))
    for _ in range(3):
        trial = study.ask()
        for step in (1, 2, 3):
            trial.report(step, loss=1.0 / step)
        trial.complete(loss=1.0 / 3)
    poor = study.ask()
    poor.report(1, loss=5.0)
    poor.report(2, loss=5.0)
    assert poor.should_stop and not poor.paused
    assert poor.state == "STOPPING" and "median" in poor.stop_reason.lower()
    assert poor.check_early_stopping()
    poor.complete(loss=5.0)
    assert study.trial(poor.id).state == "STOPPED"


def test_asha_pauses_and_promotes_with_the_checkpoint(client: hypertune.Client) -> None:
    study = client.create_study(study_config(
        unique_name(), max_trials=4, max_parallel_trials=1,
        early_stopping={"rule": "ASHA", "min_resource": 1, "max_resource": 3,
                        "reduction_factor": 3, "pause_at_rungs": True}))
    runs = []
    while (trial := study.ask()) is not None:
        resumed_from = trial.checkpoint_uri
        first = max((m.step for m in trial.measurements), default=0) + 1
        with trial:
            for step in range(first, 4):
                trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}")
                trial.report(step, loss=1.0 - trial.params["x"] / step)
                if trial.should_stop:
                    break
            paused = trial.paused
            trial.complete(loss=1.0 - trial.params["x"] / step)
        runs.append((trial.id, first, step, paused, resumed_from))
        assert len(runs) < 20, runs

    # Every trial paused at rung 1; one was promoted and resumed from the
    # checkpoint it left there, from step 2, under the same id.
    promoted = [r for r in runs if r[1] > 1]
    assert promoted, runs
    trial_id, first, last, _, resumed_from = promoted[0]
    assert (first, last, resumed_from) == (2, 3, f"file:///ckpt/{trial_id}-1")
    assert all(r[3] for r in runs if r[1] == 1 and r[2] == 1)
    states = {t.id: t.state for t in study.trials()}
    assert states[trial_id] == "COMPLETED"
    assert [m.step for m in study.trial(trial_id).measurements] == [1, 2, 3]


def test_suggest_and_concurrent_asks_hand_out_distinct_trials(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    batch = study.suggest(count=3)
    assert len({t.id for t in batch}) == 3
    assert len({t.client_id for t in batch}) == 1
    with pytest.raises(hypertune.InvalidArgumentError, match="count: expected an integer >= 1"):
        study.suggest(count=0)
    got: list[hypertune.Trial] = []
    lock = threading.Lock()

    def ask() -> None:
        trial = study.ask()
        with lock:
            got.append(trial)

    threads = [threading.Thread(target=ask) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ids = [t.id for t in got]
    assert len(set(ids)) == 6 and not set(ids) & {t.id for t in batch}
    for trial in batch + got:
        trial.complete(loss=0.0)


def test_records_do_not_report(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    study.ask().complete(loss=1.0)
    [record] = study.trials()
    assert not record.held
    with pytest.raises(hypertune.FailedPreconditionError, match="a record of the trial"):
        record.report(2, loss=0.5)


def test_with_block_exception_marks_failed(client: hypertune.Client) -> None:
    # Optuna's FAIL: the code failed, not (as far as anyone knows) the
    # parameters, so the optimizer leaves the trial out.
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(ValueError, match="learning rate too high"):
        with study.ask() as trial:
            trial.report(1, loss=1.0)
            raise ValueError("learning rate too high")
    stored = study.trial(trial.id)
    assert stored.state == "FAILED"
    assert stored.failure_reason == "ValueError: learning rate too high"
    assert stored.infeasible_reason == ""
    assert not trial.held


class BadRegion(Exception):
    pass


@pytest.mark.parametrize("error, declared", [
    (hypertune.Infeasible("model too large for the device"), ()),
    (MemoryError("out of memory"), ()),
    (FloatingPointError("overflow encountered"), ()),
    (type("OutOfMemoryError", (RuntimeError,), {})("CUDA out of memory"), ()),
    (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), ()),
    (BadRegion("no such architecture"), (BadRegion,)),
])
def test_with_block_marks_what_the_parameters_caused_infeasible(
        client: hypertune.Client, error, declared) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(type(error)):
        with study.ask() as trial:
            trial.infeasible_exceptions = declared
            raise error
    stored = study.trial(trial.id)
    assert stored.state == "INFEASIBLE"
    assert stored.infeasible_reason == f"{type(error).__name__}: {error}"


def test_with_block_gives_back_on_a_broken_pipe_and_leaves_a_lost_lease(
        client: hypertune.Client, server) -> None:
    # A closed stdout says the worker reading it is gone, not that the
    # parameters failed: the trial is given back, to run again.
    study = client.create_study(study_config(unique_name(), max_parallel_trials=1))
    with pytest.raises(BrokenPipeError):
        with study.ask() as trial:
            trial.report(1, loss=1.0)
            raise BrokenPipeError(32, "Broken pipe")
    stored = study.trial(trial.id)
    assert stored.state == "REQUESTED"
    assert stored.failure_reason.startswith("BrokenPipeError: [Errno 32] Broken pipe")
    assert (stored.retry_count, stored.preemption_count) == (1, 0)
    # A lease lost to another worker: nothing to settle, and the new
    # holder's trial is left as it is.
    lapsed = hypertune.Client(server.address, client_id="lapsed", heartbeats=False)
    with pytest.raises(hypertune.LeaseLostError):
        with lapsed.get_study(study.name).ask() as old:
            client._call("CompleteTrial", pb.CompleteTrialRequest(
                study_name=study.name, trial_id=old.id, lease_epoch=old.lease_epoch,
                worker_failed=True, failure_reason="lost"))
            old.report(2, loss=0.5)
    assert study.trial(old.id).state == "REQUESTED"


def test_with_block_keyboard_interrupt_gives_back(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(KeyboardInterrupt):
        with study.ask() as trial:
            trial.set_checkpoint("file:///ckpt/a.pt")
            raise KeyboardInterrupt
    stored = study.trial(trial.id)
    assert stored.state == "REQUESTED"
    assert stored.failure_reason == "interrupted (KeyboardInterrupt)"
    assert stored.checkpoint_uri == "file:///ckpt/a.pt"
    # Taken away, as a preemption: it spends no retry.
    assert (stored.preemption_count, stored.retry_count) == (1, 0)


def test_with_block_that_completes_and_one_that_does_not(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    with study.ask() as trial:
        trial.complete(loss=0.5)
    assert study.trial(trial.id).state == "COMPLETED"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with study.ask() as forgotten:
            forgotten.report(1, loss=0.5)
    assert "left its with-block unfinished" in str(caught[0].message)
    assert not forgotten._lease.running
    assert study.trial(forgotten.id).state == "ACTIVE"  # until its lease runs out


SIGTERM_SCRIPT = textwrap.dedent("""
    import signal, sys
    import hypertune
    study = hypertune.Client(sys.argv[1]).get_study(sys.argv[2])
    with study.ask() as trial:
        trial.set_checkpoint("file:///ckpt/preempted.pt")
        print(trial.id, flush=True)
        while True:
            signal.pause()
""")


def test_with_block_sigterm_gives_back(client: hypertune.Client, server) -> None:
    study = client.create_study(study_config(unique_name()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    process = subprocess.Popen(
        [sys.executable, "-c", SIGTERM_SCRIPT, server.address, study.name],
        stdout=subprocess.PIPE, env=env, text=True)
    trial_id = int(process.stdout.readline())
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 143  # 128 + SIGTERM, after giving the trial back
    stored = study.trial(trial_id)
    assert stored.state == "REQUESTED"
    assert stored.failure_reason == "preempted (SIGTERM)"
    assert stored.checkpoint_uri == "file:///ckpt/preempted.pt"
    # A preemption, not a lost worker: it spends no retry.
    assert (stored.preemption_count, stored.retry_count) == (1, 0)
