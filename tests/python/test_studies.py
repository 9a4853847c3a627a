"""Studies through the Python client, against a real hypertuned: create
(from a dict and from the CLI's JSON config files), get, list, delete,
pause, resume; the history as trials, best trials, a DataFrame and a watch;
bad configs refused with an error that names the field."""

from __future__ import annotations

import json
import math
import os
import subprocess

import grpc
import pytest

import hypertune
from hypertune.v1 import hypertune_pb2
from helpers import ROOT, program, study_config, unique_name


def finish_trials(study: hypertune.Study, losses: list[float]) -> list[hypertune.Trial]:
    """Runs one trial per loss: two reports, then complete with that loss."""
    done = []
    for loss in losses:
        trial = study.ask()
        assert trial is not None
        trial.report(1, loss=loss + 1.0)
        trial.report(2, loss=loss + 0.5)
        trial.complete(loss=loss)
        done.append(trial)
    return done


def test_create_get_list_delete(client: hypertune.Client) -> None:
    name = unique_name()
    created = client.create_study(study_config(name, max_trials=3))
    assert created.name == name
    assert created.state == "ACTIVE"
    assert created.objective == "loss" and created.goal == "MINIMIZE"
    assert [p.name for p in created.spec.parameters] == ["x", "y"]

    fetched = client.get_study(name)
    assert fetched.spec == created.spec
    assert name in [s.name for s in client.list_studies()]

    client.delete_study(name)
    with pytest.raises(hypertune.NotFoundError) as raised:
        client.get_study(name)
    assert raised.value.code == grpc.StatusCode.NOT_FOUND
    assert name in raised.value.message
    assert isinstance(raised.value, LookupError)
    assert name not in [s.name for s in client.list_studies()]


def test_config_file_is_the_clis(client: hypertune.Client, server, tmp_path) -> None:
    path = os.path.join(ROOT, "examples", "study.json")
    from_python = client.create_study(path, name=unique_name("from-python"))
    with open(path) as file:
        config = json.load(file)
    config["name"] = unique_name("from-cli")
    cli_config = tmp_path / "study.json"
    cli_config.write_text(json.dumps(config))
    subprocess.run(
        [program("hypertune"), "--server", server.address, "study", "create", "--config",
         str(cli_config)],
        check=True, capture_output=True,
    )
    from_cli = client.get_study(config["name"])
    assert from_python.spec == from_cli.spec
    assert from_python.spec.parameters[0].double_spec.scale == hypertune_pb2.LOG
    assert from_python.spec.max_trials == config["spec"]["max_trials"]


def test_if_exists(client: hypertune.Client) -> None:
    name = unique_name()
    first = client.create_study(study_config(name, max_trials=5))
    with pytest.raises(hypertune.AlreadyExistsError):
        client.create_study(study_config(name, max_trials=5))
    # A script run again loads the study it created the first time.
    again = client.create_study(study_config(name, max_trials=5), if_exists="load")
    assert again.name == first.name and again.spec == first.spec
    # ... unless the config changed since: that would silently be ignored.
    with pytest.raises(hypertune.AlreadyExistsError, match="max_trials"):
        client.create_study(study_config(name, max_trials=9), if_exists="load")
    with pytest.raises(hypertune.InvalidArgumentError, match="if_exists"):
        client.create_study(study_config(name), if_exists="replace")


