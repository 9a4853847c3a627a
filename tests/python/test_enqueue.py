"""Study.enqueue against a real hypertuned: a whole configuration is
queued and handed out before any new suggestion, with its attributes; a
missing, unknown or inactive parameter (conditional spaces included) or a
bad value is refused, named; a partial configuration (``fixed``) is
completed by the server's suggestion once the API has partial trials,
and refused clearly until then."""

from __future__ import annotations

import re

import pytest

import hypertune
from helpers import study_config, unique_name

def tree_config(name: str) -> dict:
    """momentum is active only for sgd, beta2 only for adam."""
    return {"name": name, "spec": {
        "parameters": [
            {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam", "rmsprop"]}},
            {"name": "lr", "double_spec": {"min": 1e-4, "max": 1.0, "scale": "LOG"}},
            {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.99},
             "parent": "optimizer", "parent_categories": ["sgd"]},
            {"name": "beta2", "double_spec": {"min": 0.9, "max": 0.9999},
             "parent": "optimizer", "parent_categories": ["adam"]},
        ],
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "algorithm": "RANDOM",
        "seed": 3,
    }}


def test_enqueued_trials_come_first_in_order(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    first = study.enqueue({"x": 0.25, "y": 2})
    second = study.enqueue({"x": 1, "y": 5.0})  # whole numbers as the spec's types
    assert (first.state, first.params) == ("REQUESTED", {"x": 0.25, "y": 2})
    assert (second.state, second.params) == ("REQUESTED", {"x": 1.0, "y": 5})
    assert [t.id for t in study.trials("REQUESTED")] == [first.id, second.id]

    taken = [study.ask(), study.ask()]
    assert [(t.id, t.params) for t in taken] == [
        (first.id, {"x": 0.25, "y": 2}), (second.id, {"x": 1.0, "y": 5})]
    for trial in taken:
        trial.complete(loss=trial.params["x"])
    suggested = study.ask()  # the queue is empty: a suggestion
    assert suggested.id == second.id + 1
    suggested.complete(loss=0.5)


def test_optimize_runs_the_enqueued_trial_first(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    study.enqueue({"x": 0.5, "y": 3})
    seen = []
    study.optimize(lambda trial: seen.append(trial.params) or 1.0, n_trials=2)
    assert seen[0] == {"x": 0.5, "y": 3} and len(seen) == 2


def test_attributes_of_an_enqueued_trial_and_its_completion(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    queued = study.enqueue({"x": 0.5, "y": 1},
                           attributes={"source": "by hand", "tags": ["a", "b"], "n": 123})
    assert queued.user_attrs == {"source": "by hand", "tags": ["a", "b"], "n": 123}
    assert queued.attributes == {"source": "by hand", "tags": '["a","b"]', "n": "123"}

    trial = study.ask()
    assert trial.id == queued.id and trial.user_attrs == queued.user_attrs
    # Completion adds to them: one JSON key becomes text, one is added.
    trial.set_attribute("n", "123")
    trial.set_attribute("scores", {"f1": 0.5, "ok": True, "none": None})
    trial.complete(loss=0.1)
    stored = study.trial(trial.id)
    assert stored.user_attrs == {"source": "by hand", "tags": ["a", "b"], "n": "123",
                                 "scores": {"f1": 0.5, "ok": True, "none": None}}


def test_conditional_whole_configurations(client: hypertune.Client) -> None:
    study = client.create_study(tree_config(unique_name()))
    sgd = study.enqueue({"optimizer": "sgd", "lr": 0.01, "momentum": 0.9})
    plain = study.enqueue({"optimizer": "rmsprop", "lr": 0.1})
    assert sgd.params == {"optimizer": "sgd", "lr": 0.01, "momentum": 0.9}
    assert plain.params == {"optimizer": "rmsprop", "lr": 0.1}
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('enqueue: params: missing parameter "beta2"')):
        study.enqueue({"optimizer": "adam", "lr": 0.01})
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('parameter "momentum" is not active')):
        study.enqueue({"optimizer": "adam", "lr": 0.01, "beta2": 0.95, "momentum": 0.5})
    assert len(study.trials()) == 2


@pytest.mark.parametrize(
    "params, message",
    [
        ({"x": 0.5}, 'enqueue: params: missing parameter "y"; a whole configuration'),
        ({"x": 0.5, "y": 2, "z": 1}, 'enqueue: params: unknown parameter "z"; the study\'s '
                                     'parameters are "x", "y"'),
        ({"x": "0.5", "y": 2}, 'enqueue: params: parameter "x": expected a number, got str'),
        ({"x": 0.5, "y": 2.5}, 'enqueue: params: parameter "y": expected an integer, got '
                               'float 2.5'),
        ({"x": True, "y": 2}, 'enqueue: params: parameter "x": expected a number, got bool'),
        ({"x": float("nan"), "y": 2}, 'parameter "x": NaN is not a value'),
        ("x=0.5", "enqueue: params: expected a dict, got str"),
    ],
)
def test_bad_whole_configurations_are_named(client: hypertune.Client, params, message) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(ValueError, match=re.escape(message)):
        study.enqueue(params)
    assert study.trials() == []


def test_out_of_bounds_is_refused_by_the_server(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('("y"): value 9 is outside [1, 5]')):
        study.enqueue({"x": 0.5, "y": 9})
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('("x"): value 1.5 is outside [0, 1]')):
        study.enqueue({"x": 1.5, "y": 2})
    assert study.trials() == []


def test_bad_calls(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError, match="give either params"):
        study.enqueue()
    with pytest.raises(hypertune.InvalidArgumentError, match="give either params"):
        study.enqueue({"x": 0.5, "y": 2}, fixed={"x": 0.5})
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('enqueue: fixed: unknown parameter "w"')):
        study.enqueue(fixed={"w": 1})
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('attribute "_json_keys" is reserved')):
        study.enqueue({"x": 0.5, "y": 2}, attributes={"_json_keys": "x"})
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('attribute "s": expected a str or a JSON value')):
        study.enqueue({"x": 0.5, "y": 2}, attributes={"s": {1, 2}})
    assert study.trials() == []


def test_partial_configuration_is_completed_by_the_server(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    queued = study.enqueue(fixed={"y": 4}, attributes={"why": ["y", 4]})
    assert queued.state == "REQUESTED"
    trial = study.ask()
    assert trial.id == queued.id
    assert trial.params["y"] == 4 and set(trial.params) == {"x", "y"}
    assert 0.0 <= trial.params["x"] <= 1.0
    assert trial.user_attrs == {"why": ["y", 4]}
    trial.complete(loss=trial.params["x"])


def test_partial_conditional_configuration(client: hypertune.Client) -> None:
    study = client.create_study(tree_config(unique_name()))
    study.enqueue(fixed={"optimizer": "sgd"})
    study.enqueue(fixed={"optimizer": "adam", "beta2": 0.95})
    sgd, adam = study.ask(), study.ask()
    assert sgd.params["optimizer"] == "sgd" and set(sgd.params) == {"optimizer", "lr", "momentum"}
    assert 1e-4 <= sgd.params["lr"] <= 1.0 and 0.0 <= sgd.params["momentum"] <= 0.99
    assert adam.params["optimizer"] == "adam" and adam.params["beta2"] == 0.95
    assert set(adam.params) == {"optimizer", "lr", "beta2"} and 1e-4 <= adam.params["lr"] <= 1.0
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('parameter "momentum" is not active')):
        study.enqueue(fixed={"optimizer": "adam", "momentum": 0.5})
