"""Logs each trial of a study as an MLflow run: a callback for
:meth:`Study.optimize` (``callbacks=[...]``, called as
``callback(study, trial)`` once a trial has ended), or to call by hand::

    from hypertune.integration.mlflow import MLflowCallback

    study.optimize(train, n_trials=20,
                   callbacks=[MLflowCallback(experiment_name="resnet-sweep")])

A run holds the trial's parameters (``log_params``; a conditional
parameter absent from the trial is absent from the run), every
intermediate measurement as a metric at its step, the final metrics at the
final step (so that MLflow's latest value of each is the final one), and
tags: ``hypertune.study``, ``hypertune.trial_id``, ``hypertune.state`` and,
where set, ``hypertune.stop_reason`` and ``hypertune.infeasible_reason``.
It ends FINISHED for a COMPLETED or STOPPED trial, FAILED otherwise.

mlflow is imported when the first trial is logged (it is not a Debian
package: ``pip install mlflow``).
"""

from __future__ import annotations

import importlib
import threading
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from hypertune.study import Study
    from hypertune.trial import Trial

# The trial states whose run MLflow should call a success.
_FINISHED_STATES = ("COMPLETED", "STOPPED")


def _mlflow() -> Any:
    try:
        return importlib.import_module("mlflow")
    except ImportError:
        raise ImportError(
            "hypertune.integration.mlflow needs mlflow (pip install mlflow)"
        ) from None


class MLflowCallback:
    """Logs each trial it is called with as one MLflow run (see the module).

    Args:
        tracking_uri: where MLflow stores runs (``mlflow.set_tracking_uri``);
            default: MLflow's own (``$MLFLOW_TRACKING_URI``, else ./mlruns).
        experiment_name: the experiment of the runs (``mlflow.set_experiment``);
            default: the study's name.
        run_name: the run's name, formatted with ``study`` and ``trial``
            (the study's name and the trial id); default
            ``"{study}-trial-{trial}"``.

    Thread-safe: MLflow's active run is global, so runs are logged one at a
    time (``optimize`` with several workers calls it from each).
    """

    def __init__(
        self,
        tracking_uri: Optional[str] = None,
        experiment_name: Optional[str] = None,
        run_name: str = "{study}-trial-{trial}",
    ):
        self.tracking_uri = tracking_uri
        self.experiment_name = experiment_name
        self.run_name = run_name
        self._lock = threading.Lock()

    def __call__(self, study: Study, trial: Trial) -> None:
        mlflow = _mlflow()
        # The stored trial: its final state and every measurement, whatever
        # the handle passed in last saw.
        record = study.trial(trial.id)
        with self._lock:
            if self.tracking_uri is not None:
                mlflow.set_tracking_uri(self.tracking_uri)
            mlflow.set_experiment(self.experiment_name or study.name)
            # Nested: inside a run of the caller's, a child of it.
            mlflow.start_run(run_name=self.run_name.format(study=study.name, trial=record.id),
                             nested=True)
            try:
                self._log(mlflow, study, record)
            except BaseException:
                mlflow.end_run(status="FAILED")
                raise
            mlflow.end_run(status="FINISHED" if record.state in _FINISHED_STATES else "FAILED")

    @staticmethod
    def _log(mlflow: Any, study: Study, record: Trial) -> None:
        if record.params:
            mlflow.log_params(record.params)
        for measurement in record.measurements:
            for name, value in measurement.metrics.items():
                mlflow.log_metric(name, value, step=measurement.step)
        final_step = record.proto.final_measurement.step
        for name, value in record.metrics.items():
            mlflow.log_metric(name, value, step=final_step)
        mlflow.set_tag("hypertune.study", study.name)
        mlflow.set_tag("hypertune.trial_id", str(record.id))
        mlflow.set_tag("hypertune.state", record.state)
        if record.stop_reason:
            mlflow.set_tag("hypertune.stop_reason", record.stop_reason)
        if record.infeasible_reason:
            mlflow.set_tag("hypertune.infeasible_reason", record.infeasible_reason)
