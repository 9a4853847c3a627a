"""The shared fixtures (testing/fixtures/README.md) through the Python
client: Optuna spaces inferred by the server over gRPC and by the Optuna
bridge from Optuna's own FrozenTrials, the identifier pattern GetServerInfo
publishes, and metric roles as a study's answer carries them."""

from __future__ import annotations

import json
import os
import random
import re
from typing import Any

import pytest

import hypertune
from helpers import unique_name
from hypertune import _server_info, _space
from hypertune._proto import objective_metrics, pb
from google.protobuf import json_format

FIXTURES = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
    "testing", "fixtures")
SPACES = sorted(
    os.path.join(FIXTURES, "optuna_spaces", name)
    for name in os.listdir(os.path.join(FIXTURES, "optuna_spaces"))
    if name.endswith(".json"))


def load(path: str) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def answer_as_fixture(answer: Any) -> dict:
    return {
        "parameters": [_space.spec_dict(p.spec) for p in answer.parameters],
        "optuna_names": [p.optuna_name for p in answer.parameters],
        "left_out": sorted(l.optuna_name for l in answer.left_out),
        "kept": [t.kept for t in answer.trials],
    }


def expected_of(fixture: dict) -> dict:
    expected = dict(fixture["expected"])
    expected["left_out"] = sorted(expected["left_out"])
    return expected


@pytest.mark.parametrize("path", SPACES, ids=os.path.basename)
def test_the_server_infers_each_space_in_any_order(client: hypertune.Client, path: str) -> None:
    fixture = load(path)
    request = json_format.ParseDict(fixture["request"], pb.InferOptunaSpaceRequest())
    expected = expected_of(fixture)
    answer = client.transport.call("InferOptunaSpace", request)
    assert answer_as_fixture(answer) == expected
    rng = random.Random(5)
    for _ in range(3):
        shuffled = pb.InferOptunaSpaceRequest()
        shuffled.CopyFrom(request)
        for trial in shuffled.trials:
            params = list(trial.params)
            rng.shuffle(params)
            del trial.params[:]
            trial.params.extend(params)
        assert answer_as_fixture(client.transport.call("InferOptunaSpace", shuffled)) == expected


@pytest.mark.parametrize("path", SPACES, ids=os.path.basename)
def test_the_optuna_bridge_infers_the_same_space(client: hypertune.Client, path: str) -> None:
    optuna = pytest.importorskip("optuna", reason="the Optuna bridge needs Optuna")
    import hypertune.optuna  # pylint: disable=import-outside-toplevel
    from optuna.distributions import json_to_distribution  # pylint: disable=import-outside-toplevel
    from optuna.trial import TrialState  # pylint: disable=import-outside-toplevel

    fixture = load(path)
    request = fixture["request"]
    trials = []
    for trial in request["trials"]:
        state = TrialState[trial["state"]]
        params, distributions = {}, {}
        for param in trial["params"]:  # in the fixture's (alphabetical) order
            distribution = json_to_distribution(request["distributions"][param["distribution"]])
            distributions[param["name"]] = distribution
            params[param["name"]] = distribution.to_external_repr(param["value"])
        trials.append(optuna.trial.create_trial(
            state=state, value=None if state == TrialState.FAIL else 1.0,
            params=params, distributions=distributions))
    parameters, left_out = hypertune.optuna.infer_parameters(trials, client)
    expected = fixture["expected"]
    # The bridge holds no parameter the server would rename, nor its children.
    renamed = {spec["name"] for spec, name in zip(expected["parameters"],
                                                   expected["optuna_names"])
               if spec["name"] != name}
    assert parameters == [spec for spec in expected["parameters"]
                          if spec["name"] not in renamed
                          and spec.get("parent") not in renamed]
    assert set(expected["left_out"]) <= set(left_out)


def test_the_identifier_pattern_is_the_servers(client: hypertune.Client) -> None:
    fixture = load(os.path.join(FIXTURES, "identifiers.json"))
    info = _server_info.server_info(client)
    assert info.identifier_pattern == fixture["pattern"]
    assert _server_info.server_info(client) is info  # cached per client
    for name in fixture["valid"]:
        assert re.fullmatch(info.identifier_pattern, name), name
        assert _server_info.is_identifier(client, name)
    for name in fixture["invalid"]:
        assert not re.fullmatch(info.identifier_pattern, name), name
        assert not _server_info.is_identifier(client, name)
    assert _server_info.limits(client).max_values_per_parameter >= 2


def test_metric_roles_are_the_servers(client: hypertune.Client) -> None:
    fixture = load(os.path.join(FIXTURES, "metric_roles.json"))
    for case in fixture["cases"]:
        spec = pb.StudySpec()
        for metric in case["metrics"]:
            json_format.ParseDict(metric, spec.metrics.add())
        objectives = [m["name"] for m, role in zip(case["metrics"], case["roles"])
                      if role == "OBJECTIVE"]
        # The client's rule for servers without metric_roles.
        assert [m.name for m in objective_metrics(spec)] == objectives, case["name"]
        study = client.create_study({
            "name": unique_name("roles"),
            "spec": {"parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}}],
                     "metrics": case["metrics"], "algorithm": "RANDOM"},
        })
        roles = [pb.MetricSpec.Role.Name(r) for r in study._proto.metric_roles]  # pylint: disable=protected-access
        assert roles == case["roles"], case["name"]
        assert study.objectives == objectives, case["name"]
