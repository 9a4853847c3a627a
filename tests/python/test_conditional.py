"""Conditional search spaces end to end: `hypertune worker` on a study
whose `momentum` exists only for optimizer = sgd and `beta2` only for
adam. Every trial holds only its active parameters, and so do
HYPERTUNE_PARAMS, `{name}` substitution (an inactive one becomes the
empty string), the Python accessors, `hypertune trials` CSV (empty cell)
and JSON (absent). Early stopping, multi-fidelity (ASHA) and a history of
externally created trials (CreateTrial; warm start proper is not on this
branch) keep working on such a study; CreateStudy and CreateTrial refuse
bad trees and bad activity, naming the field."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap

import pytest

import hypertune
from hypertune._proto import pb
from helpers import program, unique_name

ACTIVE = {"sgd": {"optimizer", "lr", "momentum"},
          "adam": {"optimizer", "lr", "beta2"},
          "rmsprop": {"optimizer", "lr"}}


def tree_config(name: str, **spec) -> dict:
    base = {
        "parameters": [
            {"name": "optimizer",
             "categorical_spec": {"values": ["sgd", "adam", "rmsprop"]}},
            {"name": "lr", "double_spec": {"min": 1e-4, "max": 1.0, "scale": "LOG"}},
            {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.99},
             "parent": "optimizer", "parent_categories": ["sgd"]},
            {"name": "beta2", "double_spec": {"min": 0.9, "max": 0.9999},
             "parent": "optimizer", "parent_categories": ["adam"]},
        ],
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "algorithm": "GP_BANDIT",
        "seed": 3,
    }
    base.update(spec)
    return {"name": name, "spec": base}


# The program checks what the worker hands it: HYPERTUNE_PARAMS holds only
# the active parameters, and `{momentum} {beta2}` arrive as values or empty
# strings accordingly. Any mismatch exits non-zero (INFEASIBLE).
PROGRAM = """
    import json, math, os, sys
    params = json.loads(os.environ["HYPERTUNE_PARAMS"])
    active = {"sgd": {"optimizer", "lr", "momentum"},
              "adam": {"optimizer", "lr", "beta2"},
              "rmsprop": {"optimizer", "lr"}}[params["optimizer"]]
    if set(params) != active:
        sys.exit(f"HYPERTUNE_PARAMS has {sorted(params)}, want {sorted(active)}")
    optimizer, momentum, beta2 = sys.argv[1:4]
    if optimizer != params["optimizer"]:
        sys.exit("{optimizer} was not substituted")
    for name, arg in (("momentum", momentum), ("beta2", beta2)):
        if (name in active) != (arg != ""):
            sys.exit(f"{{{name}}} became {arg!r}")
    loss = (math.log10(params["lr"]) + 2) ** 2 + (abs(params.get("momentum", 0.9) - 0.9)
                                                   if params["optimizer"] == "sgd" else 0.5)
    steps = int(os.environ.get("STEPS", "1"))
    for step in range(1, steps + 1):
        print(f"hypertune: loss={loss + 1.0 / step} step={step}")
    print(f"hypertune: loss={loss}")
