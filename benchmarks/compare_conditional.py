#!/usr/bin/python3
"""Median regret per optimizer and tree problem at 50 and 100 trials, from
the JSON lines of `hypertune-bench conditional` and
peers_optuna_conditional.py, with each optimizer's ratio to Optuna TPE.

  compare_conditional.py runs1.jsonl runs2.jsonl ...
"""
import json
import statistics
import sys
from collections import defaultdict

# One run per (function, optimizer, seed): the longest (a 100-trial run's
# first 50 entries are the 50-trial run's, suggestions being sequential).
by_seed = defaultdict(dict)
for path in sys.argv[1:]:
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            runs_of = by_seed[(r["function"], r["optimizer"])]
            if len(r["best_regret"]) > len(runs_of.get(r["seed"], [])):
                runs_of[r["seed"]] = r["best_regret"]
runs = {k: list(v.values()) for k, v in by_seed.items()}

functions = sorted({f for f, _ in runs})
for f in functions:
    print(f"\n{f}")
    print(f"{'optimizer':32} {'seeds@50':>8} {'@50':>10} {'seeds@100':>9} {'@100':>10} {'/TPE@50':>8} {'/TPE@100':>8}")
    tpe = runs.get((f, "optuna-tpe"))
    for (g, opt), rs in sorted(runs.items()):
        if g != f:
            continue
        cells = []
        for k in (50, 100):
            vals = [r[k - 1] for r in rs if len(r) >= k]
            cells.append(statistics.median(vals) if vals else float("nan"))
        ratios = []
        for i, k in enumerate((50, 100)):
            t = [r[k - 1] for r in tpe if len(r) >= k] if tpe else []
            tm = statistics.median(t) if t else float("nan")
            ratios.append(cells[i] / tm if tm and tm == tm else float("nan"))
        n100 = sum(len(r) >= 100 for r in rs)
        print(f"{opt:32} {len(rs):>8} {cells[0]:>10.4g} {n100:>9} {cells[1]:>10.4g} {ratios[0]:>8.3f} {ratios[1]:>8.3f}")
