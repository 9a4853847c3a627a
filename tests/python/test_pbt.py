"""Population-based training (Algorithm PBT, docs/pbt.md) through the
Python client against a real hypertuned: a population of four run in
lockstep, the bottom member at the first perturbation interval takes the
top member's checkpoint with perturbed parameters (report returns the
Exploit), the lineage and schedule are stored with the trial and survive
a restart of the server and hypertune export and import, a member whose
worker is killed (-9) resumes its own latest checkpoint, and a study that
sets PBT badly is refused naming the field."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from typing import Any

import pytest

import hypertune
from helpers import poll, program, unique_name


def pbt_config(name: str, **pbt: Any) -> dict:
    settings = {
        "population_size": 4,
        "perturbation_interval": 2,
        "resample_probability": 0.0,
        "min_ready_members": 4,
        **pbt,
    }
    return {
        "name": name,
        "spec": {
            "parameters": [
                {"name": "x", "double_spec": {"min": 0.01, "max": 10.0}},
                {"name": "depth", "integer_spec": {"min": 1, "max": 8}},
            ],
            "metrics": [{"name": "acc", "goal": "MAXIMIZE"}],
            "algorithm": "PBT",
            "seed": 7,
            "pbt": settings,
        },
    }


def accuracy(params: dict, step: int) -> float:
    """x at every step (and x and the step in the checkpoint's name), so
    that the ranking is x's whatever step each member's latest report is."""
    del step
    return params["x"]


def run_lockstep(study: hypertune.Study, steps: int) -> tuple[list, dict]:
    """Asks for the population, then reports step by step, each member
    saving a checkpoint after each report. Returns the trials and the
    exploits report() returned, by (trial id, step)."""
    members = [study.ask() for _ in range(4)]
    returned = {}
    for step in range(1, steps + 1):
        for trial in members:
            if trial.checkpoint_step >= step:
                continue  # took a donor's checkpoint past this step
            exploit = trial.report(step, acc=accuracy(trial.params, step))
            if exploit is not None:
                returned[(trial.id, step)] = exploit
                continue  # goes on from the donor's checkpoint
            trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}.pt", step=step)
    return members, returned


def test_the_bottom_member_takes_the_top_members_checkpoint(
    own_server: Any, tmp_path: Any
) -> None:
    with hypertune.Client(own_server.address) as client:
        study = client.create_study(pbt_config(unique_name("pbt")))
        assert study.spec.max_trials == 4  # the population
        members, returned = run_lockstep(study, steps=2)
        by_x = sorted(members, key=lambda t: t.exploits[0].params_before["x"]
                      if t.exploits else t.params["x"])
        worst, best = by_x[0], by_x[-1]
        # The worst member exploited first, at step 2, from the best one.
        # (Then the next worst may be the bottom one: the worst now ranks
        # with the best one's value.)
        assert list(returned)[0] == (worst.id, 2)
        for e in returned.values():
            # From the best one, or from a member that took its checkpoint
            # (a tie ranks the lower id first).
            assert e.donor_value > e.value
            assert e.checkpoint_uri.startswith(f"file:///ckpt/{best.id}-")
        exploit = returned[(worst.id, 2)]
        assert isinstance(exploit, hypertune.Exploit)
        assert exploit.number == 1 and exploit.step == 2
        assert exploit.donor_trial_id == best.id
        donor_step = exploit.checkpoint_step  # the donor's latest then
        assert donor_step in (1, 2)
        assert exploit.checkpoint_uri == f"file:///ckpt/{best.id}-{donor_step}.pt"
        assert exploit.checkpoint_step == donor_step
        assert exploit.donor_value == pytest.approx(accuracy(best.params, donor_step))
        # Explored from the donor's parameters: x by 0.8 or 1.2, depth one
        # step (or a factor) away, within the range.
        donor_x = best.params["x"]
        assert worst.params["x"] in (
            pytest.approx(donor_x * 0.8), pytest.approx(min(10.0, donor_x * 1.2)))
        assert worst.params == exploit.params
        assert exploit.params_before != exploit.params
        # The trial now holds the donor's checkpoint and curve up to it.
        assert worst.checkpoint_uri == exploit.checkpoint_uri
        assert [m.step for m in worst.measurements] == list(range(1, donor_step + 1))
        assert worst.measurements[-1].metrics["acc"] == pytest.approx(
            accuracy(best.params, donor_step))
        # Its own curve is kept as an earlier one, saying what happened.
        assert [m.step for m in worst.earlier_attempts[-1].measurements] == [1, 2]
        assert f"exploited trial {best.id}" in worst.earlier_attempts[-1].end_reason

        # It goes on from the checkpoint; steps after it are accepted (a
        # top value: judged again at step 2, it stays).
        assert worst.report(donor_step + 1, acc=100.0) is None
        worst_id = worst.id
        for trial in members:
            trial.complete(acc=accuracy(trial.params, 4))

        # Stored: read back by another client, and after a restart.
        def lineage() -> list:
            with hypertune.Client(own_server.address) as other:
                stored = other.get_study(study.name).trial(worst_id)
                return [(e.number, e.step, e.donor_trial_id, e.checkpoint_uri,
                         e.params, e.params_before) for e in stored.exploits]

        before = lineage()
        assert before == [(1, 2, best.id, exploit.checkpoint_uri, exploit.params,
                           exploit.params_before)]
        own_server.restart()
        assert lineage() == before

        # And through hypertune export and import, under another name.
        cli = [program("hypertune"), "--server", own_server.address]
        exported = subprocess.run(cli + ["export", study.name], check=True,
                                  capture_output=True, text=True).stdout
        assert '"exploits"' in exported
        dump = tmp_path / "study.jsonl"
        dump.write_text(exported)
        subprocess.run(cli + ["import", str(dump), "--name", study.name + "-copy"],
                       check=True, capture_output=True, text=True)
        with hypertune.Client(own_server.address) as other:
            copied = other.get_study(study.name + "-copy").trial(worst_id)
            assert [(e.number, e.step, e.donor_trial_id, e.checkpoint_uri, e.params,
                     e.params_before) for e in copied.exploits] == before


def test_a_member_goes_on_when_no_top_member_has_a_checkpoint(client: hypertune.Client) -> None:
    study = client.create_study(pbt_config(unique_name("pbt")))
    members = [study.ask() for _ in range(4)]
    for step in (1, 2, 3, 4):
        for trial in members:
            assert trial.report(step, acc=accuracy(trial.params, step)) is None
    assert all(not t.exploits for t in members)


# Runs the population in lockstep to step 2 (the worst member exploits),
# then the exploited member saves a checkpoint of its own at the next step,
# says so on stdout and waits to be killed.
KILLED_MEMBERS = """
    import sys, time
    import hypertune

    server, name = sys.argv[1:3]
    study = hypertune.Client(server).get_study(name)
    members = [study.ask() for _ in range(4)]
    for step in (1, 2):
        for trial in members:
            exploit = trial.report(step, acc=trial.params["x"] * step / (step + 1))
            if exploit is not None:
                step_after = exploit.checkpoint_step + 1
                trial.report(step_after, acc=100.0)  # top: no second exploit
                trial.set_checkpoint(f"file:///ckpt/own-{trial.id}-{step_after}", step=step_after)
                print("exploited", trial.id, step_after, flush=True)
            else:
                trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}", step=step)
    print("ready", flush=True)
    time.sleep(600)
