#!/usr/bin/python3
"""How far a run with pending trials lags the sequential run (issue 33, item 3).

  batch_lag.py sequential.jsonl parallel.jsonl [--pending 3] [--budgets 25,50,100]

Both files are `hypertune-bench regret` output for the same functions and seeds,
the second with --parallel P (P - 1 = --pending trials pending at each pick).
Per function and budget t, on median regrets over seeds:

  ratio  parallel(t) / sequential(t): what item 3 bounds by 1.5;
  delay  sequential(t - pending) / sequential(t): the ratio a batch method
         would show if it lost only its information delay, each pick as good
         as the sequential pick made with the same completed trials;
  lag    t - s for the first trial s at which the sequential median reaches
         parallel(t) ('>' if it never falls that low);
  clock  sequential(ceil(t / (pending + 1))) / parallel(t): how much lower
         the parallel run's regret is after the same wall-clock time, each
         trial taking one unit on one worker.
"""
import argparse
import collections
import json
import math
import statistics


def load(path):
    runs = collections.defaultdict(list)
    with open(path) as fh:
        for line in fh:
            if '"best_regret"' in line:
                r = json.loads(line)
                runs[r["function"]].append(r["best_regret"])
    return runs


def median_at(runs, t):
    return statistics.median(r[t - 1] for r in runs)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("sequential")
    p.add_argument("parallel")
    p.add_argument("--pending", type=int, default=3)
    p.add_argument("--budgets", default="25,50,100")
    a = p.parse_args()
    seq, par = load(a.sequential), load(a.parallel)
    tiny = 1e-300
    print(f"{'function':13s} {'t':>4s} {'sequential':>10s} {'parallel':>10s} "
          f"{'ratio':>7s} {'delay':>6s} {'lag':>4s} {'clock':>8s}")
    for f in sorted(set(seq) & set(par)):
        for t in (int(b) for b in a.budgets.split(",")):
            if t > len(seq[f][0]) or t > len(par[f][0]) or t <= a.pending:
                continue
            s, q = median_at(seq[f], t), median_at(par[f], t)
            delay = median_at(seq[f], t - a.pending) / max(s, tiny)
            lag = next((str(t - k) for k in range(1, t + 1)
                        if median_at(seq[f], k) <= q), ">")
            clock = median_at(seq[f], math.ceil(t / (a.pending + 1)))
            print(f"{f:13s} {t:4d} {s:10.3g} {q:10.3g} {q / max(s, tiny):7.2f} "
                  f"{delay:6.2f} {lag:>4s} {clock / max(q, tiny):8.3g}")


if __name__ == "__main__":
    main()
