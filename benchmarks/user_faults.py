#!/usr/bin/python3
"""The user-level fault benchmark (issue 46): real user programs tuned
through hypertuned while seeded random faults hit them, restarted the way a
user or a scheduler would restart them, until every study is done.

  PYTHONPATH=build/python benchmarks/user_faults.py [--seed 1] [--trials 20]
      [--epochs 8] [--epoch-seconds 0.5] [--lease-seconds 3] [--procs 3]
      [--fault-interval 5] [--fleets py-optimize,py-worker,cc-sdk,cc-worker]
      [--work-dir DIR] [--json FILE] [--check]
  PYTHONPATH=build/python benchmarks/user_faults.py --suite --check
      # the short version ctest runs (tests/faults): fewer trials and faults

The programs (benchmarks/user_faults/), one study and one fleet of
processes each:
  py-optimize  train.py, a PyTorch-style script that checkpoints each epoch,
               run as a notebook cell: create_study(config,
               if_exists="load") without "algorithm", as the README's ten
               lines do, then study.optimize(); ASHA pausing at rungs.
  py-worker    the same script as `hypertune worker` children, attaching
               with hypertune.current_trial() or printing `hypertune:` lines
               (alternate worker launches); the MEDIAN rule.
  cc-sdk       hypertune-fault-trainer, a C++ SDK program looping on
               NextTrial, checkpointing to a file and resuming from
               checkpoint_uri; no early stopping.
  cc-worker    the same program as `hypertune worker` children; ASHA.
Each trains model.py's deterministic model (or its C++ twin), so a resumed
run's metrics must equal an uninterrupted run's, bit for bit.

Faults, seeded (--seed; their times follow the wall clock, so a rerun draws
the same sequence but may hit other trials): on each fleet, one every
--fault-interval seconds on average, SIGKILL, SIGTERM or SIGINT of a
`hypertune worker`, of a worker's child (the program) or of a standalone
program (an optimize() script, the C++ loop), always a process that holds a
trial at that moment, each (process, signal) drawn from a shuffled deck of
them all so that a short run hits every one; and every
--server-restart-interval seconds on average a hypertuned restart (SIGKILL
or SIGTERM in turn, down 0.2 to 1 s, then started again on the same SQLite
file and port). A fleet's
process that ends is started again (a rerun of the script, a new worker)
while its study is not COMPLETED.

At the end, from the server's history (the Python client) and the harness's
own measurements, it prints one JSON line and a table:
  finished      every trial COMPLETED, or STOPPED by the study's rule;
  fault_failed  trials INFEASIBLE or FAILED (no parameter here is bad, so
                each is a fault's doing): target 0;
  metrics       every trial's current-attempt measurements and final metrics
                (loss, accuracy) equal to the uninterrupted run's at the
                same steps: target 0 mismatches;
  device        the studies' recorded device-seconds against the measured
                time the programs held trials, per study: target within 5%,
                once each SIGKILLed trial's shortfall of up to a heartbeat
                interval (lease / 3, lost by design) is forgiven.
                Measured: a worker's child's wall time (from /proc: its start
                time, and when it was gone), since the worker holds the
                trial for the child's whole life; for a standalone program,
                from taking each trial to settling it (its own log), or to
                its death as the harness saw it;
  exceptions    exceptions and SDK errors that reached the user's code
                (each program appends them, with the traceback, to
                errors.jsonl): target 0. KeyboardInterrupt and
                hypertune.Terminated, which a fault's SIGINT or SIGTERM
                raise in a Python program, are counted apart as expected.
--check exits 1 when a target is missed (the suite's verdict); without it
the benchmark only measures.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PROGRAMS = os.path.join(HERE, "user_faults")
sys.path.insert(0, os.path.join(ROOT, "testing"))
sys.path.insert(0, PROGRAMS)
if not any(os.path.isdir(os.path.join(p, "hypertune", "v1")) for p in sys.path if p):
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))

import hypertune  # noqa: E402
import model  # noqa: E402
from hypertuned_process import Hypertuned, bin_dir  # noqa: E402

FLEETS = ("py-optimize", "py-worker", "cc-sdk", "cc-worker")
SIGNALS = {"kill9": signal.SIGKILL, "term": signal.SIGTERM, "int": signal.SIGINT}
# A Python program's answer to a fault's SIGINT or SIGTERM, not a failure.
EXPECTED_EXCEPTIONS = ("KeyboardInterrupt", "Terminated")
DEVICE_TOLERANCE = 0.05
# How a stop reason begins when the study's rule stopped the trial.
RULES = ("asha", "median", "percentile", "hyperband")
_PR_SET_CHILD_SUBREAPER = 36


@dataclasses.dataclass
class Settings:
    seed: int = 1
    trials: int = 20  # per study
    epochs: int = 8
    epoch_seconds: float = 0.5
    lease_seconds: int = 3
    procs: int = 3  # processes per fleet (workers: each --parallel slots)
    slots: int = 1
    fault_interval: float = 5.0  # mean seconds between faults, per fleet
    server_restart_interval: float = 12.0  # mean seconds between restarts
    max_retries: int = 10
    time_limit: float = 420.0
    fleets: tuple = FLEETS
    explicit_algorithm: bool = False


SUITE = Settings(seed=46, trials=14, epochs=6, epoch_seconds=0.4, lease_seconds=2,
                 procs=2, fault_interval=4.0, server_restart_interval=8.0,
                 time_limit=95.0)


# ----- Processes ------------------------------------------------------------


def proc_stat(pid: int) -> Optional[list[str]]:
    """/proc/PID/stat's fields after the command name (state first), or None
    when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def start_time(pid: int) -> Optional[float]:
    """When the process started, wall clock, from /proc (10 ms ticks)."""
    fields = proc_stat(pid)
    if fields is None:
        return None
    ticks = int(fields[19])
    since_boot = time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.time() - (since_boot - ticks / os.sysconf("SC_CLK_TCK"))


