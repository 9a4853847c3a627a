"""The user-level fault benchmark's premises and verdicts, without a server:
a run resumed from a checkpoint gives exactly the uninterrupted run's
metrics (both programs' models), and the checks that judge a trial's curve
and measure the programs' time fail when they should."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(ROOT, "benchmarks"), os.path.join(ROOT, "benchmarks", "user_faults")]

import model  # noqa: E402
import user_faults  # noqa: E402
from hypertuned_process import bin_dir  # noqa: E402

PARAMS = [
    {"lr": 0.01, "batch_size": 8, "momentum": 0.0},
    {"lr": 0.5, "batch_size": 16, "momentum": 0.5},
    {"lr": 3.0, "batch_size": 32, "momentum": 0.9},
]
EPOCHS = 6


@pytest.mark.parametrize("params", PARAMS)
def test_python_model_resumed_from_any_epoch_gives_the_same_metrics(params, tmp_path) -> None:
    reference = model.reference_curve(params, EPOCHS)
    for k in range(1, EPOCHS):
        state = model.State()
        for _ in range(k):
            model.train_epoch(state, params["lr"], params["batch_size"], params["momentum"])
        path = str(tmp_path / "ckpt.json")
        model.save_checkpoint(path, state)
        resumed = model.load_checkpoint(path)
        assert resumed.epoch == k
        rest = [model.train_epoch(resumed, params["lr"], params["batch_size"], params["momentum"])
                for _ in range(EPOCHS - k)]
        assert rest == reference[k:], f"resumed after epoch {k}"


@pytest.mark.parametrize("params", PARAMS)
def test_cc_model_resumed_from_any_epoch_gives_the_same_metrics(params, tmp_path) -> None:
    trainer = os.path.join(bin_dir(), "hypertune-fault-trainer")
    if not os.access(trainer, os.X_OK):
        pytest.skip(f"{trainer} is not built")

    def curve(resume_at: int) -> list[dict]:
        out = subprocess.run(
            [trainer, "--reference", "--lr", repr(params["lr"]), "--batch-size",
             str(params["batch_size"]), "--momentum", repr(params["momentum"]),
             "--epochs", str(EPOCHS), "--resume-at", str(resume_at),
             "--ckpt-dir", str(tmp_path)],
            capture_output=True, text=True, check=True).stdout
        return [json.loads(line) for line in out.splitlines()]

    reference = curve(0)
    assert [m["step"] for m in reference] == list(range(1, EPOCHS + 1))
    for k in range(1, EPOCHS):
        assert curve(k) == reference, f"resumed after epoch {k}"


def steps_of(reference: list[dict], steps: list[int]) -> list[tuple[int, dict]]:
    return [(s, dict(reference[s - 1], epoch_seconds=0.4)) for s in steps]


def test_a_curve_equal_to_the_reference_passes() -> None:
    reference = model.reference_curve(PARAMS[1], EPOCHS)
    wrong, gap = user_faults.curve_problems(
        "COMPLETED", steps_of(reference, [1, 2, 3, 4, 5, 6]), reference[-1], 0, reference,
        EPOCHS)
    assert (wrong, gap) == ([], False)


def test_a_resumed_curve_that_misses_the_checkpoint_step_is_a_gap_not_a_mismatch() -> None:
    reference = model.reference_curve(PARAMS[1], EPOCHS)
    wrong, gap = user_faults.curve_problems(
        "COMPLETED", steps_of(reference, [1, 2, 4, 5, 6]), reference[-1], 6, reference, EPOCHS)
    assert (wrong, gap) == ([], True)


def test_an_attempt_that_trained_an_epoch_twice_is_a_mismatch() -> None:
    # Resumed from the checkpoint of epoch 2 but counting from epoch 3 on
    # top of it (or reloading epoch 2's state for epoch 4): every later
    # step carries the next epoch's metrics.
    reference = model.reference_curve(PARAMS[1], EPOCHS)
    shifted = [(s, reference[s] if s > 2 and s < EPOCHS else reference[s - 1])
               for s in range(1, EPOCHS + 1)]
    wrong, _ = user_faults.curve_problems("COMPLETED", shifted, reference[-1], 6, reference,
                                          EPOCHS)
    assert [w.split(":")[0] for w in wrong] == ["step 3", "step 4", "step 5"]


def test_a_completed_trial_whose_result_is_not_the_last_epochs_is_a_mismatch() -> None:
    reference = model.reference_curve(PARAMS[0], EPOCHS)
    wrong, _ = user_faults.curve_problems(
        "COMPLETED", steps_of(reference, [1, 2, 3, 4, 5]), reference[4], 0, reference, EPOCHS)
    assert wrong == [f"final (step {EPOCHS}): {reference[4]}"]
    wrong, _ = user_faults.curve_problems(
        "COMPLETED", steps_of(reference, [1, 2, 3, 4, 5, 6]), {}, 0, reference, EPOCHS)
    assert wrong == ["no final metrics"]


def test_a_stopped_trials_result_is_judged_at_its_last_step() -> None:
    reference = model.reference_curve(PARAMS[2], EPOCHS)
    assert user_faults.curve_problems(
        "STOPPED", steps_of(reference, [1, 2]), reference[1], 0, reference, EPOCHS) == ([], False)
    wrong, _ = user_faults.curve_problems(
        "STOPPED", steps_of(reference, [1, 2]), reference[0], 2, reference, EPOCHS)
    assert wrong == [f"final (step 2): {reference[0]}"]


def test_measured_time_counts_programs_and_held_trials_only() -> None:
    def proc(pid: int, fleet: str, role: str, started: float, ended: float):
        return SimpleNamespace(popen=SimpleNamespace(pid=pid), fleet=fleet, role=role,
                               started=started, ended=ended)

    run = SimpleNamespace(
        s=SimpleNamespace(fleets=("py-worker", "cc-sdk")),
        children={
            # A worker's program, and a helper of the worker (no trial).
            11: user_faults.Child("py-worker", 11, 10, 100.0, 3, 104.5),
            12: user_faults.Child("py-worker", 12, 10, 100.0, None, 110.0),
        },
        procs=[proc(10, "py-worker", "worker", 99.0, 111.0),
               proc(20, "cc-sdk", "sdk", 99.0, 120.0)],
        events=[
            {"pid": 20, "ev": "start", "t": 99.5},
            {"pid": 20, "ev": "trial", "trial": 1, "t": 100.0},
            {"pid": 20, "ev": "settled", "trial": 1, "t": 102.0},
            # Waiting for a trial is not holding one.
            {"pid": 20, "ev": "trial", "trial": 2, "t": 105.0},
            # Killed holding trial 2: it held it until it died.
        ])
    per_fleet, per_trial = user_faults.measured_time(run)
    assert per_fleet == {"py-worker": 4.5, "cc-sdk": 2.0 + 15.0}
    assert per_trial == {("py-worker", 3): 4.5, ("cc-sdk", 1): 2.0, ("cc-sdk", 2): 15.0}
