"""Transfer and cost-aware studies through the Python client, against a
real hypertuned: the spec fields travel from a dict config, the prior
study steers the new study's second trial, and bad combinations are refused
naming the field."""

from __future__ import annotations

import math

import pytest

import hypertune
from helpers import study_config, unique_name


def run(study: hypertune.Study, trials: int, loss) -> None:
    for _ in range(trials):
        trial = study.ask()
        assert trial is not None
        trial.complete(loss=loss(trial.params["x"], trial.params["y"]), cost=1.0)


def test_a_prior_study_steers_the_second_trial(client: hypertune.Client) -> None:
    metrics = [{"name": "loss", "goal": "MINIMIZE"}, {"name": "cost", "goal": "MINIMIZE"}]
    parameters = [
        {"name": "x", "double_spec": {"min": 0.0, "max": 1.0}},
        {"name": "y", "double_spec": {"min": 0.0, "max": 1.0}},
    ]
    earlier = client.create_study(study_config(
        unique_name("earlier"), parameters=parameters, metrics=metrics,
        algorithm="GP_BANDIT"))
    # The earlier study's optimum, (0.8, 0.2), is far from the centre.
    run(earlier, 20, lambda x, y: (x - 0.8) ** 2 + (y - 0.2) ** 2)

    later = client.create_study(study_config(
        unique_name("later"), parameters=parameters, metrics=metrics,
        algorithm="GP_BANDIT", prior_studies=[earlier.name], cost_aware=True,
        cost_metric="cost"))
    assert list(later.spec.prior_studies) == [earlier.name]
    assert later.spec.cost_aware and later.spec.cost_metric == "cost"
    first, second = later.ask(), later.ask()
    assert (first.params["x"], first.params["y"]) == (0.5, 0.5)  # the design's centre
    assert math.hypot(second.params["x"] - 0.8, second.params["y"] - 0.2) < 0.2
    # Nothing of the earlier study was copied in.
    assert len(later.trials()) == 2


def test_bad_transfer_and_cost_fields_are_refused(client: hypertune.Client) -> None:
    with pytest.raises(hypertune.NotFoundError, match=r"study\.spec\.prior_studies\[0\]"):
        client.create_study(study_config(unique_name(), algorithm="GP_BANDIT",
                                         prior_studies=["no-such-study"]))
    with pytest.raises(hypertune.InvalidArgumentError, match=r"study\.spec\.cost_aware"):
        client.create_study(study_config(unique_name(), algorithm="TPE", cost_aware=True))
