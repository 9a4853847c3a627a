"""Python programs under `hypertune worker`: hypertune.current_trial()
attaches to the trial the worker holds, the cloudml-hypertune drop-in
reports through the worker's metrics lines, and plain print()ed lines
arrive while the program runs (the worker sets PYTHONUNBUFFERED)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

import hypertune
from helpers import program, study_config, unique_name


def run_worker(server, study: str, script: str, tmp_path, *, trials: int = 1,
               returncode: int = 0) -> str:
    """Runs `hypertune worker` for ``trials`` trials of ``study``, each a
    run of ``script``; checks its exit status (1 when no trial it ran
    completed) and returns its output."""
    path = tmp_path / "script.py"
    path.write_text(textwrap.dedent(script))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("PYTHONUNBUFFERED", None)  # the worker sets it for its programs
    env.pop("HYPERTUNE_TRIAL_ID", None)
    result = subprocess.run(
        [program("hypertune"), "--server", server.address, "worker", study,
         "--max-trials", str(trials), "--log-dir", str(tmp_path / "logs"), "--",
         sys.executable, str(path)],
        env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == returncode, result.stdout + result.stderr
    return result.stdout + result.stderr


def test_current_trial_attaches_to_the_workers_trial(client, server, tmp_path) -> None:
    study = client.create_study(study_config(unique_name(), max_trials=2))
    output = run_worker(server, study.name, """
        import hypertune
        trial = hypertune.current_trial()
        assert trial is hypertune.current_trial()
        with trial:
            x, y = trial.params["x"], trial.params["y"]
            assert isinstance(y, int)
            for epoch in (1, 2):
                trial.report(epoch, loss=x + y / epoch)
            trial.set_checkpoint(f"file:///ckpt/{trial.id}")
            trial.complete(loss=x + y / 2)
    """, tmp_path, trials=2)
    trials = study.trials()
    assert [t.state for t in trials] == ["COMPLETED", "COMPLETED"], output
    for trial in trials:
        x, y = trial.params["x"], trial.params["y"]
        assert [m.metrics for m in trial.measurements] == [{"loss": x + y}, {"loss": x + y / 2}]
        assert trial.metrics == {"loss": x + y / 2}
        assert trial.checkpoint_uri == f"file:///ckpt/{trial.id}"
        assert (trial.checkpoint_step, trial.attempt) == (2, 1)
        assert trial.lease_epoch == 1


def test_current_trial_is_none_standalone(monkeypatch) -> None:
    from hypertune import current

    monkeypatch.delenv("HYPERTUNE_TRIAL_ID", raising=False)
    monkeypatch.setattr(current, "_looked", False)
    assert hypertune.current_trial() is None


def test_exception_in_the_program_marks_its_trial_infeasible(client, server, tmp_path) -> None:
    study = client.create_study(study_config(unique_name()))
    run_worker(server, study.name, """
        import hypertune
        with hypertune.current_trial() as trial:
            trial.report(1, loss=3.0)
            raise FloatingPointError("loss is inf")
    """, tmp_path, returncode=1)
    [trial] = study.trials()
    assert trial.state == "INFEASIBLE"
    assert trial.infeasible_reason == "FloatingPointError: loss is inf"


def test_printed_lines_arrive_while_the_program_runs(client, server, tmp_path) -> None:
    # Plain print(), no flush: only PYTHONUNBUFFERED (which the worker sets)
    # gets the line to the worker before the program exits. The program
    # waits to see its own measurement on the server, and fails if it never
    # comes.
    study = client.create_study(study_config(unique_name()))
    output = run_worker(server, study.name, """
        import os, sys, time
        import hypertune
        print("hypertune: loss=0.75 step=1")
        study = hypertune.Client().get_study(os.environ["HYPERTUNE_STUDY"])
        trial_id = int(os.environ["HYPERTUNE_TRIAL_ID"])
        deadline = time.monotonic() + 60
        while not study.trial(trial_id).measurements:
            if time.monotonic() > deadline:
                sys.exit("the step-1 line never reached the server")
            time.sleep(0.05)
        print("hypertune: loss=0.5")
    """, tmp_path)
    [trial] = study.trials()
    assert trial.state == "COMPLETED", output
    assert [m.metrics for m in trial.measurements] == [{"loss": 0.75}]
    assert trial.metrics == {"loss": 0.5}


CLOUDML_SCRIPT = """
    import hypertune

    hpt = hypertune.HyperTune()
    for epoch in (1, 2, 3):
        accuracy = 0.5 + 0.1 * epoch
        hpt.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="accuracy", metric_value=accuracy, global_step=epoch)
        hpt.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="loss", metric_value=1 - accuracy, global_step=epoch)
    {ending}