"""


def test_a_member_whose_worker_is_killed_resumes_its_own_checkpoint(
    client: hypertune.Client, tmp_path: Any, server: Any
) -> None:
    config = pbt_config(unique_name("pbt"))
    config["spec"]["lease_seconds"] = 2
    study = client.create_study(config)
    script = tmp_path / "members.py"
    script.write_text(textwrap.dedent(KILLED_MEMBERS))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with subprocess.Popen(
        [sys.executable, str(script), server.address, study.name],
        stdout=subprocess.PIPE, text=True, env=env,
    ) as members:
        lines = []
        try:
            for line in members.stdout:
                lines.append(line.split())
                if line.strip() == "ready":
                    break
        finally:
            members.send_signal(signal.SIGKILL)
            members.wait()
    exploited = [words for words in lines if words[0] == "exploited"]
    assert exploited, lines
    member_id, own_step = int(exploited[0][1]), int(exploited[0][2])
    before = study.trial(member_id)

    # Handed over once its lease runs out: the next worker gets it back with
    # its own latest checkpoint, its explored parameters and its lineage.
    handed = poll(lambda: [t for t in [study.ask()] if t is not None and t.id == member_id]
                  or None, "the killed member handed over", timeout=30)
    trial = handed[0]
    assert trial.attempt == 2
    assert trial.checkpoint_uri == f"file:///ckpt/own-{member_id}-{own_step}"
    assert trial.checkpoint_step == own_step
    assert before.exploits and trial.params == before.exploits[-1].params
    assert trial.exploits == before.exploits
    trial.complete(acc=1.0)


@pytest.mark.parametrize(
    "pbt, field",
    [
        ({"population_size": 1}, "pbt.population_size"),
        ({"perturbation_interval": 0}, "pbt.perturbation_interval"),
        ({"quantile_fraction": 0.6}, "pbt.quantile_fraction"),
        ({"resample_probability": 1.5}, "pbt.resample_probability"),
        ({"perturbation_factors": [0.8, -1.0]}, "pbt.perturbation_factors"),
        ({"metric": "loss"}, "pbt.metric"),
        ({"min_ready_members": 9}, "pbt.min_ready_members"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(
    client: hypertune.Client, pbt: dict, field: str
) -> None:
    with pytest.raises(hypertune.InvalidArgumentError, match=field.replace(".", r"\.")):
        client.create_study(pbt_config(unique_name("pbt"), **pbt))


def test_pbt_settings_need_the_pbt_algorithm(client: hypertune.Client) -> None:
    config = pbt_config(unique_name("pbt"))
    config["spec"]["algorithm"] = "RANDOM"
    with pytest.raises(hypertune.InvalidArgumentError, match=r"study\.spec\.pbt"):
        client.create_study(config)
