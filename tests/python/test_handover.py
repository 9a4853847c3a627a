"""Trials handed over as users meet it, against a real hypertuned, with
real processes and real signals: an optimize() process killed with -9
while two others run the same study, Ctrl-C in optimize() and a rerun,
a program whose stdout or whose worker goes away, and the device-seconds
of trials that never complete (killed, paused at an ASHA rung).

None of these is a verdict on the parameters: the trial is given back
(or left to its lease), handed over as a new attempt (Trial.attempt), and
ends COMPLETED; nothing is INFEASIBLE or FAILED, and the user's code sees
no exception but the KeyboardInterrupt it asked for."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

import hypertune
from helpers import poll, program, study_config, unique_name


def python_env(**more: str) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), **more)
    for name in ("HYPERTUNE_TRIAL_ID", "RANK", "LOCAL_RANK", "VICTIM", "FIRST_RUN"):
        if name not in more:
            env.pop(name, None)
    return env


def write(tmp_path: Any, name: str, code: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(code))
    return str(path)


# A deterministic objective that resumes from its checkpoint: steps 1-3 of
# loss x + 1/step. The process run with VICTIM=1 stops at step 2 of its
# first trial, says so in MARKS/victim, and waits there to be killed.
OPTIMIZE_SCRIPT = """
    import os, sys, time
    import hypertune

    server, name, marks, checkpoint = sys.argv[1:5]
    victim = os.environ.get("VICTIM") == "1"
    study = hypertune.Client(server).get_study(name)

    def objective(trial):
        start = trial.checkpoint_step + 1
        trial.set_attribute("resumed_at", start)
        for step in range(start, 4):
            trial.report(step, loss=trial.params["x"] + 1.0 / step)
            if checkpoint == "yes":
                trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}.pt", step=step)
            if victim and step == 2:
                with open(os.path.join(marks, "victim.tmp"), "w") as mark:
                    mark.write(str(trial.id))
                os.rename(os.path.join(marks, "victim.tmp"), os.path.join(marks, "victim"))
                while True:
                    time.sleep(1)
        return trial.params["x"]

    study.optimize(objective)
    print("done", flush=True)
"""


@pytest.mark.parametrize("checkpoint", ["no", "yes"])
def test_kill9_of_one_of_three_optimize_processes(client, server, tmp_path, checkpoint) -> None:
    study = client.create_study(study_config(unique_name("kill9"), max_trials=6, lease_seconds=2))
    script = write(tmp_path, "optimize.py", OPTIMIZE_SCRIPT)
    marks = tmp_path / "marks"
    marks.mkdir()
    args = [sys.executable, script, server.address, study.name, str(marks), checkpoint]

    def start(victim: str) -> subprocess.Popen:
        return subprocess.Popen(args, env=python_env(VICTIM=victim), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    processes = [start("1")]
    try:
        poll(lambda: (marks / "victim").exists(), "the victim to reach step 2")
        victim_trial = int((marks / "victim").read_text())
        processes += [start("0"), start("0")]
        poll(lambda: study.refresh().trial_counts.get("COMPLETED"),
             "the other processes to complete a trial")
        processes[0].kill()
        processes[0].wait()
        outputs = [p.communicate(timeout=300) for p in processes[1:]]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()
    for p, (out, err) in zip(processes[1:], outputs):
        assert p.returncode == 0 and out == "done\n", err
        # Nothing but, for a process the others left no trial to, that
        # the budget was spent.
        lines = [line for line in err.splitlines()
                 if line.strip() and "has spent its budget" not in line
                 and line.strip() != "study.optimize(objective)"]
        assert lines == [], err

    trials = study.trials()
    assert len(trials) == 6
    assert {t.state for t in trials} == {"COMPLETED"}
    assert all(t.value == t.params["x"] for t in trials)
    handed = study.trial(victim_trial)
    assert handed.attempt == 2
    assert all(t.attempt == 1 for t in trials if t.id != victim_trial)
    x = handed.params["x"]
    assert [(m.step, m.metrics) for m in handed.measurements] == [
        (step, {"loss": x + 1.0 / step}) for step in (1, 2, 3)]
    [earlier] = handed.earlier_attempts
    assert earlier.number == 1 and "lease" in earlier.end_reason
    if checkpoint == "yes":
        # Resumed after the checkpoint's step, its curve kept.
        assert handed.user_attrs["resumed_at"] == 3
        assert handed.checkpoint_step == 3
        assert earlier.measurements == []
    else:
        # Started afresh; the killed attempt's curve kept apart.
        assert handed.user_attrs["resumed_at"] == 1
        assert [m.step for m in earlier.measurements] == [1, 2]


# Ctrl-C: each trial of the first run (FIRST_RUN=1) reports step 1, marks
# MARKS/<trial id> and waits for the SIGINT; the rerun completes them.
CTRL_C_SCRIPT = """
    import os, sys, time
    import hypertune

    server, name, marks, workers = sys.argv[1:5]
    study = hypertune.Client(server).get_study(name)

    def objective(trial):
        trial.report(1, loss=trial.params["x"] + 1.0)
        if os.environ.get("FIRST_RUN") == "1":
            open(os.path.join(marks, str(trial.id)), "w").close()
            while True:
                time.sleep(1)
        trial.report(2, loss=trial.params["x"] + 0.5)
        return trial.params["x"]

    study.optimize(objective, n_workers=int(workers))
    print("done", flush=True)
