"""Early stopping that sees every objective and constraint, against a real
hypertuned through the Python client and the CLI: MO-ASHA keeps the end of
the Pareto front that the first objective alone would stop, a trial whose
constraint metric is predicted to miss its bound is stopped, paused trials
are promoted in the rung's multi-objective order, and bad settings are
refused naming the field (docs/early-stopping.md, "Several objectives")."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

import hypertune
from helpers import program, unique_name
from hypertune._proto import pb


def mo_config(name: str, **early_stopping: Any) -> dict:
    """Two objectives (acc up, secs down) and a constraint (memory <= 100)."""
    rule = {"rule": "ASHA", "min_resource": 1, "max_resource": 9, "reduction_factor": 3}
    rule.update(early_stopping)
    return {
        "name": name,
        "spec": {
            "parameters": [{"name": "x", "double_spec": {"min": 0.0, "max": 1.0}}],
            "metrics": [
                {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
                {"name": "secs", "goal": "MINIMIZE", "role": "OBJECTIVE"},
                {"name": "memory", "role": "CONSTRAINT", "upper_bound": 100},
            ],
            "algorithm": "RANDOM",
            "seed": 3,
            "max_parallel_trials": 1,
            "early_stopping": rule,
        },
    }


# Per trial, in the order asked: (acc, secs) at every step, and memory at
# step s. Trials 2-5 are dominated by trial 1; trial 6 is the fastest and the
# least accurate (the front's other end); trial 7 is the most accurate but
# its memory grows by 30 a step (270 at step 9, over the bound); trial 8's
# memory stays at 50.
PLAN = [
    ((0.90, 5.0), lambda s: 10.0),
    ((0.80, 6.0), lambda s: 10.0),
    ((0.70, 7.0), lambda s: 10.0),
    ((0.60, 8.0), lambda s: 10.0),
    ((0.50, 9.0), lambda s: 10.0),
    ((0.10, 1.0), lambda s: 10.0),
    ((0.95, 5.0), lambda s: 30.0 * s),
    ((0.96, 4.0), lambda s: 50.0),
]


def run_plan(study: hypertune.Study) -> dict[int, tuple[int, str]]:
    """Runs PLAN's trials one at a time, reporting every step until told to
    stop; returns each trial's last step and stop reason by id."""
    ran = {}
    for (acc, secs), memory in PLAN:
        trial = study.ask()
        assert trial is not None
        step = 0
        with trial:
            for step in range(1, 10):
                trial.report(step, acc=acc, secs=secs, memory=memory(step))
                if trial.should_stop:
                    break
            trial.complete(acc=acc, secs=secs, memory=memory(step))
        ran[trial.id] = (step, study.trial(trial.id).stop_reason)
    return ran


def test_mo_asha_keeps_the_front_and_stops_on_a_constraint_forecast(
    client: hypertune.Client,
) -> None:
    study = client.create_study(mo_config(unique_name(), stop_on_constraints=True,
                                          multi_objective="EPSILON_NET"))
    ran = run_plan(study)
    ids = sorted(ran)
    states = {t.id: t.state for t in study.trials()}
    # Trials 2-5 stop at rung 1 (dominated, outside the top 1/3).
    for i in ids[1:5]:
        assert ran[i][0] == 1 and states[i] == "STOPPED", (i, ran[i])
    # Trial 6 is the front's far end: second in the epsilon-net of six, in
    # the top two, it goes on past rung 1 (it then meets rung 3).
    assert ran[ids[5]][0] > 1, ran[ids[5]]
    # Trial 7 leads rung 1 but its memory is forecast at 270 > 100: stopped
    # at step 3, the first with three points.
    assert ran[ids[6]][0] == 3 and states[ids[6]] == "STOPPED", ran[ids[6]]
    assert "constraint: memory is predicted to end at 270" in ran[ids[6]][1]
    # Trial 8 (memory flat at 50, the best point) runs to the end.
    assert ran[ids[7]][0] == 9 and states[ids[7]] == "COMPLETED", ran[ids[7]]