def children(pid: int) -> list[int]:
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as listing:
                found += [int(c) for c in listing.read().split()]
    except OSError:
        pass
    return found


def environ_trial(pid: int) -> Optional[int]:
    try:
        with open(f"/proc/{pid}/environ", "rb") as env:
            for entry in env.read().split(b"\0"):
                if entry.startswith(b"HYPERTUNE_TRIAL_ID="):
                    return int(entry.split(b"=", 1)[1])
    except (OSError, ValueError):
        pass
    return None


def reap_orphan(pid: int) -> None:
    """Reaps `pid` if it is a zombie child of ours (an orphaned program that
    this subreaper inherited from a killed worker)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


@dataclasses.dataclass
class Proc:
    """A process the harness started (a fleet's member)."""
    fleet: str
    role: str  # "worker", "optimize", "sdk"
    popen: subprocess.Popen
    started: float
    log: str = ""
    ended: Optional[float] = None
    killed_at_end: bool = False


@dataclasses.dataclass
class Child:
    """A process below a worker, seen in /proc: a program (with the trial
    in its environment) or a helper of the worker (trial None)."""
    fleet: str
    pid: int
    worker: int
    started: float
    trial: Optional[int]
    ended: Optional[float] = None


class Server(Hypertuned):
    def terminate(self) -> None:
        """SIGTERM, and waits for the server to exit (SIGKILL after 15 s)."""
        if self.process is None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            pass
        self.kill()


# ----- The run --------------------------------------------------------------


def study_config(fleet: str, s: Settings) -> dict:
    spec: dict[str, Any] = {
        "parameters": model.study_spec_parameters(),
        # Without roles: loss is the objective, the others are recorded.
        "metrics": [{"name": "loss", "goal": "MINIMIZE"},
                    {"name": "accuracy", "goal": "MAXIMIZE"},
                    {"name": "epoch_seconds", "goal": "MINIMIZE"}],
        "max_trials": s.trials,
        "lease_seconds": s.lease_seconds,
        # A user on spot machines expects kills; a lost lease spends one.
        "max_retries": s.max_retries,
        "seed": s.seed,
    }
    if fleet != "py-optimize" or s.explicit_algorithm:
        spec["algorithm"] = "RANDOM" if fleet != "py-optimize" else "GP_BANDIT"
    asha = {"rule": "ASHA", "min_resource": 2, "max_resource": s.epochs,
            "reduction_factor": 2, "pause_at_rungs": True}
    rules = {"py-optimize": asha, "cc-worker": asha,
             "py-worker": {"rule": "MEDIAN", "grace_steps": 2, "min_trials": 2}}
    if fleet in rules:
        spec["early_stopping"] = rules[fleet]
    return {"name": f"faults-{fleet}-{s.seed}", "spec": spec}


class Run:
    def __init__(self, s: Settings, work: str):
        self.s = s
        self.work = work
        # Seeded draws: one sequence per fleet and one for the server.
        self.rngs = {f: random.Random(f"{s.seed}-{f}") for f in FLEETS}
        self.server_rng = random.Random(f"{s.seed}-server")
        self.server = Server(os.path.join(work, "server"))
        self.events_path = os.path.join(work, "events.jsonl")
        self.errors_path = os.path.join(work, "errors.jsonl")
        self.ckpt_dir = os.path.join(work, "checkpoints")
        self.logs = os.path.join(work, "logs")
        os.makedirs(self.ckpt_dir)
        os.makedirs(self.logs)
        self.configs: dict[str, dict] = {}
        self.procs: list[Proc] = []
        self.children: dict[int, Child] = {}
        self.launches: dict[str, int] = {f: 0 for f in s.fleets}
        self.quick_failures: dict[str, int] = {f: 0 for f in s.fleets}
        self.gave_up: set[str] = set()
        self.study_state: dict[str, str] = {}
        self.faults: list[dict] = []
        self.events: list[dict] = []
        self._events_offset = 0
        self.open_trial: dict[int, int] = {}  # pid -> trial it holds (standalone)
        self.trainer = os.path.join(bin_dir(), "hypertune-fault-trainer")
        self.hypertune_cli = os.path.join(bin_dir(), "hypertune")
        self._stop_polling = threading.Event()
        self.started = 0.0
        self.timed_out = False
        self.signalled: set[int] = set()
        self.decks: dict[str, list] = {}
        self.stopping = False

    # -- launching --

    def env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith("HYPERTUNE_")}
        package = os.path.dirname(os.path.dirname(os.path.abspath(hypertune.__file__)))
        env["PYTHONPATH"] = os.pathsep.join([package, env.get("PYTHONPATH", "")]).rstrip(
            os.pathsep)
        env["HYPERTUNE_SERVER"] = self.server.address
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def program_args(self) -> list[str]:
        return ["--ckpt-dir", self.ckpt_dir, "--events", self.events_path,
                "--errors", self.errors_path, "--epochs", str(self.s.epochs)]

    def command(self, fleet: str) -> tuple[str, list[str]]:
        py = [sys.executable, os.path.join(PROGRAMS, "train.py")]
        py_pacing = ["--epoch-seconds", str(self.s.epoch_seconds)]
        cc = [self.trainer, "--server", self.server.address]
        cc_pacing = ["--epoch-ms", str(round(self.s.epoch_seconds * 1000))]
        study = self.configs[fleet]["name"]
        worker = [self.hypertune_cli, "--server", self.server.address, "worker", study,
                  "--parallel", str(self.s.slots),
                  "--log-dir", os.path.join(self.logs, f"{fleet}-worker-logs"), "--"]
        n = self.launches[fleet]
        if fleet == "py-optimize":
            config = os.path.join(self.work, f"{study}.json")
            return "optimize", py + ["optimize", "--config", config, "--server",
                                     self.server.address] + self.program_args() + py_pacing
        if fleet == "py-worker":
            mode = "worker" if n % 2 == 0 else "print"
            return "worker", worker + py + [mode] + self.program_args() + py_pacing
        if fleet == "cc-sdk":
            return "sdk", cc + ["--study", study] + self.program_args() + cc_pacing
        return "worker", worker + cc + self.program_args() + cc_pacing

    def launch(self, fleet: str) -> None:
        role, argv = self.command(fleet)
        n = self.launches[fleet]
        self.launches[fleet] += 1
        log = open(os.path.join(self.logs, f"{fleet}-{n}.log"), "wb")
        popen = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=self.env(),
                                 start_new_session=True, cwd=self.work)
        log.close()
        self.procs.append(Proc(fleet, role, popen, time.time(), log=log.name))

    # -- watching --

    def poll_studies(self, client: hypertune.Client) -> None:
        while not self._stop_polling.is_set():
            for fleet, config in self.configs.items():
                try:
                    self.study_state[fleet] = client.get_study(config["name"]).state
                except hypertune.HypertuneError:
                    pass
            self._stop_polling.wait(0.3)

    def read_events(self) -> None:
        try:
            with open(self.events_path) as source:
                source.seek(self._events_offset)
                chunk = source.read()
        except FileNotFoundError:
            return
        complete = chunk[:chunk.rfind("\n") + 1]
        self._events_offset += len(complete.encode())
        for line in complete.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            self.events.append(record)
            pid = record.get("pid")
            if record.get("ev") == "trial":
                self.open_trial[pid] = record.get("trial")
            elif record.get("ev") in ("settled", "exit", "done"):
                self.open_trial.pop(pid, None)

    def watch_children(self) -> None:
        now = time.time()
        for proc in self.procs:
            if proc.role != "worker" or proc.ended is not None:
                continue
            # The worker's descendants down to the programs (those with a
            # trial in their environment), through any helper of its own.
            pending = children(proc.popen.pid)
            while pending:
                pid = pending.pop()
                if pid not in self.children:
                    began = start_time(pid) or now
                    self.children[pid] = Child(proc.fleet, pid, proc.popen.pid, began,
                                               environ_trial(pid))
                if self.children[pid].trial is None:
                    pending += children(pid)
        for child in self.children.values():
            if child.ended is None and child.trial is None:
                # Seen between fork and exec, it had the worker's environment.
                child.trial = environ_trial(child.pid)
            if child.ended is None and not alive(child.pid):
                child.ended = now
                reap_orphan(child.pid)

    def reap(self) -> None:
        now = time.time()
        for proc in self.procs:
            if proc.ended is None and proc.popen.poll() is not None:
                proc.ended = now
                self.open_trial.pop(proc.popen.pid, None)
                quick = now - proc.started < 3.0 and proc.popen.returncode != 0
                self.quick_failures[proc.fleet] = (
                    self.quick_failures[proc.fleet] + 1 if quick else 0)
                if self.quick_failures[proc.fleet] > 20:
                    self.gave_up.add(proc.fleet)

    def running(self, fleet: str) -> list[Proc]:
        return [p for p in self.procs if p.fleet == fleet and p.ended is None]

    def fleet_done(self, fleet: str) -> bool:
        return fleet in self.gave_up or (
            self.study_state.get(fleet) == "COMPLETED" and not self.running(fleet))

    def supervise(self) -> None:
        """Keeps each fleet at --procs processes while its study runs."""
        for fleet in self.s.fleets:
            if fleet in self.gave_up or self.study_state.get(fleet) == "COMPLETED":
                continue
            last = max((p.ended or 0.0 for p in self.procs if p.fleet == fleet), default=0.0)
            if len(self.running(fleet)) < self.s.procs and time.time() - last > 0.3:
                self.launch(fleet)

    # -- faults --

    def targets(self, fleet: str) -> dict[str, list[tuple[int, Optional[int]]]]:
        """Per target kind, (pid, trial) of the fleet's processes that hold a
        trial now."""
        found: dict[str, set] = {"worker": set(), "child": set(), "program": set()}
        for child in self.children.values():
            # A child without a trial is not a program (a helper of the worker).
            if (child.fleet == fleet and child.ended is None and child.trial is not None
                    and alive(child.pid)):
                found["child"].add((child.pid, child.trial))
                worker = next((p for p in self.procs if p.popen.pid == child.worker), None)
                if worker is not None and worker.ended is None:
                    found["worker"].add((child.worker, child.trial))
        for proc in self.procs:
            pid = proc.popen.pid
            if (proc.fleet == fleet and proc.role != "worker" and proc.ended is None
                    and pid in self.open_trial):
                found["program"].add((pid, self.open_trial[pid]))
        return {kind: sorted(found[kind]) for kind in found}

    def inject(self, fleet: str) -> bool:
        """A fault on one of the fleet's processes that hold a trial; False
        when none does now."""
        rng = self.rngs[fleet]
        targets = self.targets(fleet)
        if not any(targets.values()):
            return False
        # Drawn from a shuffled deck of every (process, signal) the fleet
        # has, so that even a short run hits each of them.
        deck = self.decks.setdefault(fleet, [])
        if not deck:
            kinds = ("program",) if fleet in ("py-optimize", "cc-sdk") else ("worker", "child")
            deck += [(k, h) for k in kinds for h in SIGNALS]
            rng.shuffle(deck)
        kind, how = deck[-1]
        if not targets[kind]:
            return False
        deck.pop()
        pid, trial = rng.choice(targets[kind])
        try:
            os.kill(pid, SIGNALS[how])
        except ProcessLookupError:
            return False
        self.signalled.add(pid)
        self.faults.append({"t": round(time.time() - self.started, 2),
                            "fault": f"{kind}-{how}", "fleet": fleet, "pid": pid,
                            "trial": trial})
        return True

    def restart_server(self) -> None:
        """hypertuned killed (SIGKILL or SIGTERM), down a moment, and started
        again on the same database and port."""
        deck = self.decks.setdefault("server", [])
        if not deck:
            deck += ["kill9", "term"]
            self.server_rng.shuffle(deck)
        how = deck.pop()
        running = sorted({(fleet, trial) for fleet in self.s.fleets
                          for kind in self.targets(fleet).values() for _, trial in kind})
        self.faults.append({"t": round(time.time() - self.started, 2),
                            "fault": f"server-{how}", "running": running})
        if how == "kill9":
            self.server.kill()
        else:
            self.server.terminate()
        time.sleep(self.server_rng.uniform(0.2, 1.0))
        self.server.start()

    # -- all of it --

    def create_studies(self, client: hypertune.Client) -> None:
        for fleet in self.s.fleets:
            config = study_config(fleet, self.s)
            self.configs[fleet] = config
            with open(os.path.join(self.work, f"{config['name']}.json"), "w") as out:
                json.dump(config, out)
            if fleet != "py-optimize":  # that script creates its own
                client.create_study(config)

    def execute(self) -> None:
        if any(f.startswith("cc-") for f in self.s.fleets) and not os.access(
                self.trainer, os.X_OK):
            raise SystemExit(f"user_faults: {self.trainer} is not built "
                             "(cmake --build build --target hypertune-fault-trainer)")
        # Orphaned programs (of a killed worker) become our children: they
        # are measured, reaped and never left behind.
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.server.start()
        client = hypertune.Client(self.server.address)
        self.create_studies(client)
        poller = threading.Thread(target=self.poll_studies, args=(client,), daemon=True)
        poller.start()
        self.started = time.time()
        # Each fleet has its own clock of faults, so that a fleet still
        # running when the others are done is not hit more often.
        next_fault = {f: self.started + self.rngs[f].expovariate(1.0 / self.s.fault_interval)
                      for f in self.s.fleets}
        next_restart = (self.started + self.server_rng.expovariate(
            1.0 / self.s.server_restart_interval) if self.s.server_restart_interval > 0
            else float("inf"))
        try:
            while not all(self.fleet_done(f) for f in self.s.fleets):
                if time.time() - self.started > self.s.time_limit:
                    self.timed_out = True
                    break
                self.read_events()
                self.watch_children()
                self.reap()
                self.supervise()
                now = time.time()
                for fleet in self.s.fleets:
                    if now < next_fault[fleet] or self.fleet_done(fleet):
                        continue
                    if self.inject(fleet):
                        next_fault[fleet] = now + self.rngs[fleet].expovariate(
                            1.0 / self.s.fault_interval)
                    else:
                        next_fault[fleet] = now + 0.2  # nothing held: soon again
                if self.s.server_restart_interval > 0 and now >= next_restart:
                    self.restart_server()
                    next_restart = time.time() + self.server_rng.expovariate(
                        1.0 / self.s.server_restart_interval)
                time.sleep(0.02)
        finally:
            self.wall = time.time() - self.started
            self.stop_all()
            self._stop_polling.set()
            poller.join(timeout=40)
        self.read_events()
        with open(os.path.join(self.work, "processes.jsonl"), "w") as out:
            for child in self.children.values():
                out.write(json.dumps(dict(dataclasses.asdict(child), role="child")) + "\n")
            for proc in self.procs:
                out.write(json.dumps({"role": proc.role, "fleet": proc.fleet,
                                      "pid": proc.popen.pid, "started": proc.started,
                                      "ended": proc.ended, "argv": proc.popen.args,
                                      "returncode": proc.popen.returncode}) + "\n")

    def stop_all(self) -> None:
        """Ends every process the run started (and orphaned programs)."""
        self.stopping = True
        for proc in self.procs:
            if proc.ended is None and proc.popen.poll() is None:
                proc.killed_at_end = True
                proc.popen.kill()
        for proc in self.procs:
            proc.popen.wait()
            if proc.ended is None:
                proc.ended = time.time()
        self.watch_children()
        for child in self.children.values():
            if child.ended is None:
                try:
                    os.kill(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        deadline = time.time() + 10
        while any(c.ended is None for c in self.children.values()) and time.time() < deadline:
            self.watch_children()
            time.sleep(0.02)


# ----- The verdict ----------------------------------------------------------


def cc_reference(trainer: str, params: dict, epochs: int) -> list[dict]:
    out = subprocess.run(
        [trainer, "--reference", "--lr", repr(params["lr"]), "--batch-size",
         str(int(params["batch_size"])), "--momentum", repr(params["momentum"]),
         "--epochs", str(epochs)], capture_output=True, text=True, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def measured_time(run: Run) -> tuple[dict[str, float], dict[tuple[str, int], float]]:
    """Seconds the programs held trials, per fleet and per (fleet, trial)."""
    per_fleet = {f: 0.0 for f in run.s.fleets}
    per_trial: dict[tuple[str, int], float] = {}
    for child in run.children.values():
        if child.trial is None:
            continue  # not a program: a helper the worker runs beside it
        seconds = (child.ended or time.time()) - child.started
        per_fleet[child.fleet] += seconds
        if child.trial is not None:
            key = (child.fleet, child.trial)
            per_trial[key] = per_trial.get(key, 0.0) + seconds
    standalone = {p.popen.pid: p for p in run.procs if p.role != "worker"}
    by_pid: dict[int, list[dict]] = {}
    for record in run.events:
        if record.get("pid") in standalone:
            by_pid.setdefault(record["pid"], []).append(record)
    for pid, records in by_pid.items():
        proc = standalone[pid]
        for i, record in enumerate(records):
            if record.get("ev") != "trial":
                continue
            later = [r["t"] for r in records[i + 1:]
                     if r.get("ev") in ("trial", "settled", "exit", "done")]
            end = later[0] if later else (proc.ended or time.time())
            seconds = max(0.0, end - record["t"])
            per_fleet[proc.fleet] += seconds
            key = (proc.fleet, record["trial"])
            per_trial[key] = per_trial.get(key, 0.0) + seconds
    return per_fleet, per_trial


def same(a: dict, b: dict) -> bool:
    """Whether two measurements hold the same deterministic metrics, bit for
    bit (epoch_seconds is the wall clock's)."""
    return all(a.get(k) == b.get(k) for k in ("loss", "accuracy"))


def curve_problems(state: str, steps: list[tuple[int, dict]], final: dict,
                   final_step: int, reference: list[dict],
                   epochs: int) -> tuple[list[str], bool]:
    """What in a finished trial's current curve (step, metrics) and final
    metrics differs from the uninterrupted run's `reference` (epochs 1..
    epochs), and whether the curve misses steps. A COMPLETED trial's result
    is the last epoch's; a STOPPED one's is at its final (else last
    measured) step."""
    wrong = []
    for step, metrics in steps:
        if not 1 <= step <= epochs or not same(metrics, reference[step - 1]):
            wrong.append(f"step {step}: {metrics}")
    measured = [step for step, _ in steps]
    if state == "COMPLETED":
        final_step = epochs
    elif not final_step:
        final_step = max(measured, default=0)
    if final and (not 1 <= final_step <= epochs or not same(final, reference[final_step - 1])):
        wrong.append(f"final (step {final_step}): {final}")
    if state == "COMPLETED" and not final:
        wrong.append("no final metrics")
    last = max(measured + [final_step if final else 0])
    return wrong, sorted(set(measured)) != list(range(1, last + 1))


def verdict(run: Run) -> dict:
    s = run.s
    client = hypertune.Client(run.server.address)
    measured, measured_trial = measured_time(run)
    fleets: dict[str, dict] = {}
    details: list[dict] = []  # one per trial, written to the work folder
    recorded = {f: 0.0 for f in s.fleets}
    misses: list[dict] = []
    resumed_at: dict[tuple[str, int], int] = {}
    takes: dict[tuple[str, int], int] = {}
    names = {c["name"]: f for f, c in run.configs.items()}
    fault_signals: dict[tuple[str, int], set] = {}
    for fault in run.faults:
        if fault.get("trial") is not None:
            fault_signals.setdefault((fault["fleet"], fault["trial"]), set()).add(
                fault["fault"].split("-")[-1])
        for fleet, trial in fault.get("running", []):
            fault_signals.setdefault((fleet, trial), set()).add("server")
    for record in run.events:
        if record.get("ev") == "trial" and record.get("study") in names:
            key = (names[record["study"]], record["trial"])
            takes[key] = takes.get(key, 0) + 1
            resumed_at[key] = max(resumed_at.get(key, 0), record.get("resumed_at", 0))
    for fleet in s.fleets:
        name = run.configs[fleet]["name"]
        row = {"trials": 0, "COMPLETED": 0, "STOPPED": 0, "INFEASIBLE": 0, "FAILED": 0,
               "unfinished": 0, "attempts>1": 0, "resumed": 0, "mismatches": 0, "gaps": 0,
               "recorded_s": 0.0, "measured_s": round(measured[fleet], 2), "ratio": None}
        try:
            study = client.get_study(name)
        except hypertune.NotFoundError:
            row["unfinished"] = s.trials
            misses.append({"target": "finished", "fleet": fleet, "trial": None,
                           "state": "no study", "reason": "the study was never created"})
            fleets[fleet] = row
            continue
        recorded[fleet] = study.proto.device_seconds
        row["recorded_s"] = round(study.proto.device_seconds, 2)
        if measured[fleet] > 0:
            row["ratio"] = round(study.proto.device_seconds / measured[fleet], 4)
        trials = study.trials()
        row["trials"] = len(trials)
        row["unfinished"] = max(0, s.trials - len(trials))
        for trial in trials:
            p = trial.proto
            key = (fleet, trial.id)
            state = trial.state
            attempt = getattr(p, "attempt", 0)
            if attempt > 1:
                row["attempts>1"] += 1
            if resumed_at.get(key, 0) > 0 or takes.get(key, 0) > 1:
                row["resumed"] += 1
            reason = (trial.failure_reason or trial.infeasible_reason or trial.stop_reason
                      or "")
            details.append({
                "fleet": fleet, "trial": trial.id, "state": state, "attempt": attempt,
                "retries": trial.retry_count, "preemptions": trial.preemption_count,
                "earlier_attempts": len(getattr(p, "earlier_attempts", [])),
                "taken": takes.get(key, 0), "resumed_at": resumed_at.get(key, 0),
                "steps": [m.step for m in p.measurements],
                "recorded_s": round(p.device_seconds, 3),
                "measured_s": round(measured_trial.get(key, 0.0), 3), "reason": reason})
            if state in ("INFEASIBLE", "FAILED"):
                row[state] += 1
                misses.append({"target": "fault_failed", "fleet": fleet, "trial": trial.id,
                               "state": state, "reason": reason})
                continue
            by_rule = trial.stop_reason.split(":")[0].strip().lower() in RULES
            if state not in ("COMPLETED", "STOPPED") or (state == "STOPPED" and not by_rule):
                row["unfinished"] += 1
                misses.append({"target": "finished", "fleet": fleet, "trial": trial.id,
                               "state": state, "reason": reason})
                continue
            row[state] += 1
            params = trial.params
            reference = (model.reference_curve(params, s.epochs) if fleet.startswith("py-")
                         else cc_reference(run.trainer, params, s.epochs))
            steps = [(m.step, dict(m.metrics)) for m in p.measurements]
            final = dict(p.final_measurement.metrics)
            wrong, gap = curve_problems(state, steps, final, p.final_measurement.step,
                                        reference, s.epochs)
            row["gaps"] += gap
            if wrong:
                row["mismatches"] += 1
                misses.append({"target": "metrics", "fleet": fleet, "trial": trial.id,
                               "state": state, "attempt": attempt,
                               "reason": "; ".join(wrong)[:300]})
        # Where the unrecorded time went: measured - recorded summed over
        # trials by the worst fault each took (SIGKILL, SIGTERM, SIGINT, a
        # server restart while it ran, none), so that a gap can be told from
        # the SIGKILL allowance.
        by_fault: dict[str, list] = {}
        for trial in trials:
            hit = fault_signals.get((fleet, trial.id), set())
            worst = next((k for k in ("kill9", "term", "int", "server") if k in hit), "none")
            gap = measured_trial.get((fleet, trial.id), 0.0) - trial.proto.device_seconds
            entry = by_fault.setdefault(worst, [0, 0.0])
            entry[0] += 1
            entry[1] = round(entry[1] + gap, 2)
        row["gap_by_fault"] = by_fault
        # A SIGKILL loses up to a heartbeat interval by design (lease / 3):
        # that much of each killed trial's shortfall is forgiven, the rest
        # must stay within the tolerance.
        allowance = by_fault.get("kill9", [0, 0.0])[0] * s.lease_seconds / 3.0
        shortfall = measured[fleet] - recorded[fleet]
        unexplained = shortfall - min(max(shortfall, 0.0), allowance)
        if row["ratio"] is None or abs(unexplained) > DEVICE_TOLERANCE * measured[fleet]:
            gaps = sorted(
                ((measured_trial.get((fleet, t.id), 0.0) - t.proto.device_seconds, t)
                 for t in trials), key=lambda g: -abs(g[0]))[:3]
            misses.append({
                "target": "device", "fleet": fleet, "trial": None, "state": "",
                "reason": f"recorded {row['recorded_s']} s, measured {row['measured_s']} s; "
                          "measured - recorded by the trials' worst fault: " + ", ".join(
                              f"{k} {n} trials {g:+.2f} s" for k, (n, g) in by_fault.items())
                          + "; largest: " + ", ".join(
                              f"trial {t.id} {t.state} {g:+.2f} s" for g, t in gaps)})
        fleets[fleet] = row

    with open(os.path.join(run.work, "trials.jsonl"), "w") as out:
        out.writelines(json.dumps(d) + "\n" for d in details)
    with open(os.path.join(run.work, "faults.jsonl"), "w") as out:
        out.writelines(json.dumps(f) + "\n" for f in run.faults)
    errors = []
    try:
        with open(run.errors_path) as source:
            errors = [json.loads(line) for line in source if line.strip()]
    except FileNotFoundError:
        pass
    exceptions = [e for e in errors if e.get("what") == "exception"]
    unexpected = [e for e in exceptions if e.get("type") not in EXPECTED_EXCEPTIONS]
    for error in unexpected:
        misses.append({"target": "exceptions", "fleet": error.get("kind"), "trial": None,
                       "state": error.get("type"), "reason": error.get("message", "")[:300]})
    # Programs and workers that failed with no fault sent to them: what a
    # user would have had to look into (not a target; their logs say why).
    unexplained = [
        {"fleet": p.fleet, "role": p.role, "pid": p.popen.pid,
         "returncode": p.popen.returncode, "log": p.log}
        for p in run.procs
        if p.popen.returncode not in (0, None) and not p.killed_at_end
        and p.popen.pid not in run.signalled]
    # What the protocol may lose by design: a program that vanishes (SIGKILL)
    # takes with it up to one heartbeat interval (a third of the lease).
    kills = sum(1 for f in run.faults
                if f["fault"].endswith("kill9") and not f["fault"].startswith("server"))
    total_recorded = sum(recorded.values())
    total_measured = sum(measured.values())
    by_fault: dict[str, int] = {}
    for fault in run.faults:
        by_fault[fault["fault"]] = by_fault.get(fault["fault"], 0) + 1
    targets = {
        "finished": not any(m["target"] == "finished" for m in misses) and not run.timed_out,
        "fault_failed": sum(r["INFEASIBLE"] + r["FAILED"] for r in fleets.values()) == 0,
        "metrics": sum(r["mismatches"] for r in fleets.values()) == 0,
        "device": not any(m["target"] == "device" for m in misses),
        "exceptions": not unexpected,
    }
    return {
        "benchmark": "user_faults",
        "seed": s.seed,
        "settings": dataclasses.asdict(s),
        "wall_seconds": round(run.wall, 1),
        "timed_out": run.timed_out,
        "faults": len(run.faults),
        "faults_by_kind": dict(sorted(by_fault.items())),
        "launches": run.launches,
        "fleets": fleets,
        "trials": sum(r["trials"] for r in fleets.values()),
        "fault_failed": sum(r["INFEASIBLE"] + r["FAILED"] for r in fleets.values()),
        "resumed": sum(r["resumed"] for r in fleets.values()),
        "metric_mismatches": sum(r["mismatches"] for r in fleets.values()),
        "device_seconds_recorded": round(total_recorded, 2),
        "device_seconds_measured": round(total_measured, 2),
        "device_ratio": round(total_recorded / total_measured, 4) if total_measured else None,
        "sigkill_allowance_s": round(kills * s.lease_seconds / 3.0, 2),
        "exceptions": len(unexpected),
        "expected_interrupts": len(exceptions) - len(unexpected),
        "warnings": sum(1 for e in errors if e.get("what") == "warning"),
        "unexplained_exits": unexplained,
        "curve_gaps": sum(r["gaps"] for r in fleets.values()),
        "targets": targets,
        "misses": misses,
    }


def print_table(summary: dict, out=sys.stdout) -> None:
    columns = ["trials", "COMPLETED", "STOPPED", "INFEASIBLE", "FAILED", "unfinished",
               "attempts>1", "resumed", "mismatches", "gaps", "recorded_s", "measured_s",
               "ratio"]
    heads = {"COMPLETED": "COMPL", "STOPPED": "STOPP", "INFEASIBLE": "INFEAS",
             "FAILED": "FAILED", "unfinished": "unfin", "attempts>1": "att>1",
             "mismatches": "mism", "recorded_s": "rec_s", "measured_s": "meas_s"}
    print(f"\n{'fleet':<12}" + "".join(f"{heads.get(c, c):>8}" for c in columns), file=out)
    for fleet, row in summary["fleets"].items():
        print(f"{fleet:<12}" + "".join(f"{str(row[c]):>8}" for c in columns), file=out)
    print(f"\n{summary['faults']} faults in {summary['wall_seconds']} s: "
          + ", ".join(f"{k} {v}" for k, v in summary["faults_by_kind"].items()), file=out)
    print(f"exceptions reaching the user's code: {summary['exceptions']} "
          f"(and {summary['expected_interrupts']} KeyboardInterrupt/Terminated from the "
          f"faults' signals; {summary['warnings']} warnings)", file=out)
    print(f"processes that failed with no fault sent to them: "
          f"{len(summary['unexplained_exits'])}; trials whose current curve misses steps: "
          f"{summary['curve_gaps']}", file=out)
    print(f"device-seconds recorded {summary['device_seconds_recorded']} / measured "
          f"{summary['device_seconds_measured']} = {summary['device_ratio']} (SIGKILLs "
          f"may lose up to {summary['sigkill_allowance_s']} s by design: a heartbeat "
          "interval each)", file=out)
    print("\ntargets:", file=out)
    for name, ok in summary["targets"].items():
        print(f"  {name:<13} {'ok' if ok else 'MISSED'}", file=out)
    if summary["misses"]:
        print("\nmisses:", file=out)
        for miss in summary["misses"]:
            trial = "" if miss["trial"] is None else f" trial {miss['trial']}"
            print(f"  [{miss['target']}] {miss['fleet']}{trial} {miss['state']}: "
                  f"{miss['reason']}", file=out)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", action="store_true",
                        help="the short settings ctest uses (tests/faults)")
    defaults = Settings()
    for field in dataclasses.fields(Settings):
        if field.name in ("fleets", "explicit_algorithm"):
            continue
        parser.add_argument("--" + field.name.replace("_", "-"), type=type(field.default),
                            default=None, help=f"default {getattr(defaults, field.name)}")
    parser.add_argument("--fleets", default=None, help="comma-separated, of " + ",".join(FLEETS))
    parser.add_argument("--explicit-algorithm", action="store_true",
                        help="py-optimize's config names its algorithm (works around "
                             "create_study's if_exists='load' comparing server defaults)")
    parser.add_argument("--work-dir", help="kept after the run (default: a temporary one, "
                        "removed unless a target is missed)")
    parser.add_argument("--json", help="also write the summary to this file")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    s = dataclasses.replace(SUITE) if args.suite else Settings()
    for field in dataclasses.fields(Settings):
        value = getattr(args, field.name, None)
        if field.name == "fleets":
            if args.fleets:
                value = tuple(args.fleets.split(","))
                unknown = set(value) - set(FLEETS)
                if unknown:
                    parser.error(f"--fleets: unknown {sorted(unknown)}")
            else:
                value = None
        if field.name == "explicit_algorithm":
            value = True if args.explicit_algorithm else None
        if value is not None:
            setattr(s, field.name, value)
    if args.work_dir:
        work = os.path.abspath(args.work_dir)
        if os.path.exists(work):
            shutil.rmtree(work)
        os.makedirs(work)
    else:
        work = tempfile.mkdtemp(prefix="user-faults-")
    # A SIGTERM (ctest's timeout, a scheduler) ends the run as a failure
    # does: every process it started is ended first.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    run = Run(s, work)
    try:
        run.execute()
        summary = verdict(run)
    finally:
        run.server.kill()
    summary["work_dir"] = work
    print(json.dumps(summary, sort_keys=False))
    print_table(summary)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(summary, out, indent=1)
    missed = not all(summary["targets"].values())
    if not missed and not args.work_dir:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"\nlogs: {work}")
    return 1 if missed and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
