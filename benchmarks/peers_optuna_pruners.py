#!/usr/bin/python3
"""Peer for `hypertune-bench early-stopping`: Optuna's pruners on the same learning curves.

  hypertune-bench early-stopping --out suite.json > ours.jsonl
  /usr/bin/python3 benchmarks/peers_optuna_pruners.py suite.json [--ours ours.jsonl] \
      [--pruners none,median,sha,hyperband] [--min-resource 1] [--eta 3] [--workers 1,4] \
      > optuna.jsonl

suite.json holds, per seed, the pool of configurations as full noisy curves
(curves[i][t-1] is what configuration i reports at epoch t), their noise-free full-budget
quality, and the optimum. Trial number k runs configuration k, so the order of
configurations is the same as in hypertune's simulation (the sampler suggests nothing).
The study is simulated as hypertune-bench simulates its own, through Optuna's ask-and-tell
interface: --workers trials in flight, one epoch each per tick, trial.report and
trial.should_prune after every epoch; with one worker this is a plain sequential study
(study.optimize with n_jobs=1). Every reported step counts as one epoch; a pruned trial's
epochs count. The target, as in hypertune-bench: the study's best trial (the
COMPLETE trial with the best reported final value, i.e. Optuna's best_trial) has quality
>= optimum - tolerance * |optimum|; the study stops there.

Output: one JSON line per pruner, in hypertune-bench's schema; with --ours, a side-by-side
table of both on stderr. Install: apt-get install -y python3-optuna (Debian's 3.1).
"""
import argparse
import json
import statistics
import sys
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)


def make_pruner(name, min_resource, eta, max_resource):
    if name == "none":
        return optuna.pruners.NopPruner()
    if name == "median":
        # Optuna's defaults: 5 complete trials first, every step judged.
        return optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=0)
    if name == "sha":
        return optuna.pruners.SuccessiveHalvingPruner(
            min_resource=min_resource, reduction_factor=int(eta))
    if name == "hyperband":
        return optuna.pruners.HyperbandPruner(
            min_resource=min_resource, max_resource=max_resource,
            reduction_factor=int(eta))
    raise SystemExit(f"unknown pruner {name}")


def run_study(suite, pruner_name, args, max_resource, tolerance, workers):
    """The study as hypertune-bench simulates it, with Optuna's ask-and-tell interface:
    `workers` trials in flight, each running one epoch per tick (workers in a fixed order),
    free workers handed a new configuration at the start of a tick. With one worker this is
    exactly a sequential study.optimize (n_jobs=1)."""
    curves = suite["curves"]
    quality = suite["quality"]
    optimum = suite["optimum"]
    target = optimum - tolerance * abs(optimum)
    # A fixed name: HyperbandPruner assigns brackets by hashing it.
    study = optuna.create_study(
        study_name=f"early-stopping-{suite['seed']}",
        direction="maximize",
        sampler=optuna.samplers.RandomSampler(seed=suite["seed"]),
        pruner=make_pruner(pruner_name, args.min_resource, args.eta, max_resource))
    running = [None] * workers  # (trial, epochs run) per worker
    started = 0
    epochs = 0
    best_value = float("-inf")
    final_quality = 0.0
    reached = False
    while not reached:
        for w in range(workers):
            if running[w] is None and started < len(curves):
                trial = study.ask()
                assert trial.number == started  # trial k runs configuration k
                running[w] = (trial, 0)
                started += 1
        if all(r is None for r in running):
            break
        for w in range(workers):
            if running[w] is None:
                continue
            trial, t = running[w]
            t += 1
            value = curves[trial.number][t - 1]
            epochs += 1
            trial.report(value, t)
            running[w] = (trial, t)
            if t >= max_resource:
                study.tell(trial, value)
                running[w] = None
                if value > best_value:
                    best_value = value
                    final_quality = quality[trial.number]
                if final_quality >= target:
                    reached = True
                    break
            elif trial.should_prune():
                study.tell(trial, state=optuna.trial.TrialState.PRUNED)
                running[w] = None
    return {"epochs_to_target": epochs, "reached": reached, "trials": started,
            "gap": (optimum - final_quality) / abs(optimum)}


def print_table(rows):
    rows = sorted(rows, key=lambda r: r["workers"])  # stable: ours first, then Optuna
    print(f"{'optimizer':<26} {'workers':>7} {'mean_epochs':>12} {'median':>9} "
          f"{'reached':>8} {'final_gap':>10} {'trials':>7} {'vs_none':>8}", file=sys.stderr)
    for r in rows:
        none = next((n["mean_epochs_to_target"] for n in rows
                     if n["optimizer"] == "hypertune-none" and n["workers"] == r["workers"]),
                    None)
        ratio = f"{none / r['mean_epochs_to_target']:>7.2f}x" if none else "-"
        print(f"{r['optimizer']:<26} {r['workers']:>7} {r['mean_epochs_to_target']:>12.1f} "
              f"{r['median_epochs_to_target']:>9.1f} {r['reached_fraction']:>8.2f} "
              f"{100 * r['mean_final_gap']:>9.3f}% {r['mean_trials']:>7.1f} {ratio:>8}",
              file=sys.stderr)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("suite")
    p.add_argument("--pruners", default="none,median,sha,hyperband")
    p.add_argument("--min-resource", type=int, default=1)
    p.add_argument("--eta", type=float, default=3)
    p.add_argument("--workers", default="1", help="comma-separated worker counts")
    p.add_argument("--ours", help="hypertune-bench early-stopping output, for the table")
    args = p.parse_args()
    with open(args.suite) as fh:
        data = json.load(fh)
    max_resource = data["max_resource"]
    tolerance = data["tolerance"]
    suites = data["suites"]
    rows = []
    for workers in [int(w) for w in args.workers.split(",")]:
        for name in args.pruners.split(","):
            results = [run_study(s, name, args, max_resource, tolerance, workers)
                       for s in suites]
            epochs = [r["epochs_to_target"] for r in results]
            row = {
                "benchmark": "early_stopping",
                "optimizer": f"optuna-{name}",
                "workers": workers,
                "configs": len(suites[0]["curves"]),
                "seeds": len(suites),
                "max_resource": max_resource,
                "min_resource": args.min_resource,
                "eta": args.eta,
                "mean_epochs_to_target": statistics.mean(epochs),
                "median_epochs_to_target": statistics.median(epochs),
                "reached_fraction": statistics.mean(1.0 if r["reached"] else 0.0
                                                    for r in results),
                "mean_final_gap": statistics.mean(r["gap"] for r in results),
                "mean_trials": statistics.mean(r["trials"] for r in results),
                "epochs_to_target": epochs,
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
    if args.ours:
        ours = []
        with open(args.ours) as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("{") and '"early_stopping"' in line:
                    ours.append(json.loads(line))
        print_table(ours + rows)


if __name__ == "__main__":
    main()
