"""A throwaway single-node Slurm cluster for tests and benchmarks, in a
directory of its own.

start() writes a munge key and runs munged on a socket in that directory,
writes a slurm.conf (one node, "localhost", with `cpus` CPUs whatever the
machine has: SlurmdParameters=config_overrides; no cgroups: proctrack/
linuxproc and task/none; no accounting; ports picked free) and runs
slurmctld and slurmd in the foreground (-D) as child processes, then waits
until the node is idle. env() is the environment for sbatch, squeue,
scontrol and scancel (SLURM_CONF). stop() cancels every job, waits for them
to end, and stops the daemons; the daemons also get SIGKILL if this process
dies first (PR_SET_PDEATHSIG), so no test leaves them running.

Needs Debian's slurm-wlm and munge, and root (slurmd runs jobs as their
users); start() raises SlurmUnavailable saying what is missing otherwise.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import time
from typing import Optional

NOT_FOUND = "slurm-wlm not found (apt-get install slurm-wlm munge)"
PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
_START_TIMEOUT = 30.0
_STOP_TIMEOUT = 15.0


class SlurmUnavailable(Exception):
    """Slurm cannot run here; the message says why (for a visible skip)."""


def _which(program: str) -> Optional[str]:
    return shutil.which(program, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")


def missing_programs() -> list[str]:
    return [p for p in PROGRAMS if _which(p) is None]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG = 1: SIGKILL when the parent thread ends.
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


class SlurmCluster:
    """slurmctld + slurmd + munged on ``workdir``, one node "localhost"."""

    def __init__(self, workdir: str, cpus: int = 8, partition: str = "test"):
        self.workdir = os.path.abspath(workdir)
        self.cpus = cpus
        self.partition = partition
        self.conf = os.path.join(self.workdir, "slurm.conf")
        self.munge_socket = os.path.join(self.workdir, "munge.socket")
        self._processes: list[tuple[str, subprocess.Popen]] = []

    def env(self, base: Optional[dict] = None) -> dict:
        env = dict(os.environ if base is None else base)
        env["SLURM_CONF"] = self.conf
        env["PATH"] = env.get("PATH", "") + ":/usr/sbin"
        return env

    def run(self, *args: str, check: bool = True) -> str:
        """Runs a Slurm client program against this cluster; its stdout."""
        done = subprocess.run(list(args), env=self.env(), capture_output=True, text=True,
                              timeout=60)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: exit {done.returncode}: {done.stderr}")
        return done.stdout

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(os.path.join(self.workdir, f"{name}.out"), "ab")
        process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=self.env(),
                                   preexec_fn=_die_with_parent)
        log.close()
        self._processes.append((name, process))
        return process

    def _log_tail(self, name: str) -> str:
        text = ""
        for suffix in (".out", ".log"):
            path = os.path.join(self.workdir, name + suffix)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    text += f.read()[-1500:]
        return text

    def start(self) -> None:
        missing = missing_programs()
        if missing:
            raise SlurmUnavailable(f"{NOT_FOUND}: missing {', '.join(missing)}")
        if os.geteuid() != 0:
            raise SlurmUnavailable("the single-node Slurm cluster needs root (slurmd runs "
                                   "jobs as their users)")
        os.makedirs(self.workdir, exist_ok=True)
        # munged wants its socket's folder reachable by everyone.
        os.chmod(self.workdir, 0o711)
        for sub in ("state", "spool"):
            os.makedirs(os.path.join(self.workdir, sub), exist_ok=True)
        key = os.path.join(self.workdir, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o400)
        try:
            self._start_munged(key)
            self._write_conf()
            self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f", self.conf])
            self._spawn("slurmd", [_which("slurmd"), "-D", "-N", "localhost", "-f", self.conf])
            self._wait_idle()
        except BaseException:
            self.stop()
            raise

    def _start_munged(self, key: str) -> None:
        d = self.workdir
        process = self._spawn("munged", [
            _which("munged"), "--foreground", "--force", f"--socket={self.munge_socket}",
            f"--key-file={key}", f"--log-file={d}/munged.log", f"--pid-file={d}/munged.pid",
            f"--seed-file={d}/munged.seed"])
        deadline = time.monotonic() + _START_TIMEOUT
        while not os.path.exists(self.munge_socket):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"munged did not start:\n{self._log_tail('munged')}")
            time.sleep(0.05)

    def _write_conf(self) -> None:
        d = self.workdir
        with open(self.conf, "w") as f:
            f.write(f"""\
# A single-node test cluster (testing/slurm_cluster.py).
ClusterName=hypertunetest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.pid
SlurmctldLogFile={d}/slurmctld.log
SlurmdLogFile={d}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
KillWait=5
MinJobAge=300
SlurmctldDebug=info
SlurmdDebug=info
NodeName=localhost NodeAddr=127.0.0.1 CPUs={self.cpus} State=UNKNOWN
PartitionName={self.partition} Nodes=localhost Default=YES MaxTime=INFINITE State=UP
""")

    def _wait_idle(self) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        state = ""
        while time.monotonic() < deadline:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {process.returncode}:\n"
                                       f"{self._log_tail(name)}")
            done = subprocess.run(["sinfo", "-h", "-n", "localhost", "-o", "%t"],
                                  env=self.env(), capture_output=True, text=True)
            state = done.stdout.strip()
            if done.returncode == 0 and state == "idle":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the node is not idle after {_START_TIMEOUT} s (sinfo: {state!r}):\n"
                           f"{self._log_tail('slurmctld')}\n{self._log_tail('slurmd')}")

    def jobs(self) -> list[str]:
        """The ids of the jobs the cluster knows that have not ended."""
        done = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env(),
                              capture_output=True, text=True)
        return done.stdout.split() if done.returncode == 0 else []

    def stop(self) -> None:
        """Cancels every job, waits for them to end (up to 15 s), then stops
        the daemons (SIGTERM, SIGKILL after 5 s)."""
        names = [name for name, _ in self._processes]
        if "slurmctld" in names and "slurmd" in names:
            subprocess.run(["scancel", "--full", "--user=root"], env=self.env(),
                           capture_output=True)
            deadline = time.monotonic() + _STOP_TIMEOUT
            while self.jobs() and time.monotonic() < deadline:
                time.sleep(0.2)
        for _, process in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for _, process in reversed(self._processes):
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self._processes.clear()

    def __enter__(self) -> SlurmCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
