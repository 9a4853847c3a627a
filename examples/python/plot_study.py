#!/usr/bin/python3
"""Runs a small study on a synthetic objective and saves every plot of
hypertune.visualization as a PNG (needs python3-matplotlib only).

    hypertuned --db /tmp/plots.db &
    python3 examples/python/plot_study.py --server 127.0.0.1:50051 --out /tmp/plots

With --http (hypertuned's --http address) the importance plot is the
server's fANOVA; without it, the importance is computed in Python.
"""

from __future__ import annotations

import argparse
import math
import os

import matplotlib

matplotlib.use("Agg")  # headless: files only

import hypertune  # noqa: E402
from hypertune import visualization  # noqa: E402

STUDY = {
    "name": "plot-example",
    "spec": {
        "parameters": [
            {"name": "lr", "double_spec": {"min": 1e-4, "max": 1.0, "scale": "LOG"}},
            {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam"]}},
            {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.99},
             "parent": "optimizer", "parent_categories": ["sgd"]},
            {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
        ],
        "metrics": [
            {"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
            {"name": "latency_ms", "goal": "MINIMIZE", "role": "OBJECTIVE"},
        ],
        "algorithm": "RANDOM",
        "seed": 1,
    },
}


def train(params: dict, epoch: int) -> float:
    """A made-up validation loss: best near lr = 1e-2, falling by epoch."""
    momentum = params.get("momentum", 0.9)
    return (math.log10(params["lr"]) + 2) ** 2 + abs(momentum - 0.9) + 1.0 / epoch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="hypertuned's HOST:PORT")
    parser.add_argument("--http", default=None, help="hypertuned's --http address")
    parser.add_argument("--out", default="plots", help="folder of the PNG files")
    parser.add_argument("--trials", type=int, default=20)
    args = parser.parse_args()

    with hypertune.Client(args.server) as client:
        study = client.create_study(STUDY, if_exists="load")
        for _ in range(args.trials):
            trial = study.suggest()[0]
            with trial:
                for epoch in range(1, 6):
                    trial.report(epoch, loss=train(trial.params, epoch))
                trial.complete(loss=train(trial.params, 5),
                               latency_ms=10.0 * trial.params["layers"])

        os.makedirs(args.out, exist_ok=True)
        figures = {
            "history": visualization.plot_optimization_history(study, target="loss"),
            "intermediate": visualization.plot_intermediate_values(study, target="loss"),
            "parallel": visualization.plot_parallel_coordinate(study, target="loss"),
            "contour": visualization.plot_contour(study, ["lr", "momentum", "layers"],
                                                  target="loss"),
            "slice": visualization.plot_slice(study, target="loss"),
            "importance": visualization.plot_param_importances(study, target="loss",
                                                               http=args.http),
            "pareto": visualization.plot_pareto_front(study),
        }
        for name, figure in figures.items():
            path = os.path.join(args.out, f"{name}.png")
            figure.savefig(path, dpi=80)
            print(path)


if __name__ == "__main__":
    main()