"""


@pytest.mark.parametrize("signum, workers", [(signal.SIGINT, 1), (signal.SIGINT, 2),
                                             (signal.SIGTERM, 1), (signal.SIGTERM, 2)])
def test_ctrl_c_or_sigterm_in_optimize_gives_the_trials_back_and_a_rerun_continues(
        client, server, tmp_path, signum, workers) -> None:
    study = client.create_study(study_config(unique_name("ctrl-c"), max_trials=4))
    script = write(tmp_path, "ctrl_c.py", CTRL_C_SCRIPT)
    marks = tmp_path / "marks"
    marks.mkdir()
    args = [sys.executable, script, server.address, study.name, str(marks), str(workers)]
    first = subprocess.Popen(args, env=python_env(FIRST_RUN="1"), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        poll(lambda: len(os.listdir(marks)) == workers, "every worker thread inside a trial")
        first.send_signal(signum)
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    if signum == signal.SIGINT:
        # KeyboardInterrupt reaches the user, as Python users expect.
        assert first.returncode in (1, -signal.SIGINT), err
        assert err.rstrip().endswith("KeyboardInterrupt"), err
        reason = "interrupted (KeyboardInterrupt)"
    else:
        # hypertune.Terminated: a quiet exit with 128 + SIGTERM, the threads'
        # trials given back too.
        assert first.returncode == 143, err
        reason = "preempted (SIGTERM)"
    interrupted = sorted(int(name) for name in os.listdir(marks))
    for trial_id in interrupted:
        stored = study.trial(trial_id)
        assert stored.state == "REQUESTED"
        assert stored.failure_reason == reason
        # Taken away, as a preemption: no retry spent, no failure.
        assert (stored.preemption_count, stored.retry_count) == (1, 0)

    rerun = subprocess.run(args, env=python_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0 and rerun.stdout == "done\n", rerun.stderr
    trials = study.trials()
    assert len(trials) == 4 and {t.state for t in trials} == {"COMPLETED"}
    for trial_id in interrupted:
        again = study.trial(trial_id)
        assert again.attempt == 2
        assert [m.step for m in again.measurements] == [1, 2]
        assert [a.end_reason for a in again.earlier_attempts] == [reason]


# A program attached to a trial as `hypertune worker` attaches it (the
# HYPERTUNE_* environment), logging a line per step to stdout.
ATTACHED_SCRIPT = """
    import os, sys, time
    import hypertune

    trial = hypertune.current_trial()
    with trial:
        step = 0
        while True:
            step += 1
            trial.report(step, loss=1.0 / step)
            if os.environ.get("QUIET") != "1":
                print(f"step {step}", flush=True)
            time.sleep(0.05)
