"""A study's history as read back, against a real hypertuned: attributes
of any JSON value round-trip (a str stays the plain string the CLI and the
dashboard show, even one that looks like JSON), and trials_dataframe adds
``user_attrs_KEY`` and ``intermediate_METRIC_STEP`` columns after the
existing ones."""

from __future__ import annotations

import math
import re

import pytest

import hypertune
from hypertune._proto import pb
from helpers import study_config, unique_name

# Every kind of value, and strings that JSON would read as something else.
VALUES = {
    "text": "plain text",
    "text_number": "123",
    "text_list": "[1]",
    "text_null": "null",
    "text_quoted": '"quoted"',
    "text_empty": "",
    "text_unicode": "résumé ✓",
    "number": 123,
    "real": 0.125,
    "negative": -2.5e-07,
    "flag": True,
    "off": False,
    "nothing": None,
    "list": [1, "two", [3.5, None]],
    "nested": {"a": [1, {"b": 2}], "ü": "x"},
}


def test_attributes_of_any_json_value_round_trip(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    for key, value in VALUES.items():
        trial.set_attribute(key, value)
    assert trial.user_attrs == VALUES  # before completion, as it will be stored
    trial.complete(loss=0.5)
    stored = study.trial(trial.id)
    assert stored.user_attrs == VALUES
    for key in ("flag", "off", "number"):
        assert type(stored.user_attrs[key]) is type(VALUES[key])
    # What the CLI and dashboard see: strings as they are, the rest as JSON.
    text = stored.attributes
    assert {k: v for k, v in text.items() if k.startswith("text")} == {
        k: v for k, v in VALUES.items() if k.startswith("text")}
    assert (text["number"], text["flag"], text["nothing"]) == ("123", "true", "null")
    assert text["list"] == '[1,"two",[3.5,null]]'
    # One reserved entry says which are JSON; it is not an attribute of one's own.
    json_keys = sorted(k for k in VALUES if not k.startswith("text"))
    assert stored.proto.attributes["_json_keys"] == ",".join(json_keys)
    assert "_json_keys" not in text and "_json_keys" not in stored.user_attrs


def test_a_value_set_is_copied_and_the_last_one_wins(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    layers = [64, 32]
    trial.set_attribute("layers", layers)
    layers.append(16)  # after the call: not what was set
    trial.set_attribute("kind", ["a"])
    trial.set_attribute("kind", "a")  # a str after all: plain text
    trial.complete(loss=0.5)
    stored = study.trial(trial.id)
    assert stored.user_attrs == {"layers": [64, 32], "kind": "a"}
    assert stored.proto.attributes["_json_keys"] == "layers"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("loss_curve", [1.0, math.nan], 'attribute "loss_curve": expected a str or a JSON value'),
        ("ids", {1, 2}, 'attribute "ids": expected a str or a JSON value (dict, list, number, '
                        "bool, None), got set {1, 2}"),
        ("model", object(), 'attribute "model": expected a str or a JSON value'),
        ("_json_keys", "x", 'attribute "_json_keys" is reserved'),
        ("", "x", "an attribute key must be a non-empty string, got str ''"),
        (3, "x", "an attribute key must be a non-empty string, got int 3"),
    ],
)
def test_bad_attributes_are_named(client: hypertune.Client, key, value, message) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(message)):
        trial.set_attribute(key, value)
    trial.complete(loss=0.5)
    assert study.trial(trial.id).attributes == {}


def test_study_attributes_of_any_json_value(client: hypertune.Client) -> None:
    config = study_config(unique_name())
    config["attributes"] = {"dataset": "fashion-mnist v2"}
    study = client.create_study(config, attributes={"splits": [0.8, 0.2], "version": "2"})
    expected = {"dataset": "fashion-mnist v2", "splits": [0.8, 0.2], "version": "2"}
    assert study.user_attrs == expected
    assert client.get_study(study.name).user_attrs == expected
    assert study.attributes == {"dataset": "fashion-mnist v2", "splits": "[0.8,0.2]",
                                "version": "2"}
    with pytest.raises(hypertune.InvalidArgumentError,
                       match=re.escape('create_study: attributes: attribute "when"')):
        client.create_study(study_config(unique_name()), attributes={"when": object()})


