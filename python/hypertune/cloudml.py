"""A drop-in for the reporting call of cloudml-hypertune (Vertex AI and AI
Platform hyperparameter tuning), so that training code written for it runs
unchanged under ``hypertune worker``::

    import hypertune
    hpt = hypertune.HyperTune()
    hpt.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=acc, global_step=epoch)

The calls become the worker's metrics lines, written straight to the
program's standard output, and the worker does what it does for any
program: it records the measurements as they come (early stopping ends the
program when the server says so) and settles the trial by how the program
ends, so that a script that fails (exits non-zero) is FAILED whatever it
reported.

- With ``global_step``, the study's objective becomes that step's
  intermediate measurement (``hypertune: accuracy=0.91 step=3``), with the
  other metrics reported for the step before it. The server keeps one
  measurement per step, so metrics reported for a step after its objective
  only reach the final metrics.
- The final metrics are the last value of every metric reported, with or
  without a step (a line without ``step=``, written whenever they say more
  than the last step's line).
- ``checkpoint_path`` is recorded as the trial's checkpoint URI, holding
  ``global_step`` (where given): a trial handed over resumes after it.

Outside a worker the calls only keep the values (:attr:`HyperTune.reports`).
"""

from __future__ import annotations

import math
import os
import re
import sys
import threading
from typing import Optional

from hypertune.current import current_trial
from hypertune.errors import InvalidArgumentError
from hypertune.trial import Trial, check_metrics

# What a metric name may hold (the server's rule, which the line format relies on).
_TAG = re.compile(r"[A-Za-z_][A-Za-z0-9._-]*")


def _line(metrics: dict[str, float], step: Optional[int]) -> str:
    parts = ["hypertune:"]
    parts += [f"{name}={'nan' if math.isnan(v) else repr(v)}" for name, v in metrics.items()]
    if step is not None:
        parts.append(f"step={step}")
    return " ".join(parts) + "\n"


def _write(line: str) -> None:
    # Past sys.stdout and its buffer, which the script may have replaced;
    # what it printed so far goes first, so that the line starts a line.
    try:
        sys.stdout.flush()
    except (AttributeError, ValueError, OSError):
        pass
    os.write(1, line.encode())


class HyperTune:
    """cloudml-hypertune's ``HyperTune``, reporting to hypertune.

    Thread safety: calls may come from any thread.
    """

    def __init__(self) -> None:
        self._trial: Optional[Trial] = current_trial()
        self._objective = self._trial.objective if self._trial is not None else ""
        self._lock = threading.Lock()
        self._step: Optional[int] = None
        self._step_metrics: dict[str, float] = {}
        self._step_sent = False
        # What the worker would complete the trial with now: the last line
        # without a step once there was one, else the last step's line.
        self._said: dict[str, float] = {}
        self._final_said = False
        self._final: dict[str, float] = {}
        #: Every report as (tag, value, global_step), in order.
        self.reports: list[tuple[str, float, Optional[int]]] = []

    def report_hyperparameter_tuning_metric(
        self,
        hyperparameter_metric_tag: str,
        metric_value: float,
        global_step: Optional[int] = None,
        checkpoint_path: str = "",
    ) -> None:
        """Reports ``metric_value`` for the metric ``hyperparameter_metric_tag``
        at step ``global_step`` (an intermediate measurement), or without a
        step as a final metric; ``checkpoint_path`` is recorded as the
        trial's checkpoint. InvalidArgumentError names a bad argument."""
        tag = hyperparameter_metric_tag
        if not isinstance(tag, str) or not _TAG.fullmatch(tag):
            raise InvalidArgumentError(
                "hyperparameter_metric_tag: expected a metric name (a letter or '_', then "
                f"letters, digits and '._-'), got {tag!r}"
            )
        value = check_metrics({tag: metric_value}, "report_hyperparameter_tuning_metric")[tag]
        if global_step is not None and (
            isinstance(global_step, bool) or not isinstance(global_step, int) or global_step < 0
        ):
            raise InvalidArgumentError(
                f"global_step: expected an integer >= 0 or None, got {global_step!r}"
            )
        with self._lock:
            self.reports.append((tag, value, global_step))
            self._final[tag] = value
            lines = []
            if global_step is not None:
                if global_step != self._step:
                    self._step, self._step_metrics, self._step_sent = global_step, {}, False
                self._step_metrics[tag] = value
                if tag == self._objective and not self._step_sent:
                    self._step_sent = True
                    lines.append(_line(self._step_metrics, global_step))
                    if not self._final_said:
                        self._said = dict(self._step_metrics)
            if self._final != self._said:
                lines.append(_line(self._final, None))
                self._said, self._final_said = dict(self._final), True
            if self._trial is not None:
                for line in lines:
                    _write(line)
        if checkpoint_path and self._trial is not None:
            # Saved at global_step, if given (else the latest step reported).
            self._trial.set_checkpoint(checkpoint_path, step=global_step or None)
