"""The trial that `hypertune worker` runs this program for.

``hypertune worker STUDY -- python3 train.py`` starts the program once per
trial with the trial in its environment (``HYPERTUNE_SERVER``,
``HYPERTUNE_STUDY``, ``HYPERTUNE_TRIAL_ID``, ``HYPERTUNE_LEASE_EPOCH``,
``HYPERTUNE_CLIENT_ID``, ...). :func:`current_trial` attaches to that trial,
so that one script runs standalone (no trial: its own defaults) and under
the worker alike::

    trial = hypertune.current_trial()
    lr = trial.params["lr"] if trial else 0.01
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Optional

from hypertune.client import Client
from hypertune.errors import HypertuneError, InvalidArgumentError
from hypertune.trial import Trial, rank_from_env

# How often the program checks that its worker is still there, and how
# long it then gives its own SIGTERM handling before it ends itself.
_WATCH_SECONDS = 0.5
_GRACE_SECONDS = 30.0

_lock = threading.Lock()
_current: Optional[Trial] = None
_looked = False


def _env_int(name: str) -> int:
    text = os.environ.get(name, "")
    try:
        return int(text)
    except ValueError:
        raise InvalidArgumentError(f"{name}: {text!r} is not an integer") from None


def current_trial() -> Optional[Trial]:
    """The trial the `hypertune worker` that started this program holds, or
    None when the program was not started by one (no
    ``HYPERTUNE_TRIAL_ID``). Every call returns the same handle.

    The handle reports, sets checkpoints and completes under the worker's
    lease epoch; the worker renews the lease while the program runs, and
    settles the trial itself if the program does not (from its exit status
    and printed metrics), and counts its device time. A trial run before
    (a promotion after an ASHA pause, or another worker that died) comes
    with its ``checkpoint_uri`` and ``checkpoint_step``: resume from step
    ``checkpoint_step + 1``; its ``measurements`` are those up to it, and
    ``attempt`` says which attempt this is. In a ``with``
    block, an exception settles the trial as for any trial (FAILED,
    INFEASIBLE for what the parameters caused, given back for a closed
    stdout); an interruption is left to the worker.

    A program outlives its worker only by mistake: if the worker that
    started it ends (``kill -9``), the program notices its parent is gone,
    gives the trial back (another worker resumes it from its checkpoint)
    and ends itself with SIGTERM. In a distributed training (torchrun:
    ``RANK``, else ``LOCAL_RANK``) only rank 0 reports and finishes the
    trial; see :attr:`Trial.rank`.
    """
    global _current, _looked
    with _lock:
        if _looked:
            return _current
        if not os.environ.get("HYPERTUNE_TRIAL_ID"):
            _looked = True
            return None
        study_name = os.environ.get("HYPERTUNE_STUDY", "")
        if not study_name:
            raise InvalidArgumentError("HYPERTUNE_STUDY: not set, but HYPERTUNE_TRIAL_ID is")
        trial_id = _env_int("HYPERTUNE_TRIAL_ID")
        epoch = _env_int("HYPERTUNE_LEASE_EPOCH")
        # The worker renews the lease; this handle only reports.
        client = Client(heartbeats=False)
        study = client.get_study(study_name)
        proto = study.trial(trial_id).proto
        # Act under the worker's epoch: if the trial has moved on to another
        # holder since, the server refuses our reports instead of mixing them in.
        proto.lease_epoch = epoch
        _current = Trial(
            client, proto, study.spec, held=True, worker_holds=True, rank=rank_from_env()
        )
        _looked = True
        _watch_parent(_current, os.getppid())
        return _current


def _watch_parent(trial: Trial, parent: int) -> None:
    """Ends this program once ``parent`` (the worker, or what the worker
    started it through) is gone: the worker's own guard (PR_SET_PDEATHSIG)
    covers its direct child only, and a program that trains on for a
    worker nobody listens to wastes its device and keeps the trial from
    being handed over."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_WATCH_SECONDS)
        if trial.held and trial.rank == 0:
            try:
                trial.give_back(f"the worker (pid {parent}) that started the program is gone")
            except HypertuneError:
                pass  # its lease runs out instead
        os.kill(os.getpid(), signal.SIGTERM)
        # A SIGTERM handler of the program's own may save a checkpoint;
        # then, or if it ignores the signal, the program ends.
        time.sleep(_GRACE_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    if parent > 1:
        threading.Thread(target=watch, name="hypertune-worker-watch", daemon=True).start()
