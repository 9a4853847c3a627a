"""The PyTorch example (examples/pytorch_fashion_mnist) end to end, small:
its study with ASHA in pause mode run by `hypertune worker` on a few
hundred images, trials paused at rung 1 and the promoted one resumed from
its torch.save checkpoint. Needs python3-torch, which `make test` does not
install: without it these tests are skipped, and say so."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip(
    "torch", reason="python3-torch is not installed (apt-get install python3-torch): "
                    "the PyTorch example is not run")

from helpers import ROOT, program, unique_name  # noqa: E402

EXAMPLE = os.path.join(ROOT, "examples", "pytorch_fashion_mnist")
SMALL = ["--train-size", "600", "--val-size", "300", "--epochs", "3"]


def environment() -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    env.pop("HYPERTUNE_TRIAL_ID", None)
    return env


def test_study_pauses_and_resumes_from_checkpoints(client, server, tmp_path) -> None:
    with open(os.path.join(EXAMPLE, "study.json")) as file:
        config = json.load(file)
    config["name"] = unique_name("fashion-mnist-torch")
    spec = config["spec"]
    spec.update(max_trials=4, max_parallel_trials=1, algorithm="RANDOM")
    spec["early_stopping"]["max_resource"] = 3
    study = client.create_study(config)
    checkpoints, logs = tmp_path / "checkpoints", tmp_path / "logs"
    result = subprocess.run(
        [program("hypertune"), "--server", server.address, "worker", study.name,
         "--log-dir", str(logs), "--", sys.executable, os.path.join(EXAMPLE, "train.py"),
         *SMALL, "--checkpoint-dir", str(checkpoints)],
        env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr

    trials = study.trials()
    assert len(trials) == 4
    assert {t.state for t in trials} <= {"COMPLETED", "STOPPED"}, result.stdout
    # A trial in the top third of rung 1 when it gets there goes on; the
    # others pause there, and the best of those is promoted later.
    promoted = [t for t in trials if t.state == "COMPLETED"]
    log = {t.id: (logs / f"trial-{t.id}.log").read_text() for t in trials}
    resumed = [t for t in promoted if "resuming after epoch 1" in log[t.id]]
    assert resumed, result.stdout
    for trial in resumed:
        assert "paused after epoch 1" in log[trial.id]
    for trial in promoted:
        assert [m.step for m in trial.measurements] == [1, 2, 3]
        assert 0.0 < trial.value <= 1.0
        path = trial.checkpoint_uri.removeprefix("file://")
        assert path == str(checkpoints / f"{study.name}-trial-{trial.id}.pt")
        saved = torch.load(path)
        assert saved["epoch"] == 3
        assert {name: saved["config"][name] for name in trial.params} == trial.params
    for trial in trials:
        if trial.state == "STOPPED":
            assert [m.step for m in trial.measurements] == [1]
    assert study.best().id in {t.id for t in promoted}

    # Paused, saved, resumed: the same epochs as one uninterrupted run.
    trial = resumed[0]
    flags = [f"--{name}={value}" for name, value in trial.params.items()]
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLE, "train.py"), *SMALL, *flags,
         "--checkpoint-dir", str(tmp_path / "uninterrupted")],
        env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    # "epoch N: train_loss L val_accuracy A val_loss V (S s)", to 4 decimals.
    uninterrupted = [[float(word) for word in line.split()[3:8:2]]
                     for line in result.stdout.splitlines() if line.startswith("epoch ")]
    assert uninterrupted == [
        [round(m.metrics[name], 4) for name in ("train_loss", "val_accuracy", "val_loss")]
        for m in trial.measurements]


def test_standalone_run_reports_test_accuracy(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, os.path.join(EXAMPLE, "train.py"), *SMALL, "--test",
         "--checkpoint-dir", str(tmp_path)],
        env=environment(), capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    final = result.stdout.strip().splitlines()[-1].split()
    assert final[0] == "final:" and final[1::2] == [
        "val_accuracy", "val_loss", "test_accuracy", "test_loss"]
    assert 0.0 < float(final[6]) <= 1.0
    assert torch.load(tmp_path / "standalone.pt")["epoch"] == 3
