#!/usr/bin/python3
"""Peer for `hypertune-bench multi-fidelity`: Optuna's TPE with its HyperbandPruner on the
same tables of learning curves.

  hypertune-bench multi-fidelity [--table synthetic] --out tables.json > ours.jsonl
  /usr/bin/python3 benchmarks/peers_optuna_table.py tables.json [--seeds 20] \
      [--workers 1,4] [--eta 2] [--min-resource 1] [--ours ours.jsonl] > optuna.jsonl

tables.json holds one table (the Fashion-MNIST one: seed s seeds the sampler) or one per
seed (synthetic: seed s runs table s). Each configuration is given as its point in the
unit cube of the search space (log-scaled parameters on a log scale, as hypertune encodes
them), so TPE samples that cube, and the configuration that runs is the nearest one of the
table not yet started, as in hypertune's simulation. The study is simulated as
hypertune-bench simulates its own: --workers trials in flight, one epoch each per tick,
trial.report and trial.should_prune after every epoch (a pruned trial's epochs count).
The target: the COMPLETE trial with the best final value (Optuna's best_trial) is within
tolerance of the table's best; epochs and device-seconds until then.

Output: one JSON line per worker count in hypertune-bench's schema; with --ours, both side
by side on stderr.
"""
import argparse
import json
import statistics
import sys
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def run_study(table, seed, workers, tolerance, min_resource, eta):
    curves, seconds, unit = table["curves"], table["seconds"], table["unit"]
    max_resource = table["max_resource"]
    dim = len(unit[0])
    target = table["optimum"] - tolerance * abs(table["optimum"])
    study = optuna.create_study(
        study_name=f"multi-fidelity-{seed}", direction="maximize",
        sampler=optuna.samplers.TPESampler(seed=seed),
        pruner=optuna.pruners.HyperbandPruner(
            min_resource=min_resource, max_resource=max_resource,
            reduction_factor=int(eta)))
    unused = set(range(len(curves)))
    running = [None] * workers  # (trial, configuration, epochs run) per worker
    epochs, spent, started = 0, 0.0, 0

    def start(trial):
        x = [trial.suggest_float(f"u{j}", 0.0, 1.0) for j in range(dim)]
        c = min(unused, key=lambda i: sum((a - b) ** 2 for a, b in zip(unit[i], x)))
        unused.remove(c)
        return c

    while True:
        for w in range(workers):
            if running[w] is None and unused:
                trial = study.ask()
                running[w] = (trial, start(trial), 0)
                started += 1
        if all(r is None for r in running):
            break
        for w in range(workers):
            if running[w] is None:
                continue
            trial, c, t = running[w]
            t += 1
            value = curves[c][t - 1]
            epochs += 1
            spent += seconds[c][t - 1]
            trial.report(value, t)
            running[w] = (trial, c, t)
            if t >= max_resource:
                study.tell(trial, value)
                running[w] = None
                if study.best_value >= target:
                    return {"epochs": epochs, "seconds": spent, "reached": True,
                            "trials": started}
            elif trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                running[w] = None
    return {"epochs": epochs, "seconds": spent, "reached": False, "trials": started}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("tables")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--workers", default="1,4")
    p.add_argument("--eta", type=float, default=2)
    p.add_argument("--min-resource", type=int, default=1)
    p.add_argument("--ours", help="hypertune-bench multi-fidelity output, for the table")
    args = p.parse_args()
    with open(args.tables) as fh:
        data = json.load(fh)
    tables = data["tables"]
    seeds = len(tables) if len(tables) > 1 else args.seeds
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        results = [run_study(tables[s if len(tables) > 1 else 0], s, workers,
                             data["tolerance"], args.min_resource, args.eta)
                   for s in range(seeds)]
        epochs = [r["epochs"] for r in results]
        seconds = [r["seconds"] for r in results]
        row = {"benchmark": "multi_fidelity", "optimizer": "optuna-tpe-hyperband",
               "table": tables[0]["name"] if len(tables) == 1 else "synthetic",
               "workers": workers, "seeds": seeds, "eta": args.eta,
               "min_resource": args.min_resource,
               "median_epochs_to_target": statistics.median(epochs),
               "mean_epochs_to_target": statistics.mean(epochs),
               "median_seconds_to_target": statistics.median(seconds),
               "mean_seconds_to_target": statistics.mean(seconds),
               "reached_fraction": statistics.mean(float(r["reached"]) for r in results),
               "mean_trials": statistics.mean(r["trials"] for r in results),
               "epochs_to_target": epochs, "seconds_to_target": seconds}
        print(json.dumps(row), flush=True)
        rows.append(row)
    if args.ours:
        with open(args.ours) as fh:
            rows = [json.loads(l) for l in fh if '"multi_fidelity"' in l] + rows
        print(f"{'optimizer':<28} {'workers':>7} {'epochs_p50':>10} {'epochs_avg':>10} "
              f"{'secs_p50':>9} {'secs_avg':>9} {'reached':>8}", file=sys.stderr)
        for r in sorted(rows, key=lambda r: r["workers"]):
            print(f"{r['optimizer']:<28} {r['workers']:>7} "
                  f"{r['median_epochs_to_target']:>10.1f} {r['mean_epochs_to_target']:>10.1f} "
                  f"{r['median_seconds_to_target']:>9.1f} {r['mean_seconds_to_target']:>9.1f} "
                  f"{r['reached_fraction']:>8.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
