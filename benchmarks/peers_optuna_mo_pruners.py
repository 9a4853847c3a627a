#!/usr/bin/python3
"""Peer for `hypertune-bench mo-early-stopping`: Optuna's pruners on the same two-objective
learning curves, in the same order, with the same workers.

  hypertune-bench mo-early-stopping --out mo_suite.json > ours.jsonl
  /usr/bin/python3 benchmarks/peers_optuna_mo_pruners.py mo_suite.json [--ours ours.jsonl] \
      [--pruners none,median,sha,hyperband] [--eta 3] [--workers 1,4] > optuna.jsonl

mo_suite.json holds the table's curves (acc[i][t-1]: validation accuracy of configuration i
at epoch t; secs[i][t-1]: its mean seconds per epoch so far), the reference point, the whole
pool's hypervolume at full budget, the target fraction, per seed the hypervolume that
first-objective-only ASHA ends with (asha_first_hv: the epochs to reach it are measured too) and
the order in which the configurations run (trial number k runs orders[seed][k]; the sampler suggests nothing).

Optuna 3.1 cannot prune a multi-objective study (Trial.report raises NotImplementedError
there), so its pruners judge the first objective, accuracy, in a single-objective study;
each trial's two objectives are kept aside, and the study's answer is, as in hypertune-bench,
the Pareto front of the trials that ran every epoch. The study is simulated as
hypertune-bench simulates its own: --workers trials in flight, one epoch each per tick
(workers in a fixed order), trial.report and trial.should_prune after every epoch; every epoch
run counts, a pruned trial's too.

Output: one JSON line per pruner and worker count, in hypertune-bench's schema; with --ours,
a side-by-side table on stderr. Install: apt-get install -y python3-optuna (Debian's 3.1).
"""
import argparse
import json
import statistics
import sys
import warnings

import optuna

# The pruners as peers_optuna_pruners.py makes them (Optuna's defaults).
from peers_optuna_pruners import make_pruner

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def hypervolume(points, reference):
    """2-D hypervolume of (acc up, secs down) points above the reference (acc0, secs0)."""
    kept = sorted((a, s) for a, s in points if a > reference[0] and s < reference[1])
    volume, best_secs = 0.0, reference[1]
    # Sweep from the most accurate down: each point adds the strip of seconds it improves.
    for a, s in reversed(kept):
        if s < best_secs:
            volume += (a - reference[0]) * (best_secs - s)
            best_secs = s
    return volume


def run_study(data, order, seed, pruner_name, eta, workers):
    acc, secs = data["acc"], data["secs"]
    max_resource = data["max_resource"]
    reference = data["reference"]
    pool = data["pool_hypervolume"]
    study = optuna.create_study(
        study_name=f"mo-early-stopping-{seed}", direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=make_pruner(pruner_name, 1, eta, max_resource))
    running = [None] * workers
    started = epochs = 0
    done, trajectory = [], []
    while True:
        for w in range(workers):
            if running[w] is None and started < len(order):
                trial = study.ask()
                assert trial.number == started
                running[w] = (trial, 0)
                started += 1
        if all(r is None for r in running):
            break
        for w in range(workers):
            if running[w] is None:
                continue
            trial, t = running[w]
            t += 1
            i = order[trial.number]
            epochs += 1
            trial.report(acc[i][t - 1], t)
            running[w] = (trial, t)
            if t >= max_resource:
                study.tell(trial, acc[i][t - 1])
                running[w] = None
                done.append((acc[i][t - 1], secs[i][t - 1]))
                trajectory.append((epochs, hypervolume(done, reference) / pool))
            elif trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                running[w] = None
    return trajectory


def epochs_to(trajectory, target, never):
    return next((e for e, f in trajectory if f >= target - 1e-12), never)


def fraction_at(trajectory, epochs):
    fraction = 0.0
    for e, f in trajectory:
        if e > epochs:
            break
        fraction = f
    return fraction


def main():
    p = argparse.ArgumentParser()
    p.add_argument("suite")
    p.add_argument("--pruners", default="none,median,sha,hyperband")
    p.add_argument("--eta", type=float, default=3)
    p.add_argument("--workers", default="1,4")
    p.add_argument("--ours", help="hypertune-bench mo-early-stopping output, for the table")
    args = p.parse_args()
    with open(args.suite) as fh:
        data = json.load(fh)
    target = data["target"]
    never = len(data["acc"]) * data["max_resource"] + 1
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for name in args.pruners.split(","):
            epochs, to_baseline, at = [], [], {512: [], 1024: [], 2048: []}
            for seed, order in enumerate(data["orders"]):
                trajectory = run_study(data, order, seed, name, args.eta, workers)
                epochs.append(epochs_to(trajectory, target, never))
                to_baseline.append(epochs_to(trajectory, data["asha_first_hv"][seed], never))
                for k, v in at.items():
                    v.append(fraction_at(trajectory, k))
            row = {"benchmark": "mo_early_stopping", "optimizer": f"optuna-{name}",
                   "workers": workers, "seeds": len(data["orders"]), "eta": args.eta,
                   "target_hypervolume_fraction": target,
                   "mean_epochs_to_target": statistics.mean(epochs),
                   "median_epochs_to_target": statistics.median(epochs),
                   "reached_fraction": sum(e < never for e in epochs) / len(epochs),
                   "mean_hv_at_512": statistics.mean(at[512]),
                   "mean_hv_at_1024": statistics.mean(at[1024]),
                   "mean_hv_at_2048": statistics.mean(at[2048]),
                   "mean_epochs_to_asha_first_hv": statistics.mean(to_baseline),
                   "epochs_to_target": epochs,
                   "epochs_to_asha_first_hv": to_baseline}
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.ours:
        with open(args.ours) as fh:
            rows = [json.loads(line) for line in fh if line.strip()] + rows
        rows.sort(key=lambda r: r["workers"])
        print(f"{'optimizer':<28} {'workers':>7} {'epochs_mean':>11} {'epochs_p50':>10} "
              f"{'reached':>8} {'hv@512':>7} {'hv@1024':>8} {'hv@2048':>8} {'to_asha1_hv':>11} "
              f"{'p50':>7}", file=sys.stderr)
        for r in rows:
            print(f"{r['optimizer']:<28} {r['workers']:>7} {r['mean_epochs_to_target']:>11.1f} "
                  f"{r['median_epochs_to_target']:>10.1f} {r['reached_fraction']:>8.2f} "
                  f"{r['mean_hv_at_512']:>7.3f} {r['mean_hv_at_1024']:>8.3f} "
                  f"{r['mean_hv_at_2048']:>8.3f} {r['mean_epochs_to_asha_first_hv']:>11.1f} "
                  f"{statistics.median(r['epochs_to_asha_first_hv']):>7.1f}", file=sys.stderr)


if __name__ == "__main__":
    main()
