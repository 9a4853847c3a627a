"""Writes each trial of a study for TensorBoard: a callback for
:meth:`Study.optimize` (``callbacks=[...]``, called as
``callback(study, trial)`` once a trial has ended), or to call by hand::

    from hypertune.integration.tensorboard import TensorBoardCallback

    study.optimize(train, n_trials=20, callbacks=[TensorBoardCallback("runs/sweep")])
    # then: tensorboard --logdir runs/sweep

Each trial gets the folder ``LOG_DIR/trial-ID``: its intermediate
measurements as scalars at their steps (one chart per metric, a line per
trial), its state as text, and an HParams entry (``add_hparams``) with its
parameters (the categories of CATEGORICAL parameters as their domains; a
conditional parameter absent from the trial is left out) and its final
metrics (none for an INFEASIBLE or FAILED trial), prefixed ``final/`` so
that they do not mix with the curves.

The writer is torch's ``torch.utils.tensorboard.SummaryWriter``, which
needs the ``tensorboard`` package beside torch (Debian's python3-torch
does not bring it: ``pip install tensorboard``), else tensorboardX's
writer of the same API; or pass ``writer_factory`` (a function of the log
directory returning an object with ``add_scalar``, ``add_text``,
``add_hparams``, ``flush`` and ``close``).
"""

from __future__ import annotations

import inspect
import os
import threading
from typing import TYPE_CHECKING, Any, Callable, Optional


if TYPE_CHECKING:
    from hypertune.study import Study
    from hypertune.trial import Trial


def summary_writer_class() -> Callable[..., Any]:
    """torch's SummaryWriter, else tensorboardX's; ImportError saying what
    to install when neither can be imported."""
    reasons = []
    try:
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter
    except ImportError as error:
        reasons.append(f"torch.utils.tensorboard: {error}")
    try:
        from tensorboardX import SummaryWriter

        return SummaryWriter
    except ImportError as error:
        reasons.append(f"tensorboardX: {error}")
    raise ImportError(
        "hypertune.integration.tensorboard needs a SummaryWriter: torch with the "
        "tensorboard package (pip install tensorboard), or tensorboardX ("
        + "; ".join(reasons) + ")"
    )


class TensorBoardCallback:
    """Writes each trial it is called with under ``log_dir`` (see the
    module). ``writer_factory(path)`` makes the writer of one trial's folder;
    default: :func:`summary_writer_class` of ``path``.

    Thread-safe: each trial has a writer of its own; the writers are made
    one at a time.
    """

    def __init__(self, log_dir: str, writer_factory: Optional[Callable[[str], Any]] = None):
        self.log_dir = log_dir
        self._writer_factory = writer_factory
        self._lock = threading.Lock()

    def _writer(self, path: str) -> Any:
        with self._lock:
            if self._writer_factory is None:
                writer_class = summary_writer_class()
                # Both writers take the folder first (torch: log_dir,
                # tensorboardX: logdir).
                self._writer_factory = lambda folder: writer_class(folder)
            return self._writer_factory(path)

    def __call__(self, study: Study, trial: Trial) -> None:
        # The stored trial: its final state and every measurement.
        record = study.trial(trial.id)
        writer = self._writer(os.path.join(self.log_dir, f"trial-{record.id}"))
        try:
            for measurement in record.measurements:
                for name, value in measurement.metrics.items():
                    writer.add_scalar(name, value, measurement.step)
            writer.add_text("state", record.state + (
                f": {record.stop_reason or record.infeasible_reason}"
                if record.stop_reason or record.infeasible_reason else ""))
            finals = {f"final/{name}": value for name, value in record.metrics.items()}
            _add_hparams(writer, dict(record.params), finals, _categorical_domains(study, record))
            writer.flush()
        finally:
            writer.close()


def _add_hparams(writer: Any, hparams: dict, metrics: dict, domains: dict) -> None:
    """``writer.add_hparams`` into the trial's own folder rather than a
    time-stamped one beneath it: torch's writer names that folder
    ``run_name`` and takes the categorical domains; tensorboardX's calls it
    ``name`` and takes no domains."""
    accepted = inspect.signature(writer.add_hparams).parameters
    options: dict[str, Any] = {}
    if "run_name" in accepted:
        options["run_name"] = "."
    elif "name" in accepted:
        options["name"] = "."
    if "hparam_domain_discrete" in accepted:
        options["hparam_domain_discrete"] = domains
    writer.add_hparams(hparams, metrics, **options)


def _categorical_domains(study: Study, record: Trial) -> dict[str, list[str]]:
    """The categories of the CATEGORICAL parameters the trial holds."""
    return {
        spec.name: list(spec.categorical_spec.values)
        for spec in study.spec.parameters
        if spec.WhichOneof("kind") == "categorical_spec" and spec.name in record.params
    }

