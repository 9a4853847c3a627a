#!/usr/bin/python3
"""What one trial costs through the Optuna bridge (hypertune.optuna.Sampler
on a hypertuned of its own), side by side with Optuna's TPE in memory and
on its SQLite storage, in the same run and on the same objective (ratios,
not absolutes, are what carry from machine to machine).

  PYTHONPATH=build/python benchmarks/python_bridge_bench.py [--bin-dir build/bin] [--trials 100]

Each side runs --trials trials of Optuna's ask/tell loop over a space of a
float, a log-scaled float, an int and a categorical. Timed per trial: ask()
with the four suggest calls, plus tell(); the objective itself (a
closed-form bowl) is not. Through the bridge that is one SuggestTrials
(the GP's fit and proposal on the server), a CompleteTrial, and the
Python client around them; the first --startup-trials trials are sampled
at random while the space is learned, as TPE's first 10 are.

Prints one table: p50 and p95 milliseconds per trial over all trials and
over the last half (where the models hold the most history), the best
value found, and each side's p50 as a ratio to the bridge's. hypertuned
runs from --bin-dir on a free loopback port with a database in a temporary
directory.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import tempfile
import time
from typing import Any, Callable

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "testing"))

import optuna  # noqa: E402

import hypertune.optuna  # noqa: E402
from hypertuned_process import Hypertuned  # noqa: E402

ACTIVATION_COST = {"relu": 0.0, "tanh": 1.0, "sigmoid": 2.0}


def suggest(trial: Any) -> dict[str, Any]:
    return {
        "x": trial.suggest_float("x", -5.0, 5.0),
        "lr": trial.suggest_float("lr", 1e-5, 1.0, log=True),
        "n": trial.suggest_int("n", 1, 10),
        "activation": trial.suggest_categorical("activation", ["relu", "tanh", "sigmoid"]),
    }


def bowl(p: dict[str, Any]) -> float:
    """Minimum 0 at x=1.5, lr=1e-3, n=7, relu."""
    return ((p["x"] - 1.5) ** 2 + (math.log10(p["lr"]) + 3) ** 2 + 0.1 * (p["n"] - 7) ** 2
            + ACTIVATION_COST[p["activation"]])


def run(study: optuna.Study, trials: int) -> list[float]:
    """Seconds of ask + suggest + tell for each of ``trials`` trials."""
    spent = []
    for _ in range(trials):
        start = time.perf_counter()
        trial = study.ask()
        params = suggest(trial)
        asked = time.perf_counter()
        value = bowl(params)
        told_from = time.perf_counter()
        study.tell(trial, value)
        spent.append(asked - start + time.perf_counter() - told_from)
    return spent


def quantile(seconds: list[float], q: float) -> float:
    ordered = sorted(seconds)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def row(side: str, study: optuna.Study, seconds: list[float]) -> dict[str, Any]:
    late = seconds[len(seconds) // 2:]
    return {
        "side": side,
        "p50": statistics.median(seconds) * 1000,
        "p95": quantile(seconds, 0.95),
        "late_p50": statistics.median(late) * 1000,
        "late_p95": quantile(late, 0.95),
        "best": study.best_value,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "bin"),
                        help="where hypertuned is (default build/bin)")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--startup-trials", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    os.environ["HYPERTUNE_BIN_DIR"] = os.path.abspath(args.bin_dir)
    optuna.logging.set_verbosity(optuna.logging.WARNING)

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        with Hypertuned(os.path.join(scratch, "hypertuned")) as server:
            sampler = hypertune.optuna.Sampler(
                server=server.address, startup_trials=args.startup_trials, seed=args.seed)
            study = optuna.create_study(sampler=sampler, study_name="bridge-bench")
            rows.append(row("bridge (GP_BANDIT)", study, run(study, args.trials)))
            sampler.close()

        sides: list[tuple[str, Callable[[], optuna.Study]]] = [
            ("TPE in memory", lambda: optuna.create_study(
                sampler=optuna.samplers.TPESampler(seed=args.seed))),
            ("TPE on SQLite", lambda: optuna.create_study(
                sampler=optuna.samplers.TPESampler(seed=args.seed),
                storage=f"sqlite:///{os.path.join(scratch, 'optuna.db')}", study_name="tpe")),
        ]
        for side, make in sides:
            study = make()
            rows.append(row(side, study, run(study, args.trials)))

    bridge = rows[0]
    print(f"{args.trials} trials each; ms per trial (ask + 4 suggests + tell); "
          f"late = the last {args.trials - args.trials // 2}")
    header = (f"{'side':<20} {'p50':>8} {'p95':>8} {'late p50':>9} {'late p95':>9} "
              f"{'best':>8} {'bridge p50 / side p50':>22}")
    print(header)
    print("-" * len(header))
    for r in rows:
        ratio = bridge["p50"] / r["p50"]
        print(f"{r['side']:<20} {r['p50']:8.2f} {r['p95']:8.2f} {r['late_p50']:9.2f} "
              f"{r['late_p95']:9.2f} {r['best']:8.3f} {ratio:22.2f}")


if __name__ == "__main__":
    main()
