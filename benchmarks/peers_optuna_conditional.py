#!/usr/bin/python3
"""Optuna peer for the conditional (tree-structured) protocol: TPE driven
define-by-run on the trees of testing/conditional_problems.cc (same
definitions, same domains; a child is suggested only under its parent's
value, so TPE models each child over the trials where it is active).

  peers_optuna_conditional.py --functions jenatton,training --trials 100 \
      --seeds 20 > peers_conditional.jsonl
  peers_optuna_conditional.py --latency --history 1000

Output: one JSON object per line, the schema `hypertune-bench conditional`
prints: {"optimizer": "optuna-tpe", "function", "dim", "seed", "trials",
"best_regret": [k -> best of the first k+1 trials minus the minimum],
"seconds"}; with --latency, {"optimizer", "dim", "history", "median_ms",
"p95_ms", "max_ms"} over 20 rounds after `history` random trials of the
20-parameter tree. Install with apt-get install -y python3-optuna; run with
/usr/bin/python3. compare_conditional.py prints the tables.
"""
import argparse
import json
import math
import random
import time
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore")


def jenatton(trial):
    if trial.suggest_categorical("x1", ["0", "1"]) == "0":
        r8 = trial.suggest_float("r8", 0, 1)
        if trial.suggest_categorical("x2", ["0", "1"]) == "0":
            return trial.suggest_float("x4", -1, 1) ** 2 + 0.1 + r8
        return trial.suggest_float("x5", -1, 1) ** 2 + 0.2 + r8
    r9 = trial.suggest_float("r9", 0, 1)
    if trial.suggest_categorical("x3", ["0", "1"]) == "0":
        return trial.suggest_float("x6", -1, 1) ** 2 + 0.3 + r9
    return trial.suggest_float("x7", -1, 1) ** 2 + 0.4 + r9


def training(trial):
    v = 0.0
    opt = trial.suggest_categorical("optimizer", ["sgd", "adam", "rmsprop"])
    if opt == "sgd":
        lr = trial.suggest_float("sgd_lr", 1e-4, 1, log=True)
        m = trial.suggest_float("momentum", 0, 0.99)
        v += 0.10 + ((math.log10(lr) + 1) / 1.5) ** 2 + (m - 0.9) ** 2
    elif opt == "adam":
        lr = trial.suggest_float("adam_lr", 1e-5, 1e-1, log=True)
        b1 = trial.suggest_float("beta1", 0.8, 0.999)
        b2 = trial.suggest_float("beta2", 0.9, 0.9999)
        v += (0.05 + ((math.log10(lr) + 3) / 1.5) ** 2 + 2 * (b1 - 0.9) ** 2
              + ((math.log10(1 - b2) + 3) / 2) ** 2)
    else:
        lr = trial.suggest_float("rms_lr", 1e-5, 1e-1, log=True)
        rho = trial.suggest_float("rho", 0.8, 0.99)
        v += 0.15 + ((math.log10(lr) + 3.5) / 1.5) ** 2 + (rho - 0.9) ** 2
    if trial.suggest_categorical("model", ["mlp", "resnet"]) == "mlp":
        layers = trial.suggest_int("layers", 1, 8)
        width = trial.suggest_int("width", 16, 1024, log=True)
        v += 0.3 + 0.02 * (layers - 3) ** 2 + ((math.log2(width) - 8) / 3) ** 2
    else:
        depth = trial.suggest_categorical("depth", [18, 34, 50, 101])
        wm = trial.suggest_float("width_mult", 0.5, 2)
        v += {18: 0.08, 34: 0.0, 50: 0.02, 101: 0.06}[depth] + 0.3 * (wm - 1.25) ** 2
    wd = trial.suggest_float("weight_decay", 1e-6, 1e-2, log=True)
    v += 0.1 * ((math.log10(wd) + 4) / 2) ** 2
    bs = trial.suggest_categorical("batch_size", [32, 64, 128, 256])
    v += {32: 0.03, 64: 0.01, 128: 0.0, 256: 0.02}[bs]
    return v


# name: (objective, parameters in all, minimum)
PROBLEMS = {"jenatton": (jenatton, 9, 0.1), "training": (training, 15, 0.05)}


def tree20(trial):
    b = trial.suggest_categorical("branch", ["a", "b", "c", "d"])
    k = "abcd".index(b)
    v = 0.1 * k
    for i in range(3):
        v += (trial.suggest_float("x%d" % i, 0, 1) - 0.3) ** 2
    for i in range(4):
        v += (trial.suggest_float("b%d_%d" % (k, i), 0, 1) - 0.3) ** 2
    return v


def latency(history):
    study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=0))
    rng = random.Random(0)
    for _ in range(history):
        b = rng.choice("abcd")
        params = {"branch": b}
        dists = {"branch": optuna.distributions.CategoricalDistribution(list("abcd"))}
        v = 0.1 * "abcd".index(b)
        names = ["x0", "x1", "x2"] + ["b%d_%d" % ("abcd".index(b), i) for i in range(4)]
        for n in names:
            params[n] = rng.random()
            dists[n] = optuna.distributions.FloatDistribution(0, 1)
            v += (params[n] - 0.3) ** 2
        study.add_trial(optuna.trial.create_trial(params=params, distributions=dists, value=v))
    ms = []
    for _ in range(20):
        start = time.perf_counter()
        trial = study.ask()
        value = tree20(trial)  # Suggestions happen inside, define-by-run.
        ms.append(1000 * (time.perf_counter() - start))
        study.tell(trial, value)
    ms.sort()

    def pct(p):
        r = p / 100 * (len(ms) - 1)
        lo = int(math.floor(r))
        hi = min(lo + 1, len(ms) - 1)
        return ms[lo] + (r - lo) * (ms[hi] - ms[lo])

    print(json.dumps({"optimizer": "optuna-tpe", "dim": 20, "history": history,
                      "median_ms": pct(50), "p95_ms": pct(95), "max_ms": ms[-1]}), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--functions", default="jenatton,training")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--latency", action="store_true")
    ap.add_argument("--history", type=int, default=1000)
    args = ap.parse_args()
    if args.latency:
        latency(args.history)
        return
    for name in args.functions.split(","):
        f, dim, minimum = PROBLEMS[name]
        for seed in range(args.seeds):
            start = time.time()
            study = optuna.create_study(sampler=optuna.samplers.TPESampler(seed=seed))
            best, regret = math.inf, []

            def objective(trial):
                return f(trial)

            for _ in range(args.trials):
                trial = study.ask()
                y = objective(trial)
                study.tell(trial, y)
                best = min(best, y)
                regret.append(best - minimum)
            print(json.dumps({"optimizer": "optuna-tpe", "function": name, "dim": dim,
                              "seed": seed, "trials": args.trials, "best_regret": regret,
                              "seconds": time.time() - start}), flush=True)


if __name__ == "__main__":
    main()
