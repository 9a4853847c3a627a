#!/usr/bin/env python3
"""`hypertune launch slurm` against real processes.

  slurm_test.py dry-run   the command without Slurm: a dry run's script and
                          sbatch line, the checks it makes before submitting
                          (unknown placeholder, no sbatch on PATH, usage).
  slurm_test.py cluster   on a single-node Slurm cluster started in a
                          temporary directory (testing/slurm_cluster.py): a
                          study run to the end by a job array of 4 workers,
                          and a task preempted (SIGTERM to its batch shell,
                          as --signal=B:TERM sends) whose trial goes back to
                          the queue and is resumed from its checkpoint by
                          another task. Exits 77 ("SKIPPED: ...") when
                          slurm-wlm and munge are not installed.

Programs come from $HYPERTUNE_BIN_DIR (ctest sets it), else build/bin.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "testing"))

import slurm_cluster  # noqa: E402
from hypertuned_process import Hypertuned, bin_dir  # noqa: E402

SKIP = 77
HYPERTUNE = os.path.join(bin_dir(), "hypertune")


class Failure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def hypertune(server: str, *args: str, env: dict | None = None, cwd: str | None = None,
              expect: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([HYPERTUNE, "--server", server, *args], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=120)
    check(done.returncode == expect,
          f"hypertune {' '.join(args)}: exit {done.returncode}, expected {expect}\n"
          f"stdout: {done.stdout}\nstderr: {done.stderr}")
    return done


def create_study(server: str, workdir: str, name: str, spec: dict) -> None:
    path = os.path.join(workdir, f"{name}.json")
    with open(path, "w") as f:
        json.dump({"name": name, "spec": spec}, f)
    hypertune(server, "study", "create", "--config", path)


def trials(server: str, name: str) -> list[dict]:
    out = hypertune(server, "trials", name, "--format", "json").stdout
    return json.loads(out)["trials"]


def study_state(server: str, name: str) -> str:
    return json.loads(hypertune(server, "study", "get", name, "--format", "json").stdout)["state"]


SPEC = {
    "parameters": [{"name": "x", "double_spec": {"min": 0.0, "max": 1.0}}],
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
    "algorithm": "QUASI_RANDOM",
    "max_trials": 12,
    "max_parallel_trials": 4,
}


def write_executable(path: str, text: str) -> str:
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o755)
    return path


# --- dry run ----------------------------------------------------------------

def test_dry_run(workdir: str) -> None:
    with Hypertuned(os.path.join(workdir, "server")) as server:
        address = server.address
        create_study(address, workdir, "dry", SPEC)
        objective = write_executable(os.path.join(workdir, "obj.sh"), "#!/bin/sh\n")
        env = dict(os.environ, HYPERTUNE_TOKEN="s3cret-token")
        awkward = ["two words", "it's", "$HOME", "back\\slash", "{x}", "--x={x}"]
        done = hypertune(address, "launch", "slurm", "dry", "--workers", "3", "--time", "10",
                         "--notice", "60", "--gpus-per-worker", "1", "--sbatch-arg",
                         "--mem=1G", "--timeout", "30", "--dry-run", "--", objective,
                         *awkward, env=env, cwd=workdir)
        out = done.stdout
        for expected in ("--array=0-2", "--signal=B:TERM@60", "--requeue", "--time=10",
                         "--gres=gpu:1", "--mem=1G", "--job-name=hypertune-dry",
                         f"--chdir={workdir}", "worker-%A_%a.out", "exec "):
            check(expected in out, f"the dry run lacks {expected!r}:\n{out}")
        check("s3cret-token" not in out, f"the token is in the dry run's output:\n{out}")
        check("loopback" in done.stderr, f"no loopback warning:\n{done.stderr}")
        check(not os.path.exists(os.path.join(workdir, "hypertune-slurm")),
              "a dry run wrote the script")
        # The printed script is valid bash and passes every argument through.
        script = out.split("# submitted with:")[0]
        fake = write_executable(os.path.join(workdir, "fake-hypertune"),
                                "#!/bin/bash\nprintf '%s\\0' \"$@\"\n")
        program = re.search(r"^exec (\S+) ", script, re.M)
        check(program is not None and
              os.path.realpath(program.group(1)) == os.path.realpath(HYPERTUNE),
              f"the script does not exec {HYPERTUNE}:\n{out}")
        script = script.replace(program.group(0), f"exec {fake} ")
        ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        check(ran.returncode == 0, f"bash: {ran.stderr}")
        argv = ran.stdout.split("\n", 1)[1].split("\0")[:-1]
        expected = ["--server", address, "worker", "dry", "--parallel", "1", "--timeout",
                    "30", "--", objective, *awkward]
        check(argv == expected, f"the worker would get {argv}, not {expected}")

        # Refused before submitting: an unknown placeholder, as the worker does.
        done = hypertune(address, "launch", "slurm", "dry", "--workers", "2", "--dry-run",
                         "--", objective, "{y}", expect=1)
        check("{y}" in done.stderr and "not a parameter" in done.stderr, done.stderr)
        # No sbatch on PATH.
        done = hypertune(address, "launch", "slurm", "dry", "--workers", "2", "--", objective,
                         env=dict(os.environ, PATH="/nonexistent"), cwd=workdir, expect=1)
        check("sbatch" in done.stderr and "slurm-wlm" in done.stderr, done.stderr)
        # Usage errors name the flag.
        done = hypertune(address, "launch", "slurm", "dry", "--", objective, expect=2)
        check("--workers" in done.stderr, done.stderr)
        done = hypertune(address, "launch", "slurm", "dry", "--workers", "2", "--time",
                         "2 hours", "--", objective, expect=2)
        check("--time" in done.stderr, done.stderr)
        done = hypertune(address, "launch", "slurm", "nosuch", "--workers", "2", "--dry-run",
                         "--", objective, expect=1)
        check("NOT_FOUND" in done.stderr, done.stderr)


# --- cluster ------------------------------------------------------------------

OBJECTIVE = """#!/bin/bash
# loss = (x - 0.3)^2, two intermediate steps.
x=$1
loss=$(awk -v x="$x" 'BEGIN {printf "%.6g", (x - 0.3) * (x - 0.3)}')
for step in 1 2; do
  echo "hypertune: loss=$loss step=$step"
  sleep 0.2
