#!/usr/bin/python3
"""Logs each trial of a small study to MLflow and to TensorBoard with the
callbacks of hypertune.integration (needs mlflow, and torch with
tensorboard or tensorboardX; each logger is used only if its package is
installed: pip install mlflow tensorboard).

    hypertuned --db /tmp/logged.db &
    python3 examples/python/log_trials.py --server 127.0.0.1:50051 --logdir /tmp/tb
    mlflow ui                  # the runs, in ./mlruns
    tensorboard --logdir /tmp/tb

The callbacks take (study, trial) once a trial has ended: pass them to
study.optimize(fn, callbacks=[...]), or call them yourself, as here.
"""

from __future__ import annotations

import argparse
import importlib.util
import math

import hypertune
from hypertune.integration.mlflow import MLflowCallback
from hypertune.integration.tensorboard import TensorBoardCallback, summary_writer_class

STUDY = {
    "name": "logged-example",
    "spec": {
        "parameters": [
            {"name": "lr", "double_spec": {"min": 1e-4, "max": 1.0, "scale": "LOG"}},
            {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam"]}},
        ],
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "algorithm": "RANDOM",
        "seed": 0,
    },
}


def loggers(logdir: str) -> list:
    chosen = []
    if importlib.util.find_spec("mlflow") is not None:
        chosen.append(MLflowCallback(experiment_name=STUDY["name"]))
    else:
        print("mlflow not installed: no MLflow runs")
    try:
        summary_writer_class()
        chosen.append(TensorBoardCallback(logdir))
    except ImportError as error:
        print(f"no TensorBoard event files: {error}")
    return chosen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="hypertuned's HOST:PORT")
    parser.add_argument("--logdir", default="runs", help="TensorBoard's folder")
    parser.add_argument("--trials", type=int, default=10)
    args = parser.parse_args()
    callbacks = loggers(args.logdir)
    with hypertune.Client(args.server) as client:
        study = client.create_study(STUDY, if_exists="load")
        for _ in range(args.trials):
            trial = study.ask()
            if trial is None:
                break
            with trial:
                bonus = 0.0 if trial.params["optimizer"] == "adam" else 0.3
                for epoch in range(1, 6):
                    trial.report(epoch, loss=(math.log10(trial.params["lr"]) + 2) ** 2
                                 + bonus + 1.0 / epoch)
                trial.complete(loss=(math.log10(trial.params["lr"]) + 2) ** 2 + bonus)
            for callback in callbacks:
                callback(study, trial)
            print(f"trial {trial.id}: loss {trial.metrics['loss']:.3f}")


if __name__ == "__main__":
    main()