def test_text_written_by_others_stays_text(client: hypertune.Client) -> None:
    # An import stores JSON text without the list of JSON keys (unmarked:
    # text), and another writer may leave a listed value that is not JSON.
    study = client.create_study(study_config(unique_name()))
    trial = pb.Trial(
        state=pb.Trial.REQUESTED,
        parameters=[pb.ParameterValue(name="x", double_value=0.5),
                    pb.ParameterValue(name="y", int_value=2)],
        attributes={"layers_used": "[1,2]", "_json_keys": "broken", "broken": "{not json"},
    )
    client._call("CreateTrial", pb.CreateTrialRequest(study_name=study.name, trial=trial))
    assert study.trial(1).user_attrs == {"layers_used": "[1,2]", "broken": "{not json"}


def finish(study: hypertune.Study, losses: list[float], attributes: dict) -> hypertune.Trial:
    trial = study.ask()
    for step, loss in enumerate(losses, start=1):
        trial.report(step, loss=loss, lr=0.1 / step)
    for key, value in attributes.items():
        trial.set_attribute(key, value)
    trial.complete(loss=losses[-1] if losses else 1.0)
    return trial


EXISTING = ["state", "x", "y", "loss", "step", "elapsed_seconds", "start_time", "end_time",
            "client_id", "infeasible_reason", "feasible"]


def test_dataframe_attribute_and_intermediate_columns(client: hypertune.Client) -> None:
    pandas = pytest.importorskip("pandas", reason="python3-pandas is not installed")
    study = client.create_study(study_config(unique_name()))
    finish(study, [0.9, 0.5, 0.3], {"model": "/ckpt/1.pt", "layers": [64, 32]})
    finish(study, [0.8], {"model": "/ckpt/2.pt", "converged": True})
    finish(study, [], {})

    plain = study.trials_dataframe()
    assert list(plain.columns) == EXISTING + [
        "user_attrs_converged", "user_attrs_layers", "user_attrs_model"]
    frame = study.trials_dataframe(intermediate=True)
    # The existing columns unchanged and first; the objective's curve first.
    assert list(frame.columns) == list(plain.columns) + [
        "intermediate_loss_1", "intermediate_loss_2", "intermediate_loss_3",
        "intermediate_lr_1", "intermediate_lr_2", "intermediate_lr_3",
    ]
    pandas.testing.assert_frame_equal(frame[EXISTING], plain[EXISTING])
    assert list(frame["user_attrs_model"]) == ["/ckpt/1.pt", "/ckpt/2.pt", None]
    assert frame["user_attrs_layers"][1] == [64, 32]
    assert frame["user_attrs_layers"][2] is None
    assert frame["user_attrs_converged"][2] is True
    curves = frame.filter(like="intermediate_loss_")
    assert list(curves.loc[1]) == [0.9, 0.5, 0.3]
    assert curves.loc[2, "intermediate_loss_1"] == 0.8
    assert curves.loc[2, ["intermediate_loss_2", "intermediate_loss_3"]].isna().all()
    assert curves.loc[3].isna().all()
    assert frame.loc[1, "intermediate_lr_2"] == pytest.approx(0.05)


def test_dataframe_of_a_study_without_either(client: hypertune.Client) -> None:
    pytest.importorskip("pandas", reason="python3-pandas is not installed")
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    trial.complete(loss=0.4)
    assert list(study.trials_dataframe(intermediate=True).columns) == EXISTING
    assert list(study.trials_dataframe(states="REQUESTED", intermediate=True).columns) == EXISTING