@pytest.mark.parametrize("objectives, early_stopping, default", [
    (2, {}, "HYPERVOLUME"),
    (3, {}, "EPSILON_NET"),
    (2, {"pause_at_rungs": True, "promote_by_model": True}, "FIRST_OBJECTIVE"),
])
def test_the_server_writes_the_default_out(client: hypertune.Client, objectives: int,
                                           early_stopping: dict, default: str) -> None:
    config = mo_config(unique_name(), **early_stopping)
    if objectives == 3:
        config["spec"]["metrics"].append({"name": "size", "goal": "MINIMIZE",
                                          "role": "OBJECTIVE"})
    study = client.create_study(config)
    stored = client.get_study(study.name).spec.early_stopping
    assert pb.EarlyStoppingSpec.MultiObjective.Name(stored.multi_objective) == default


def test_first_objective_only_stops_the_fast_trial(client: hypertune.Client) -> None:
    study = client.create_study(mo_config(unique_name(), multi_objective="FIRST_OBJECTIVE"))
    ran = run_plan(study)
    ids = sorted(ran)
    # The fast, inaccurate trial 6 is last by accuracy: stopped at rung 1.
    assert ran[ids[5]][0] == 1, ran[ids[5]]
    assert "0.1 at rung 1 ranks 6 of 6" in ran[ids[5]][1]
    # Without the forecast, trial 7 runs on past step 3.
    assert ran[ids[6]][0] > 3, ran[ids[6]]


def test_paused_trials_are_promoted_in_the_rungs_order(client: hypertune.Client) -> None:
    config = mo_config(unique_name(), multi_objective="HYPERVOLUME", pause_at_rungs=True,
                       max_resource=3)
    config["spec"]["max_trials"] = 6
    study = client.create_study(config)
    # Trial 6 is the fast end of the front; trials 2-5 are dominated by 1.
    points = [(0.9, 5.0), (0.8, 6.0), (0.7, 7.0), (0.6, 8.0), (0.5, 9.0), (0.1, 1.0)]
    new, promoted, went_on = [], [], []
    for _ in range(20):
        trial = study.ask()
        if trial is None:
            break
        with trial:
            if trial.measurements:  # a promotion: from rung 1 to the end
                promoted.append(trial.id)
                trial.report(3, acc=0.5, secs=5.0, memory=10.0)
                trial.complete(acc=0.5, secs=5.0, memory=10.0)
                continue
            acc, secs = points[len(new)]
            new.append(trial.id)
            trial.report(1, acc=acc, secs=secs, memory=10.0)
            if not trial.paused:  # in the top places already: on at once
                went_on.append((trial.id, trial.state))
                trial.report(3, acc=acc, secs=secs, memory=10.0)
            trial.complete(acc=acc, secs=secs, memory=10.0)
    # Trial 1 is promoted once three reached rung 1 (the top floor(3 / 3));
    # the second place, once six did, is the other end of the front: trial
    # 6 goes on at once, where the first objective alone would have kept it
    # paused and promoted trial 2.
    assert promoted == [new[0]], (new, promoted, went_on)
    assert [i for i, _ in went_on] == [new[5]], went_on
    states = {t.id: t.state for t in study.trials()}
    assert [states[i] for i in new[1:5]] == ["STOPPED"] * 4, states
    # The CLI shows the settings.
    out = subprocess.run(
        [program("hypertune"), "--server", client.server, "study", "get", study.name],
        capture_output=True, text=True, check=True).stdout
    assert "ASHA (objectives: HYPERVOLUME)" in out, out


@pytest.mark.parametrize("early_stopping, field", [
    ({"stop_on_constraints": True, "rule": "RULE_UNSPECIFIED"},
     "study.spec.early_stopping.stop_on_constraints: needs a rule"),
    ({"multi_objective": "EPSILON_NET", "pause_at_rungs": True, "promote_by_model": True},
     "study.spec.early_stopping.multi_objective: promote_by_model"),
])
def test_bad_settings_are_refused_naming_the_field(
    client: hypertune.Client, early_stopping: dict, field: str
) -> None:
    with pytest.raises(hypertune.InvalidArgumentError, match=field):
        client.create_study(mo_config(unique_name(), **early_stopping))