def test_pause_and_resume(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    study.pause()
    assert study.state == "PAUSED"
    assert study.suggest() == []
    assert client.get_study(study.name).state == "PAUSED"
    study.resume()
    assert study.state == "ACTIVE"
    [trial] = study.suggest()
    assert trial.state == "ACTIVE"
    trial.complete(loss=1.0)


def test_unknown_parameter_type_names_the_field(client: hypertune.Client) -> None:
    config = study_config(unique_name())
    config["spec"]["parameters"].append({"name": "lr", "float_spec": {"min": 0, "max": 1}})
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        client.create_study(config)
    message = str(raised.value)
    assert 'spec.parameters[2] ("lr").float_spec' in message
    assert 'unknown parameter type "float_spec"' in message
    assert "double_spec" in message  # what would have been right
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "change, field, problem",
    [
        (lambda c: c["spec"]["parameters"][0]["double_spec"].update(min="a"),
         'spec.parameters[0] ("x").double_spec.min', "expected a number, got str 'a'"),
        (lambda c: c["spec"]["parameters"][0]["double_spec"].update(scale="LOGG"),
         'spec.parameters[0] ("x").double_spec.scale', "unknown Scale str 'LOGG'"),
        (lambda c: c["spec"].update(max_trials=1.5),
         "spec.max_trials", "expected an integer, got float 1.5"),
        (lambda c: c["spec"].update(max_trials=True),
         "spec.max_trials", "expected an integer, got bool True"),
        (lambda c: c["spec"].update(algorithm="BAYES"),
         "spec.algorithm", "expected one of: RANDOM, QUASI_RANDOM, GP_BANDIT, TPE"),
        (lambda c: c.update(name=3), "name", "expected a string, got int 3"),
        (lambda c: c["spec"].update(parameters={"name": "x"}),
         "spec.parameters", "expected a list, got dict"),
        (lambda c: c["spec"]["metrics"][0].update(goal=7),
         'spec.metrics[0] ("loss").goal', "unknown Goal int 7"),
        (lambda c: c["spec"].update(early_stopping={"rule": "ASHA", "max_resource": [9]}),
         "spec.early_stopping.max_resource", "expected an integer, got list [9]"),
        (lambda c: c["spec"].update(seeds=1), "spec.seeds", 'unknown field "seeds"'),
    ],
)
def test_wrong_types_name_the_field(client: hypertune.Client, change, field, problem) -> None:
    config = study_config(unique_name())
    change(config)
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        client.create_study(config)
    assert f"study config: {field}: " in str(raised.value)
    assert problem in str(raised.value)


def test_bad_json_file_names_the_file_and_line(client: hypertune.Client, tmp_path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{\n  "name": "broken",\n  "spec": {,}\n}\n')
    with pytest.raises(hypertune.InvalidArgumentError, match=r"broken\.json: not valid JSON \(line 3"):
        client.create_study(str(path))
    path.write_text(json.dumps(study_config("broken", max_trials="many")))
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=r"broken\.json: spec\.max_trials: expected an integer"):
        client.create_study(path)


def test_server_refusals_keep_its_message(client: hypertune.Client) -> None:
    # The server's own rules (a name holds letters, digits and "._-"; min <
    # max) come back as the same exception, with the server's message.
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        client.create_study(study_config("has a space"))
    assert raised.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "name" in raised.value.message
    config = study_config(unique_name())
    config["spec"]["parameters"][0]["double_spec"] = {"min": 2.0, "max": 1.0}
    with pytest.raises(hypertune.InvalidArgumentError, match="parameters"):
        client.create_study(config)


def test_history_best_and_states(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), max_trials=6))
    finish_trials(study, [0.7, 0.2, 0.9])
    bad = study.ask()
    bad.infeasible("out of memory")
    running = study.ask()

    best = study.best()
    assert best is not None and best.value == 0.2 and best.metrics == {"loss": 0.2}
    assert best.state == "COMPLETED"
    assert [t.id for t in study.optimal_trials()] == [best.id]

    trials = study.trials()
    assert [t.id for t in trials] == [1, 2, 3, 4, 5]
    assert [t.state for t in trials] == ["COMPLETED"] * 3 + ["INFEASIBLE", "ACTIVE"]
    assert [m.step for m in trials[0].measurements] == [1, 2]
    assert trials[0].measurements[1].metrics == {"loss": 1.2}
    assert trials[3].infeasible_reason == "out of memory"
    assert [t.id for t in study.trials(states="COMPLETED")] == [1, 2, 3]
    assert [t.id for t in study.trials(states=["infeasible", "ACTIVE"])] == [4, 5]
    with pytest.raises(hypertune.InvalidArgumentError, match="states: unknown trial state 'DONE'"):
        study.trials(states=["DONE"])
    assert study.refresh().trial_counts == {"COMPLETED": 3, "INFEASIBLE": 1, "ACTIVE": 1}
    running.complete(loss=0.5)


