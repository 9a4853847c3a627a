#!/usr/bin/env python3
"""`hypertune launch slurm` against `hypertune worker --parallel N` on one
machine: the time from launch to the first trial ACTIVE, and the study's
total time (launch to the last trial COMPLETED), for the same study run
once by a Slurm job array of N workers on a single-node cluster
(testing/slurm_cluster.py, started here in a temporary directory) and once
by one worker process with N slots.

  python3 benchmarks/slurm_launch_bench.py [--trials 24] [--workers 4]
      [--seconds 1.0] [--repeat 3]

Each trial's program sleeps --seconds in 4 steps. Needs root, slurm-wlm and
munge, and build/bin (or $HYPERTUNE_BIN_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "testing"))

import slurm_cluster  # noqa: E402
from hypertuned_process import Hypertuned, bin_dir  # noqa: E402

HYPERTUNE = os.path.join(bin_dir(), "hypertune")

OBJECTIVE = """#!/bin/bash
x=$1
for step in 1 2 3 4; do
  sleep {step_seconds}
  echo "hypertune: loss=$x step=$step"
done
echo "hypertune: loss=$x"
"""


def cli(server: str, *args: str, **kwargs) -> str:
    return subprocess.run([HYPERTUNE, "--server", server, *args], check=True,
                          capture_output=True, text=True, **kwargs).stdout


def create(server: str, workdir: str, name: str, trials: int, workers: int) -> None:
    path = os.path.join(workdir, name + ".json")
    with open(path, "w") as f:
        json.dump({"name": name, "spec": {
            "parameters": [{"name": "x", "double_spec": {"min": 0.0, "max": 1.0}}],
            "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "algorithm": "QUASI_RANDOM", "max_trials": trials,
            "max_parallel_trials": workers}}, f)
    cli(server, "study", "create", "--config", path)


def states(server: str, name: str) -> list[str]:
    out = cli(server, "trials", name, "--format", "json")
    return [t["state"] for t in json.loads(out)["trials"]]


def watch(server: str, name: str, trials: int, start: float) -> tuple[float, float]:
    """Seconds from `start` to the first trial ACTIVE and to all COMPLETED."""
    first = None
    while True:
        now = states(server, name)
        t = time.monotonic() - start
        if first is None and any(s != "REQUESTED" for s in now):
            first = t
        if len(now) == trials and all(s == "COMPLETED" for s in now):
            return first, t
        time.sleep(0.05)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=24)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="hypertune_slurm_bench_")
    objective = os.path.join(workdir, "objective.sh")
    with open(objective, "w") as f:
        f.write(OBJECTIVE.format(step_seconds=args.seconds / 4))
    os.chmod(objective, 0o755)
    cluster = slurm_cluster.SlurmCluster(os.path.join(workdir, "slurm"),
                                         cpus=max(8, args.workers))
    results = {"slurm": [], "worker": []}
    try:
        cluster.start()
        with Hypertuned(os.path.join(workdir, "server")) as server:
            for run in range(args.repeat):
                name = f"slurm{run}"
                create(server.address, workdir, name, args.trials, args.workers)
                start = time.monotonic()
                cli(server.address, "launch", "slurm", name, "--workers", str(args.workers),
                    "--", objective, "{x}", env=cluster.env(), cwd=workdir)
                submitted = time.monotonic() - start
                first, total = watch(server.address, name, args.trials, start)
                results["slurm"].append((submitted, first, total))
                while cluster.jobs():
                    time.sleep(0.2)

                name = f"worker{run}"
                create(server.address, workdir, name, args.trials, args.workers)
                start = time.monotonic()
                worker = subprocess.Popen(
                    [HYPERTUNE, "--server", server.address, "worker", name, "--parallel",
                     str(args.workers), "--log-dir", os.path.join(workdir, "logs"), "--",
                     objective, "{x}"], stdout=subprocess.DEVNULL, cwd=workdir)
                first, total = watch(server.address, name, args.trials, start)
                worker.wait()
                results["worker"].append((0.0, first, total))
    finally:
        cluster.stop()
    shutil.rmtree(workdir, ignore_errors=True)

    print(f"{args.trials} trials of {args.seconds} s, {args.workers} at a time, "
          f"{args.repeat} runs each (median [min-max], seconds):")
    for how, label in (("slurm", f"launch slurm --workers {args.workers}"),
                       ("worker", f"worker --parallel {args.workers}")):
        rows = results[how]
        for i, what in ((0, "sbatch returned"), (1, "first trial ACTIVE"),
                        (2, "all trials COMPLETED")):
            values = [r[i] for r in rows]
            if how == "worker" and i == 0:
                continue
            print(f"  {label:32s} {what:22s} {statistics.median(values):6.2f} "
                  f"[{min(values):.2f}-{max(values):.2f}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
