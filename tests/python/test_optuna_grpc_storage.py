"""hypertuned's door for Optuna's storage protocol (service/optuna/,
docs/optuna-grpc-storage.md), end to end against a real hypertuned.

Debian's Optuna is 3.1, which has no GrpcStorageProxy (4.2+), so these tests
play the calls the proxy makes with stubs generated from hypertune's own
proto/optuna_storage.proto (hypertune.v1.optuna_storage_pb2), then read the
result through hypertune's client and CLI. Where Optuna >= 4.2 is
importable, the last test runs Optuna's own proxy too; otherwise it is
skipped (benchmarks/optuna_grpc_storage.py runs Optuna 4.9's proxy from its
source tree).
"""

from __future__ import annotations

import json
import subprocess

import grpc
import pytest

import hypertune
from helpers import program, unique_name
from test_servers import _on_postgres, postgres  # noqa: F401 (a fixture)
from hypertune.v1 import optuna_storage_pb2 as pb
from hypertune.v1 import optuna_storage_pb2_grpc as pb_grpc

FLOAT = json.dumps({"name": "FloatDistribution",
                    "attributes": {"step": None, "low": -5.0, "high": 5.0, "log": False}})
INT = json.dumps({"name": "IntDistribution",
                  "attributes": {"log": False, "step": 1, "low": 1, "high": 8}})
CATEGORICAL = json.dumps({"name": "CategoricalDistribution",
                          "attributes": {"choices": ["linear", "tree"]}})


@pytest.fixture(name="stub")
def fixture_stub(server):
    with grpc.insecure_channel(server.address) as channel:
        yield pb_grpc.StorageServiceStub(channel)


def run_trial(stub, study_id: int, x: float, n: int, model: int, steps: list[float],
              state=pb.COMPLETE, values=None) -> int:
    """One trial as Optuna's proxy stores it: created RUNNING, parameters one
    at a time, intermediate values, then its state and values."""
    trial_id = stub.CreateNewTrial(
        pb.CreateNewTrialRequest(study_id=study_id, template_trial_is_none=True)).trial_id
    for name, value, distribution in (("x", x, FLOAT), ("n", n, INT),
                                      ("model", model, CATEGORICAL)):
        stub.SetTrialParameter(pb.SetTrialParameterRequest(
            trial_id=trial_id, param_name=name, param_value_internal=value,
            distribution=distribution))
    for step, value in enumerate(steps):
        stub.SetTrialIntermediateValue(pb.SetTrialIntermediateValueRequest(
            trial_id=trial_id, step=step, intermediate_value=value))
    stub.SetTrialUserAttribute(pb.SetTrialUserAttributeRequest(
        trial_id=trial_id, key="seen", value=json.dumps({"x": x})))
    reply = stub.SetTrialStateValues(pb.SetTrialStateValuesRequest(
        trial_id=trial_id, state=state, values=values or []))
    assert reply.trial_updated
    return trial_id


def test_an_optuna_run_is_a_hypertune_study(server, stub):
    name = unique_name("optuna-door")
    study_id = stub.CreateNewStudy(
        pb.CreateNewStudyRequest(study_name=name, directions=[pb.MAXIMIZE])).study_id
    assert stub.GetStudyIdFromName(pb.GetStudyIdFromNameRequest(study_name=name)).study_id \
        == study_id
    stub.SetStudySystemAttribute(pb.SetStudySystemAttributeRequest(
        study_id=study_id, key="metric_names", value='["accuracy"]'))
    first = run_trial(stub, study_id, 1.5, 3, 1, [0.5, 0.7], values=[0.75])
    run_trial(stub, study_id, -2.0, 6, 0, [0.1], state=pb.PRUNED)
    run_trial(stub, study_id, 0.0, 1, 0, [], state=pb.FAIL)

    # Optuna reads back exactly what it wrote.
    got = stub.GetTrial(pb.GetTrialRequest(trial_id=first)).trial
    assert got.number == 0
    assert got.state == pb.COMPLETE
    assert list(got.values) == [0.75]
    assert dict(got.params) == {"x": 1.5, "n": 3.0, "model": 1.0}
    assert json.loads(got.distributions["model"]) == json.loads(CATEGORICAL)
    assert dict(got.intermediate_values) == {0: 0.5, 1: 0.7}
    assert json.loads(got.user_attributes["seen"]) == {"x": 1.5}
    attrs = stub.GetStudySystemAttributes(
        pb.GetStudySystemAttributesRequest(study_id=study_id)).system_attributes
    assert json.loads(attrs["metric_names"]) == ["accuracy"]
    trials = stub.GetTrials(pb.GetTrialsRequest(study_id=study_id,
                                                trial_id_greater_than=-1)).trials
    assert [t.state for t in trials] == [pb.COMPLETE, pb.PRUNED, pb.FAIL]

    # hypertune's client sees the same study.
    with hypertune.Client(server.address) as client:
        study = client.get_study(name)
        assert study.attributes["optuna.storage"] == "grpc"
        assert study.directions == ["MAXIMIZE"]
        listed = study.trials()
        assert [t.state for t in listed] == ["COMPLETED", "STOPPED", "FAILED"]
        assert listed[0].params == {"x": 1.5, "n": 3, "model": "tree"}
        assert listed[0].value == 0.75

    # So do the CLI's trials and export.
    cli = program("hypertune")
    out = subprocess.run([cli, "--server", server.address, "export", name],
                         check=True, capture_output=True, text=True).stdout
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert lines[0]["name"] == name
    assert [line["state"] for line in lines[1:]] == ["COMPLETED", "STOPPED", "FAILED"]