def test_best_of_several_objectives_points_to_optimal_trials(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), metrics=[
        {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
        {"name": "latency", "goal": "MINIMIZE", "role": "OBJECTIVE"},
    ]))
    for acc, latency in [(0.9, 5.0), (0.8, 2.0), (0.7, 6.0)]:  # the last is dominated
        study.ask().complete(acc=acc, latency=latency)
    for loaded in (study, client.get_study(study.name)):
        with pytest.raises(hypertune.FailedPreconditionError) as raised:
            loaded.best()
        assert str(raised.value) == (
            f"FAILED_PRECONDITION: study {study.name!r} best(): the study has several "
            "objectives (acc, latency), so no single best trial; study.optimal_trials() "
            "answers the trials none beats on every objective (the Pareto front)")
    front = sorted(study.optimal_trials(), key=lambda t: t.id)
    assert [(t.id, t.metrics) for t in front] == [
        (1, {"acc": 0.9, "latency": 5.0}), (2, {"acc": 0.8, "latency": 2.0})]
    with pytest.raises(hypertune.FailedPreconditionError, match=(
            r"trial 1 value: the study has several objectives \(acc, latency\), so a trial "
            "has no single value; trial.metrics holds each one's")):
        front[0].value

    # One objective beside a constraint and a recorded metric still has a best.
    single = client.create_study(study_config(unique_name(), metrics=[
        {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
        {"name": "memory", "role": "CONSTRAINT", "upper_bound": 10},
        {"name": "latency", "goal": "MINIMIZE", "role": "RECORDED"},
    ]))
    for acc, memory in [(0.9, 12.0), (0.8, 4.0), (0.7, 1.0)]:  # the first is too big
        single.ask().complete(acc=acc, memory=memory, latency=1.0)
    best = single.best()
    assert best is not None and best.id == 2 and best.value == 0.8


def test_update_raises_the_budget_and_records_it(client: hypertune.Client) -> None:
    study = client.create_study(study_config(
        unique_name(), max_trials=2, early_stopping={"rule": "MEDIAN"}))
    finish_trials(study, [0.5, 0.4])
    assert study.ask() is None  # the budget is spent
    assert study.refresh().state == "COMPLETED"
    with pytest.raises(hypertune.FailedPreconditionError, match="--max-trials N"):
        study.resume()
    # A field the study's rule does not read is refused, naming it.
    with pytest.raises(hypertune.InvalidArgumentError,
                       match='"early_stopping.max_resource" does not apply'):
        study.update(early_stopping={"max_resource": 9})
    study.update(max_trials=3, early_stopping={"min_trials": 4})
    assert study.state == "ACTIVE"
    assert study.spec.max_trials == 3
    [change] = study.changes
    assert [(f.path, f.before, f.after) for f in change.fields] == [
        ("max_trials", "2", "3"), ("early_stopping.min_trials", "0", "4")]
    wider = [{"name": "x", "double_spec": {"min": -1.0, "max": 2.0}},
             {"name": "y", "integer_spec": {"min": 1, "max": 9}}]
    study.update(parameters=wider)
    assert study.spec.parameters[1].integer_spec.max == 9
    with pytest.raises(hypertune.FailedPreconditionError, match="drops values of the old one"):
        study.update(parameters=[{"name": "x", "double_spec": {"min": 0.9, "max": 2.0}},
                                 wider[1]])
    assert study.ask() is not None


def test_several_objectives_and_a_constraint(client: hypertune.Client) -> None:
    study = client.create_study(study_config(
        unique_name(),
        metrics=[
            {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
            {"name": "latency", "goal": "MINIMIZE", "role": "OBJECTIVE"},
            {"name": "memory", "role": "CONSTRAINT", "upper_bound": 10},
        ],
    ))
    assert study.objectives == ["acc", "latency"]
    assert study.objective == "acc" and study.goal == "MAXIMIZE"
    results = [  # acc, latency, memory: two trade off, one dominated, one too big
        (0.9, 5.0, 4.0), (0.8, 2.0, 8.0), (0.85, 6.0, 1.0), (0.99, 1.0, 11.0)]
    trials = []
    for acc, latency, memory in results:
        trial = study.ask()
        with pytest.raises(hypertune.InvalidArgumentError, match='missing "memory"'):
            trial.complete(acc=acc, latency=latency)
        trial.complete(acc=acc, latency=latency, memory=memory)
        trials.append(trial)
    assert [t.feasible for t in study.trials()] == [True, True, True, False]
    front = sorted(t.id for t in study.optimal_trials())
    assert front == [trials[0].id, trials[1].id]


def test_trials_dataframe(client: hypertune.Client) -> None:
    pandas = pytest.importorskip("pandas", reason="python3-pandas is not installed")
    study = client.create_study(study_config(unique_name()))
    done = finish_trials(study, [0.3, 0.1])
    open_trial = study.ask()
    frame = study.trials_dataframe()

    assert list(frame.index) == [1, 2, 3] and frame.index.name == "id"
    assert list(frame.columns) == [
        "state", "x", "y", "loss", "step", "elapsed_seconds", "start_time", "end_time",
        "client_id", "infeasible_reason", "feasible",
    ]
    assert list(frame["state"]) == ["COMPLETED", "COMPLETED", "ACTIVE"]
    assert list(frame["feasible"]) == [True, True, None]
    assert list(frame["loss"][:2]) == [0.3, 0.1] and math.isnan(frame["loss"][3])
    assert list(frame["x"]) == [t.params["x"] for t in done + [open_trial]]
    assert list(frame["y"]) == [t.params["y"] for t in done + [open_trial]]
    assert frame["y"].dtype.kind == "i"
    assert list(frame["step"][:2]) == [2, 2]
    assert isinstance(frame["start_time"][1], pandas.Timestamp)
    assert frame["end_time"][1] >= frame["start_time"][1]
    assert pandas.isna(frame["end_time"][3])
    assert frame.loc[frame["loss"].idxmin()].name == 2
    assert list(study.trials_dataframe(states="ACTIVE").index) == [3]
    open_trial.complete(loss=1.0)


def test_watch_yields_changes_and_resumes_after_a_sequence(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    finish_trials(study, [0.5])
    events = []
    for event in study.watch():
        events.append(event)
        if event.trial.state == "COMPLETED":
            break
    sequences = [e.sequence for e in events]
    assert sequences == sorted(set(sequences))
    assert events[-1].trial.id == 1 and events[-1].trial.metrics == {"loss": 0.5}

    # Resuming after the last sequence seen shows only what came later.
    later = study.ask()
    later.report(1, loss=3.0)
    seen = []
    for event in study.watch(after=events[-1].sequence):
        seen.append(event)
        if event.trial.measurements:
            break
    assert all(e.sequence > events[-1].sequence for e in seen)
    assert {e.trial.id for e in seen} == {2}
    assert seen[-1].trial.measurements[0].metrics == {"loss": 3.0}
    later.complete(loss=3.0)
    # A watch with a timeout ends by itself.
    assert [e.trial.id for e in study.watch(after=seen[-1].sequence, timeout=0.5)] == [2]


def test_client_defaults_come_from_the_environment(server, monkeypatch) -> None:
    monkeypatch.setenv("HYPERTUNE_SERVER", server.address)
    monkeypatch.setenv("HYPERTUNE_CLIENT_ID", "notebook-7")
    with hypertune.Client() as client:
        assert client.server == server.address
        assert client.client_id == "notebook-7"
        study = client.create_study(study_config(unique_name()))
        [trial] = study.suggest()
        assert trial.client_id == "notebook-7"
        trial.complete(loss=0.0)
    monkeypatch.delenv("HYPERTUNE_SERVER")
    assert hypertune.Client().server == hypertune.DEFAULT_SERVER == "127.0.0.1:50051"
    monkeypatch.setenv("HYPERTUNE_TLS_CA", "/nonexistent/ca.pem")
    with pytest.raises(hypertune.InvalidArgumentError, match='tls_ca: cannot read "/nonexistent/ca.pem"'):
        hypertune.Client(server.address)


def test_token_from_the_environment(tmp_path, monkeypatch) -> None:
    from hypertuned_process import Hypertuned

    tokens = tmp_path / "tokens.txt"
    tokens.write_text("s3cret alice\n")
    with Hypertuned(str(tmp_path), ["--auth-token-file", str(tokens)]) as server:
        with pytest.raises(hypertune.UnauthenticatedError) as raised:
            hypertune.Client(server.address).list_studies()
        assert raised.value.code == grpc.StatusCode.UNAUTHENTICATED
        monkeypatch.setenv("HYPERTUNE_TOKEN", "s3cret")
        study = hypertune.Client(server.address).create_study(study_config(unique_name()))
        assert study.proto.owner == "alice"
        with pytest.raises(hypertune.UnauthenticatedError):
            hypertune.Client(server.address, token="wrong").list_studies()


def test_unreachable_server_raises_unavailable_after_the_retries() -> None:
    from hypertuned_process import free_port

    client = hypertune.Client(f"127.0.0.1:{free_port()}", max_attempts=2, initial_backoff=0.01)
    with pytest.raises(hypertune.UnavailableError) as raised:
        client.list_studies()
    assert raised.value.attempts == 2
    assert "ListStudies to 127.0.0.1:" in raised.value.message
    assert "failed after 2 attempts" in raised.value.message
    assert isinstance(raised.value, ConnectionError)