"""


def cloudml_study(client) -> hypertune.Study:
    config = study_config(unique_name())
    config["spec"]["metrics"] = [{"name": "accuracy", "goal": "MAXIMIZE"}]
    return client.create_study(config)


def test_cloudml_hypertune_script_runs_unchanged(client, server, tmp_path) -> None:
    study = cloudml_study(client)
    output = run_worker(server, study.name, CLOUDML_SCRIPT.format(ending=""), tmp_path)
    [trial] = study.trials()
    assert trial.state == "COMPLETED", output
    assert [m.step for m in trial.measurements] == [1, 2, 3]
    assert trial.measurements[0].metrics == {"accuracy": 0.6}
    assert trial.metrics == pytest.approx({"accuracy": 0.8, "loss": 0.2})
    assert trial.value == pytest.approx(0.8)


def test_cloudml_script_that_fails_is_failed(client, server, tmp_path) -> None:
    # A program that exits non-zero failed, not (as far as anyone knows)
    # its parameters.
    study = cloudml_study(client)
    run_worker(server, study.name, CLOUDML_SCRIPT.format(ending="raise SystemExit(2)"),
               tmp_path, returncode=1)
    [trial] = study.trials()
    assert trial.state == "FAILED"
    assert trial.failure_reason.startswith("exit status 2")
    assert [m.step for m in trial.measurements] == [1, 2, 3]


def test_cloudml_final_metric_without_step_and_bad_input(client, server, tmp_path) -> None:
    study = cloudml_study(client)
    run_worker(server, study.name, """
        import hypertune
        hpt = hypertune.HyperTune()
        hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="accuracy",
                                                metric_value=0.9,
                                                checkpoint_path="gs://bucket/ckpt")
        for tag, value, step, field in [("my accuracy", 0.9, None, "hyperparameter_metric_tag"),
                                        ("accuracy", "high", None, 'metric "accuracy"'),
                                        ("accuracy", 0.9, -1, "global_step")]:
            try:
                hpt.report_hyperparameter_tuning_metric(tag, value, step)
            except hypertune.InvalidArgumentError as error:
                assert field in str(error), error
            else:
                raise AssertionError("accepted " + repr((tag, value, step)))
    """, tmp_path)
    [trial] = study.trials()
    assert trial.state == "COMPLETED"
    assert trial.metrics == {"accuracy": 0.9} and trial.measurements == []
    assert trial.checkpoint_uri == "gs://bucket/ckpt"


def test_cloudml_standalone_keeps_the_values(monkeypatch, capfd) -> None:
    monkeypatch.delenv("HYPERTUNE_TRIAL_ID", raising=False)
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric("accuracy", 0.7, global_step=1)
    hpt.report_hyperparameter_tuning_metric(hyperparameter_metric_tag="accuracy", metric_value=0.8)
    assert hpt.reports == [("accuracy", 0.7, 1), ("accuracy", 0.8, None)]
    assert "hypertune:" not in capfd.readouterr().out


def test_with_block_leaves_a_workers_trial_to_the_worker(client, server, tmp_path) -> None:
    # Reporting by printed lines inside `with current_trial()`: leaving the
    # block unfinished is normal there; the worker completes the trial.
    study = client.create_study(study_config(unique_name()))
    output = run_worker(server, study.name, """
        import hypertune
        with hypertune.current_trial() as trial:
            print(f"hypertune: loss={trial.params['x']}")
    """, tmp_path)
    [trial] = study.trials()
    assert trial.state == "COMPLETED" and trial.metrics == {"loss": trial.params["x"]}
    assert "unfinished" not in output