done
echo "hypertune: loss=$loss"
"""

# Checkpoints a step counter each second in a file, records the file as the
# trial's checkpoint, and on a resumed trial starts from the step there. Its
# final metrics say where it started (resumed_from).
CHECKPOINTING = """#!/usr/bin/env python3
import json, os, subprocess, sys, time
HYPERTUNE = {hypertune!r}
study, trial_id = os.environ["HYPERTUNE_STUDY"], os.environ["HYPERTUNE_TRIAL_ID"]
out = subprocess.run([HYPERTUNE, "trials", study, "--format", "json"], check=True,
                     capture_output=True, text=True).stdout
trial = [t for t in json.loads(out)["trials"] if str(t["id"]) == trial_id][0]
uri = trial.get("checkpoint_uri", "")
start = 0
if uri:
    with open(uri[len("file://"):]) as f:
        start = int(f.read())
print(f"resuming from {{uri or 'nothing'}} at step {{start}}", flush=True)
path = os.path.join({checkpoints!r}, f"trial-{{trial_id}}")
x = float(sys.argv[1])
for step in range(start + 1, {steps} + 1):
    time.sleep(1.0)
    with open(path + ".tmp", "w") as f:
        f.write(str(step))
    os.replace(path + ".tmp", path)
    if step == start + 1:
        subprocess.run([HYPERTUNE, "heartbeat", study, trial_id, "--epoch",
                        os.environ["HYPERTUNE_LEASE_EPOCH"], "--checkpoint", "file://" + path],
                       check=True, capture_output=True)
    print(f"hypertune: loss={{x / step}} step={{step}}", flush=True)