def test_errors_name_the_field_and_use_optunas_codes(stub):
    name = unique_name("optuna-errors")
    study_id = stub.CreateNewStudy(
        pb.CreateNewStudyRequest(study_name=name, directions=[pb.MINIMIZE])).study_id
    with pytest.raises(grpc.RpcError) as taken:
        stub.CreateNewStudy(pb.CreateNewStudyRequest(study_name=name,
                                                     directions=[pb.MINIMIZE]))
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS
    with pytest.raises(grpc.RpcError) as missing:
        stub.GetStudyIdFromName(pb.GetStudyIdFromNameRequest(study_name=name + "-none"))
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND

    trial_id = run_trial(stub, study_id, 1.0, 2, 0, [3.0], values=[1.0])
    with pytest.raises(grpc.RpcError) as finished:
        stub.SetTrialIntermediateValue(pb.SetTrialIntermediateValueRequest(
            trial_id=trial_id, step=5, intermediate_value=1.0))
    assert finished.value.code() == grpc.StatusCode.FAILED_PRECONDITION

    running = stub.CreateNewTrial(
        pb.CreateNewTrialRequest(study_id=study_id, template_trial_is_none=True)).trial_id
    with pytest.raises(grpc.RpcError) as kind:
        stub.SetTrialParameter(pb.SetTrialParameterRequest(
            trial_id=running, param_name="x", param_value_internal=1.0, distribution=INT))
    assert kind.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert '"x"' in kind.value.details()
    # The refused call stored nothing.
    trial = stub.GetTrial(pb.GetTrialRequest(trial_id=running)).trial
    assert dict(trial.params) == {}


def test_a_stored_study_switches_to_hypertunes_sampler(server, stub):
    optuna = pytest.importorskip("optuna", reason="the switch needs Optuna (python3-optuna)")
    import hypertune.optuna  # pylint: disable=import-outside-toplevel

    name = unique_name("optuna-switch")
    study_id = stub.CreateNewStudy(
        pb.CreateNewStudyRequest(study_name=name, directions=[pb.MINIMIZE])).study_id
    for i in range(6):
        run_trial(stub, study_id, i - 2.5, i + 1, i % 2, [], values=[(i - 2.5) ** 2])
    sampler = hypertune.optuna.Sampler(server=server.address, study_name=name, seed=3)
    try:
        study = optuna.create_study(sampler=sampler)
        study.optimize(lambda t: t.suggest_float("x", -5, 5) ** 2
                       + t.suggest_int("n", 1, 8)
                       + (t.suggest_categorical("model", ["linear", "tree"]) == "tree"),
                       n_trials=3)
    finally:
        sampler.close()
    with hypertune.Client(server.address) as client:
        trials = client.get_study(name).trials()
    # The six stored trials stayed; the server suggested three more.
    assert len(trials) == 9
    assert [t.params["x"] for t in trials[:6]] == [i - 2.5 for i in range(6)]
    assert all(t.state == "COMPLETED" for t in trials)
    # Read through the door, the new trials have Optuna parameters too.
    stored = stub.GetTrials(pb.GetTrialsRequest(study_id=study_id,
                                                trial_id_greater_than=-1)).trials
    assert len(stored) == 9
    for trial, mine in zip(stored[6:], trials[6:]):
        assert trial.params["x"] == mine.params["x"]
        assert trial.params["n"] == mine.params["n"]
        assert trial.params["model"] == ["linear", "tree"].index(mine.params["model"])
        assert json.loads(trial.distributions["model"])["attributes"]["choices"] \
            == ["linear", "tree"]


def test_a_standby_refuses_and_names_the_leader(postgres, tmp_path):  # noqa: F811
    # Writes go through the leader, as hypertune.v1's do: on PostgreSQL with
    # two servers, the standby answers UNAVAILABLE naming the leader, and
    # the leader serves the door (its study in PostgreSQL).
    with _on_postgres(str(tmp_path / "leader"), postgres.url()) as leader, \
            _on_postgres(str(tmp_path / "standby"), postgres.url()) as standby:
        with grpc.insecure_channel(leader.address) as to_leader, \
                grpc.insecure_channel(standby.address) as to_standby:
            at_leader = pb_grpc.StorageServiceStub(to_leader)
            at_standby = pb_grpc.StorageServiceStub(to_standby)
            name = unique_name("optuna-pg")
            request = pb.CreateNewStudyRequest(study_name=name, directions=[pb.MINIMIZE])
            with pytest.raises(grpc.RpcError) as refused:
                at_standby.CreateNewStudy(request)
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert leader.address in refused.value.details()
            study_id = at_leader.CreateNewStudy(request).study_id
            run_trial(at_leader, study_id, 0.5, 2, 1, [1.0], values=[0.25])
            trials = at_leader.GetTrials(pb.GetTrialsRequest(
                study_id=study_id, trial_id_greater_than=-1)).trials
            assert [(t.state, list(t.values)) for t in trials] == [(pb.COMPLETE, [0.25])]
            assert dict(trials[0].params) == {"x": 0.5, "n": 2.0, "model": 1.0}


def test_optunas_own_proxy_when_installed(server):
    optuna = pytest.importorskip("optuna")
    if not hasattr(optuna.storages, "GrpcStorageProxy"):
        pytest.skip(f"Optuna {optuna.__version__} has no GrpcStorageProxy (4.2+); "
                    "benchmarks/optuna_grpc_storage.py runs Optuna 4.9's")
    host, port = server.address.rsplit(":", 1)
    storage = optuna.storages.GrpcStorageProxy(host=host, port=int(port))
    name = unique_name("optuna-proxy")
    study = optuna.create_study(study_name=name, storage=storage,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=5)
    with hypertune.Client(server.address) as client:
        assert len(client.get_study(name).trials()) == 5