"""


def attach_env(server, trial: hypertune.Trial, **more: str) -> dict:
    return python_env(
        HYPERTUNE_SERVER=server.address, HYPERTUNE_STUDY=trial.study_name,
        HYPERTUNE_TRIAL_ID=str(trial.id), HYPERTUNE_LEASE_EPOCH=str(trial.lease_epoch),
        HYPERTUNE_CLIENT_ID=trial.client_id, **more)


def test_a_closed_stdout_gives_the_trial_back(client, server, tmp_path) -> None:
    # What a program sees when the `hypertune worker` reading its output
    # is killed: its next print raises BrokenPipeError.
    study = client.create_study(study_config(unique_name("pipe")))
    trial = study.ask()
    script = write(tmp_path, "attached.py", ATTACHED_SCRIPT)
    process = subprocess.Popen([sys.executable, script], env=attach_env(server, trial),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert process.stdout.readline() == b"step 1\n"
        process.stdout.close()
        process.wait(timeout=120)
        err = process.stderr.read().decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode != 0
    assert "BrokenPipeError" in err, err
    stored = study.trial(trial.id)
    assert stored.state == "REQUESTED", stored.infeasible_reason
    assert stored.failure_reason.startswith("BrokenPipeError"), stored.failure_reason
    assert stored.infeasible_reason == ""
    trial._lease.stop()


# Starts the attached program through a shell (as `sh -c "cd dir &&
# python3 train.py"` does), as a subreaper: once the shell is killed, the
# program becomes this launcher's child, whose status it then prints.
LAUNCHER_SCRIPT = """
    import ctypes, os, subprocess, sys

    ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    shell = subprocess.Popen(
        ["/bin/sh", "-c", '"$0" "$1" & echo $!; wait', sys.executable, sys.argv[1]],
        stdout=subprocess.PIPE, text=True)
    child = int(shell.stdout.readline())
    print(shell.pid, child, flush=True)
    shell.wait()
    _, status = os.waitpid(child, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""


def test_a_program_whose_worker_is_killed_ends_itself(client, server, tmp_path) -> None:
    # The worker's own guard covers its direct child only; a program
    # started through a shell notices that its parent is gone, gives the
    # trial back and ends, instead of training on for nobody.
    study = client.create_study(study_config(unique_name("orphan")))
    trial = study.ask()
    script = write(tmp_path, "attached.py", ATTACHED_SCRIPT)
    launcher = write(tmp_path, "launcher.py", LAUNCHER_SCRIPT)
    process = subprocess.Popen([sys.executable, launcher, script],
                               env=attach_env(server, trial, QUIET="1"),
                               stdout=subprocess.PIPE, text=True)
    try:
        shell, child = (int(word) for word in process.stdout.readline().split())
        poll(lambda: study.trial(trial.id).measurements, "the program's first report")
        os.kill(shell, signal.SIGKILL)
        out, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    status = int(out.strip())
    assert status in (-signal.SIGTERM, 1), status  # SIGTERM, or the lost lease it saw first
    stored = study.trial(trial.id)
    assert stored.state == "REQUESTED", stored.infeasible_reason
    assert "that started the program is gone" in stored.failure_reason
    trial._lease.stop()


WORKER_PROGRAM = """
    import os, sys, time
    import hypertune

    marks = sys.argv[1]
    first = not os.path.exists(os.path.join(marks, "pid"))
    trial = hypertune.current_trial()
    with trial:
        start = trial.checkpoint_step + 1
        for step in range(start, 4):
            print(f"epoch {step}")
            trial.report(step, loss=trial.params["x"] + 1.0 / step)
            trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}.pt", step=step)
            if first and step == 2:
                with open(os.path.join(marks, "pid.tmp"), "w") as mark:
                    mark.write(str(os.getpid()))
                os.rename(os.path.join(marks, "pid.tmp"), os.path.join(marks, "pid"))
                while True:  # training on, logging as it goes
                    time.sleep(0.05)
                    print("training")
        trial.complete(loss=trial.params["x"])
"""


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_kill9_of_hypertune_worker_hands_the_trial_over(client, server, tmp_path) -> None:
    study = client.create_study(study_config(unique_name("worker-kill"), max_trials=1,
                                             lease_seconds=2))
    script = write(tmp_path, "train.py", WORKER_PROGRAM)
    marks = tmp_path / "marks"
    marks.mkdir()

    def worker() -> subprocess.Popen:
        return subprocess.Popen(
            [program("hypertune"), "--server", server.address, "worker", study.name,
             "--max-trials", "1", "--log-dir", str(tmp_path / "logs"), "--",
             sys.executable, script, str(marks)],
            env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    first = worker()
    try:
        poll(lambda: (marks / "pid").exists(), "the program at step 2")
        child = int((marks / "pid").read_text())
        first.kill()
        first.wait()
        # The program does not outlive its worker.
        poll(lambda: gone(child), "the program to end after its worker", timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    [stored] = study.trials()
    assert stored.state in ("ACTIVE", "REQUESTED"), stored.infeasible_reason  # not a verdict
    second = worker()
    out, _ = second.communicate(timeout=300)
    assert second.returncode == 0, out
    [done] = study.trials()
    assert done.state == "COMPLETED" and done.attempt == 2, out
    x = done.params["x"]
    assert [(m.step, m.metrics) for m in done.measurements] == [
        (step, {"loss": x + 1.0 / step}) for step in (1, 2, 3)]
    assert done.checkpoint_step == 3


def test_device_seconds_of_a_killed_process_are_counted(client, server, tmp_path) -> None:
    # Heartbeats carry the running total: a process killed with -9 loses
    # at most one renewal interval of device time.
    study = client.create_study(study_config(unique_name("seconds"), lease_seconds=1))
    script = write(tmp_path, "held.py", """
        import sys, time
        import hypertune
        study = hypertune.Client(sys.argv[1]).get_study(sys.argv[2])
        trial = study.ask()
        print(trial.id, flush=True)
        time.sleep(3600)
    """)
    process = subprocess.Popen([sys.executable, script, server.address, study.name],
                               env=python_env(), stdout=subprocess.PIPE, text=True)
    try:
        trial_id = int(process.stdout.readline())
        seconds = poll(lambda: study.trial(trial_id).proto.device_seconds,
                       "device-seconds reported while the trial runs")
        assert study.trial(trial_id).state == "ACTIVE"
    finally:
        process.kill()
        process.wait()
    assert seconds > 0
    assert client.get_study(study.name).proto.device_seconds >= seconds


def test_device_seconds_of_trials_paused_at_a_rung(client) -> None:
    # ASHA pauses every trial at rung 1 and promotes few: the paused
    # segments are billed too, by the completion each worker still sends.
    study = client.create_study(study_config(
        unique_name("asha"), max_trials=4, max_parallel_trials=1,
        early_stopping={"rule": "ASHA", "min_resource": 1, "max_resource": 3,
                        "reduction_factor": 3, "pause_at_rungs": True}))
    segments: dict[int, list[float]] = {}

    def objective(trial: hypertune.Trial) -> float:
        started = time.monotonic()
        for step in range(len(trial.measurements) + 1, 4):
            trial.report(step, loss=1.0 - trial.params["x"] / step)
            trial.set_checkpoint(f"file:///ckpt/{trial.id}-{step}.pt")
            if trial.should_stop:
                break
        time.sleep(0.2)  # device time to count
        segments.setdefault(trial.id, []).append(time.monotonic() - started)
        return 1.0 - trial.params["x"] / step

    study.optimize(objective)
    trials = study.trials()
    paused = [t for t in trials if len(segments[t.id]) == 1 and t.state in ("PAUSED", "STOPPED")]
    assert paused, [(t.id, t.state) for t in trials]
    for trial in trials:
        assert trial.proto.device_seconds >= sum(segments[trial.id]) * 0.99, (trial.id, trial.state)
    total = sum(sum(s) for s in segments.values())
    assert client.get_study(study.name).proto.device_seconds >= total * 0.99