print(f"hypertune: loss={{x / {steps}}} resumed_from={{start}}", flush=True)
"""


def wait_for(what: str, predicate, timeout: float, poll: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise Failure(f"timed out after {timeout} s waiting for {what}")


def launch(address: str, cluster, workdir: str, name: str, workers: int, *command: str) -> str:
    done = hypertune(address, "launch", "slurm", name, "--workers", str(workers),
                     "--time", "5", "--notice", "60", "--log-dir",
                     os.path.join(workdir, "logs", name), "--", *command,
                     env=cluster.env(), cwd=workdir)
    job = done.stdout.strip()
    check(re.fullmatch(r"\d+", job) is not None, f"launch printed {done.stdout!r}")
    return job


def output_files(workdir: str, name: str, job: str) -> dict[int, str]:
    folder = os.path.join(workdir, "hypertune-slurm", name)
    files = {}
    for entry in os.listdir(folder):
        m = re.fullmatch(rf"worker-{job}_(\d+)\.out", entry)
        if m:
            with open(os.path.join(folder, entry), errors="replace") as f:
                files[int(m.group(1))] = f.read()
    return files


def test_array_runs_study(address: str, cluster, workdir: str) -> None:
    create_study(address, workdir, "array", SPEC)
    objective = write_executable(os.path.join(workdir, "objective.sh"), OBJECTIVE)
    started = time.monotonic()
    job = launch(address, cluster, workdir, "array", 4, objective, "{x}")
    launched = time.monotonic()
    wait_for("a trial ACTIVE", lambda: any(t["state"] != "REQUESTED"
                                          for t in trials(address, "array")), 60, 0.05)
    first_active = time.monotonic()
    wait_for("study array COMPLETED", lambda: study_state(address, "array") == "COMPLETED", 90)
    done = trials(address, "array")
    wait_for(f"job {job} to end", lambda: not cluster.jobs(), 60)
    finished = time.monotonic()
    check(len(done) == 12 and all(t["state"] == "COMPLETED" for t in done),
          f"not 12 COMPLETED trials: {[(t['id'], t['state']) for t in done]}")
    files = output_files(workdir, "array", job)
    check(sorted(files) == [0, 1, 2, 3], f"output files of tasks {sorted(files)}, not 0-3")
    for task, text in files.items():
        check(f"[hypertune launch] task {job}_{task} " in text, f"task {task} said:\n{text}")
        check("worker done (study budget spent)" in text, f"task {task} said:\n{text}")
    holders = {re.match(r"slurm-(\d+_\d+)-", t["client_id"]).group(1) for t in done}
    check(all(h.startswith(f"{job}_") for h in holders), f"trials held by {holders}")
    print(f"array: 12 trials COMPLETED by tasks {sorted(holders)}; launch took "
          f"{launched - started:.2f} s, first trial ACTIVE {first_active - started:.2f} s "
          f"after launch, study done and array ended {finished - started:.2f} s after")


def test_preempted_trial_resumes(address: str, cluster, workdir: str) -> None:
    spec = dict(SPEC, max_trials=3, max_parallel_trials=2, algorithm="RANDOM",
                metrics=[{"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
                         {"name": "resumed_from", "role": "RECORDED"}])
    create_study(address, workdir, "preempt", spec)
    checkpoints = os.path.join(workdir, "checkpoints")
    os.makedirs(checkpoints)
    objective = write_executable(os.path.join(workdir, "checkpointing.py"), CHECKPOINTING.format(
        hypertune=HYPERTUNE, checkpoints=checkpoints, steps=6))
    job = launch(address, cluster, workdir, "preempt", 2, objective, "{x}")

    def measured():
        for t in trials(address, "preempt"):
            if t["state"] == "ACTIVE" and len(t.get("measurements", [])) >= 2 \
                    and t.get("checkpoint_uri"):
                return t
        return None
    victim = wait_for("a trial with 2 steps and a checkpoint", measured, 60)
    task = re.match(rf"slurm-{job}_(\d+)-", victim["client_id"]).group(1)
    # What --signal=B:TERM sends before the time limit: SIGTERM to the
    # batch shell, which is the worker.
    cluster.run("scancel", "--signal=TERM", "--batch", f"{job}_{task}")
    wait_for(f"task {task} to end", lambda: f"{job}_{task}" not in cluster.run(
        "squeue", "-h", "-o", "%i", check=False).split(), 30)
    text = output_files(workdir, "preempt", job)[int(task)]
    check(f"trial {victim['id']} given back to the queue: worker preempted" in text,
          f"task {task} said:\n{text}")
    wait_for("study preempt COMPLETED", lambda: study_state(address, "preempt") == "COMPLETED",
             90)
    after = {t["id"]: t for t in trials(address, "preempt")}
    resumed = after[victim["id"]]
    check(resumed["state"] == "COMPLETED", f"the preempted trial is {resumed['state']}")
    check(not resumed["client_id"].startswith(f"slurm-{job}_{task}-"),
          f"the trial was finished by the preempted task: {resumed['client_id']}")
    resumed_from = resumed["final_measurement"]["metrics"]["resumed_from"]
    check(resumed_from >= 2, f"the trial restarted from step {resumed_from}, not its checkpoint")
    # Given back on Slurm's SIGTERM (a preemption), or its lease ran out.
    losses = int(resumed.get("preemption_count", 0)) + int(resumed.get("retry_count", 0))
    check(losses >= 1, f"preemption_count {resumed.get('preemption_count')}, "
          f"retry_count {resumed.get('retry_count')}")
    check(all(t["state"] == "COMPLETED" for t in after.values()),
          f"states {[(i, t['state']) for i, t in after.items()]}")
    print(f"preempt: trial {victim['id']} preempted in task {job}_{task} after step "
          f"{len(victim['measurements'])}, resumed at step {int(resumed_from)} by "
          f"{resumed['client_id']} and COMPLETED")


def test_cluster(workdir: str) -> int:
    missing = slurm_cluster.missing_programs()
    if missing:
        print(f"SKIPPED: {slurm_cluster.NOT_FOUND}: missing {', '.join(missing)}")
        return SKIP
    cluster = slurm_cluster.SlurmCluster(os.path.join(workdir, "slurm"))
    try:
        cluster.start()
    except slurm_cluster.SlurmUnavailable as e:
        print(f"SKIPPED: {e}")
        return SKIP
    try:
        with Hypertuned(os.path.join(workdir, "server")) as server:
            test_array_runs_study(server.address, cluster, workdir)
            test_preempted_trial_resumes(server.address, cluster, workdir)
    except BaseException:
        for name in ("slurmctld.log", "slurmd.log"):
            path = os.path.join(cluster.workdir, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    print(f"--- {name} (tail)\n{f.read()[-3000:]}")
        raise
    finally:
        cluster.stop()
    return 0


def main() -> int:
    if len(sys.argv) != 2 or sys.argv[1] not in ("dry-run", "cluster"):
        print(__doc__)
        return 2
    workdir = tempfile.mkdtemp(prefix="hypertune_slurm_test_")
    try:
        if sys.argv[1] == "dry-run":
            test_dry_run(workdir)
            code = 0
        else:
            code = test_cluster(workdir)
    except Failure as e:
        print(f"FAILED: {e}")
        print(f"(files kept in {workdir})")
        return 1
    if code == 0:
        print("PASSED")
    shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
