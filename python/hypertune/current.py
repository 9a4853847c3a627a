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
import threading
from typing import Optional

from hypertune.client import Client
from hypertune.errors import InvalidArgumentError
from hypertune.trial import Trial

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
    and printed metrics). Its ``checkpoint_uri`` and ``measurements`` are
    those left by an earlier run of the trial (a promotion after an ASHA
    pause, or another worker that died): resume from them. In a ``with``
    block, an exception marks the trial INFEASIBLE; an interruption is left
    to the worker.
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
        _current = Trial(client, proto, study.spec, held=True, worker_holds=True)
        _looked = True
        return _current