"""


def run_worker(server, study: str, tmp_path, trials: int, env_extra=None) -> str:
    path = tmp_path / "program.py"
    path.write_text(textwrap.dedent(PROGRAM))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **(env_extra or {}))
    env.pop("HYPERTUNE_TRIAL_ID", None)
    result = subprocess.run(
        [program("hypertune"), "--server", server.address, "worker", study,
         "--max-trials", str(trials), "--log-dir", str(tmp_path / "logs"), "--",
         sys.executable, str(path), "{optimizer}", "{momentum}", "{beta2}"],
        env=env, capture_output=True, text=True, timeout=500)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout + result.stderr


def check_only_active(trials) -> None:
    for trial in trials:
        assert set(trial.params) == ACTIVE[trial.params["optimizer"]], trial.params


def cli(server, *args: str) -> str:
    result = subprocess.run([program("hypertune"), "--server", server.address, *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.mark.parametrize("algorithm", ["GP_BANDIT", "TPE", "RANDOM", "QUASI_RANDOM"])
def test_worker_trials_show_only_active_parameters(client, server, tmp_path, algorithm) -> None:
    study = client.create_study(tree_config(unique_name(), algorithm=algorithm, max_trials=10))
    output = run_worker(server, study.name, tmp_path, trials=10)
    trials = study.trials()
    assert len(trials) == 10
    assert all(t.state == "COMPLETED" for t in trials), output
    check_only_active(trials)
    assert len({t.params["optimizer"] for t in trials}) >= 2

    rows = list(csv.DictReader(io.StringIO(cli(server, "trials", study.name, "--format", "csv"))))
    assert len(rows) == 10
    for row in rows:
        for name in ("momentum", "beta2"):
            active = name in ACTIVE[row["param:optimizer"]]
            assert (row[f"param:{name}"] != "") == active, row
    text = cli(server, "trials", study.name, "--format", "json")
    listed = json.loads(text)
    listed = listed if isinstance(listed, list) else listed.get("trials", [])
    for t in listed:
        names = {p["name"] for p in t["parameters"]}
        optimizer = next(p["string_value"] for p in t["parameters"] if p["name"] == "optimizer")
        assert names == ACTIVE[optimizer]


def test_early_stopping_on_a_conditional_study(client, server, tmp_path) -> None:
    study = client.create_study(tree_config(
        unique_name(), max_trials=8,
        early_stopping={"rule": "MEDIAN", "grace_steps": 1, "min_trials": 2}))
    output = run_worker(server, study.name, tmp_path, trials=8, env_extra={"STEPS": "4"})
    trials = study.trials()
    assert len(trials) == 8
    assert all(t.state in ("COMPLETED", "STOPPED") for t in trials), output
    check_only_active(trials)


def test_multi_fidelity_asha_on_a_conditional_study(client, server, tmp_path) -> None:
    study = client.create_study(tree_config(
        unique_name(), max_trials=9,
        early_stopping={"rule": "ASHA", "min_resource": 1, "max_resource": 9,
                        "reduction_factor": 3}))
    output = run_worker(server, study.name, tmp_path, trials=9, env_extra={"STEPS": "9"})
    trials = study.trials()
    assert len(trials) == 9
    assert all(t.state in ("COMPLETED", "STOPPED") for t in trials), output
    check_only_active(trials)


def create_trial(client, study: str, params: dict, loss=None):
    trial = pb.Trial()
    for name, value in params.items():
        p = trial.parameters.add(name=name)
        if isinstance(value, str):
            p.string_value = value
        else:
            p.double_value = value
    if loss is not None:
        trial.state = pb.Trial.COMPLETED
        trial.final_measurement.metrics["loss"] = loss
    return client._call("CreateTrial", pb.CreateTrialRequest(study_name=study, trial=trial),
                        idempotent=False)


@pytest.mark.parametrize("algorithm", ["GP_BANDIT", "TPE"])
def test_history_of_created_trials_then_suggestions(client, server, tmp_path, algorithm) -> None:
    study = client.create_study(tree_config(unique_name(), algorithm=algorithm, max_trials=14))
    given = [({"optimizer": "sgd", "lr": 0.01, "momentum": 0.9}, 0.1),
             ({"optimizer": "sgd", "lr": 0.1, "momentum": 0.5}, 1.4),
             ({"optimizer": "adam", "lr": 0.001, "beta2": 0.999}, 1.5),
             ({"optimizer": "rmsprop", "lr": 0.5}, 4.2)]
    for params, loss in given:
        create_trial(client, study.name, params, loss)
    run_worker(server, study.name, tmp_path, trials=10)
    trials = study.trials()
    assert len(trials) == 14
    check_only_active(trials)
    assert all(t.state == "COMPLETED" for t in trials)


def test_create_trial_validates_activity(client, server) -> None:
    study = client.create_study(tree_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError, match="beta2"):
        create_trial(client, study.name, {"optimizer": "sgd", "lr": 0.1, "momentum": 0.5,
                                          "beta2": 0.99})
    with pytest.raises(hypertune.InvalidArgumentError, match="momentum"):
        create_trial(client, study.name, {"optimizer": "sgd", "lr": 0.1})
    create_trial(client, study.name, {"optimizer": "rmsprop", "lr": 0.1})


@pytest.mark.parametrize("change, field", [
    (lambda p: p[2].update(parent="nope"), r"parameters\[2\]\.parent"),
    (lambda p: p[2].update(parent_categories=["lamb"]), r"parameters\[2\]\.parent_categories\[0\]"),
    (lambda p: p[2].update(parent="lr"), r"parameters\[2\]\.parent"),
    (lambda p: p[0].update(parent="momentum", parent_values=[0.5]), r"parameters\[0\]"),
    (lambda p: p[3].update(name="momentum"), r"parameters\[3\]"),
])
def test_create_study_refuses_bad_trees(client, change, field) -> None:
    config = tree_config(unique_name())
    change(config["spec"]["parameters"])
    with pytest.raises(hypertune.InvalidArgumentError, match=field):
        client.create_study(config)
