#!/usr/bin/python3
"""The Python client's overhead and throughput, side by side with Optuna on
its SQLite storage in the same run (BENCHMARKS.md: ratios, not absolutes).

  PYTHONPATH=build/python:testing benchmarks/python_client_bench.py overhead [--cycles 500]
  PYTHONPATH=build/python:testing benchmarks/python_client_bench.py threads [--workers 16] [--trials 3200]

overhead: one thread, a study of 5 DOUBLE parameters with the RANDOM
algorithm (so the optimizer is out of the picture), cycles of study.ask() +
trial.complete() on loopback, each timed; then Optuna's ask + 5 suggest_float
+ tell on an RDBStorage SQLite file, the same cycles with its RandomSampler.
Prints one JSON line per side: {"side", "cycles", "p50_ms", "p99_ms",
"mean_ms"}.

threads: W threads share one Client and loop ask -> 3 reports -> complete
(the cycle of BENCHMARKS.md section 3) until the study's max_trials are
spent. Prints {"side", "workers", "trials", "seconds", "cycles_per_s",
"errors"}; errors are exceptions seen by the threads.

hypertuned runs on a fresh database in a temporary directory
(build/bin/hypertuned, or $HYPERTUNE_BIN_DIR).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import threading
import time

import hypertune
from hypertuned_process import Hypertuned


def study_config(name: str, max_trials: int = 0) -> dict:
    return {"name": name, "spec": {
        "parameters": [{"name": f"x{i}", "double_spec": {"min": 0.0, "max": 1.0}}
                       for i in range(5)],
        "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
        "algorithm": "RANDOM", "seed": 1, "max_trials": max_trials}}


def percentiles(name: str, seconds: list[float]) -> dict:
    ms = sorted(s * 1000 for s in seconds)
    return {"side": name, "cycles": len(ms), "p50_ms": round(statistics.median(ms), 3),
            "p99_ms": round(ms[min(len(ms) - 1, int(0.99 * len(ms)))], 3),
            "mean_ms": round(statistics.fmean(ms), 3)}


def hypertune_overhead(cycles: int, warmup: int) -> dict:
    with tempfile.TemporaryDirectory() as work, Hypertuned(work) as server:
        study = hypertune.Client(server.address).create_study(study_config("overhead"))
        times = []
        for i in range(warmup + cycles):
            began = time.perf_counter()
            trial = study.ask()
            trial.complete(loss=sum(trial.params.values()))
            if i >= warmup:
                times.append(time.perf_counter() - began)
        return percentiles("hypertune-python", times)


def optuna_overhead(cycles: int, warmup: int) -> dict:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with tempfile.TemporaryDirectory() as work:
        study = optuna.create_study(storage=f"sqlite:///{os.path.join(work, 'peer.db')}",
                                    sampler=optuna.samplers.RandomSampler(seed=1))
        times = []
        for i in range(warmup + cycles):
            began = time.perf_counter()
            trial = study.ask()
            value = sum(trial.suggest_float(f"x{j}", 0.0, 1.0) for j in range(5))
            study.tell(trial, value)
            if i >= warmup:
                times.append(time.perf_counter() - began)
        return percentiles(f"optuna-{optuna.__version__}-sqlite-random", times)


def threads(workers: int, trials: int) -> dict:
    with tempfile.TemporaryDirectory() as work, Hypertuned(work) as server:
        client = hypertune.Client(server.address)
        study = client.create_study(study_config("threads", max_trials=trials))
        errors: list[BaseException] = []
        lock = threading.Lock()

        def work_loop() -> None:
            while True:
                try:
                    trial = study.ask()
                    if trial is None:
                        return
                    x = trial.params["x0"]
                    for step in (1, 2, 3):
                        trial.report(step, loss=x + step)
                    trial.complete(loss=x)
                except Exception as error:  # noqa: BLE001 - counted, as a user would see it
                    with lock:
                        errors.append(error)

        pool = [threading.Thread(target=work_loop) for _ in range(workers)]
        began = time.perf_counter()
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        seconds = time.perf_counter() - began
        done = study.refresh().trial_counts.get("COMPLETED", 0)
        return {"side": "hypertune-python-threads", "workers": workers, "trials": done,
                "seconds": round(seconds, 3), "cycles_per_s": round(done / seconds, 1),
                "errors": len(errors),
                "first_error": repr(errors[0]) if errors else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["overhead", "threads"])
    parser.add_argument("--cycles", type=int, default=500)
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--trials", type=int, default=3200)
    args = parser.parse_args()
    if args.mode == "overhead":
        print(json.dumps(hypertune_overhead(args.cycles, args.warmup)), flush=True)
        print(json.dumps(optuna_overhead(args.cycles, args.warmup)), flush=True)
    else:
        print(json.dumps(threads(args.workers, args.trials)), flush=True)


if __name__ == "__main__":
    main()
