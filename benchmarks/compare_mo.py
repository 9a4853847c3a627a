#!/usr/bin/python3
"""Side-by-side table of multi-objective runs (JSON lines from
`hypertune-bench multi-objective` and peers_optuna_mo.py).

  compare_mo.py ours.jsonl peers_*.jsonl [--budgets 50,100]

For each problem and budget: the median over seeds of every optimizer's
hypervolume fraction (hypervolume of its trials over the true front's) and
its remaining gap 1 - fraction; then, per optimizer, its gap over the best
other optimizer's gap (below 0.5 meets the issue's target).
"""
import argparse
import collections
import json
import statistics


def main():
    p = argparse.ArgumentParser()
    p.add_argument("files", nargs="+")
    p.add_argument("--budgets", default="50,100")
    a = p.parse_args()
    budgets = [int(b) for b in a.budgets.split(",")]
    runs = collections.defaultdict(list)
    for path in a.files:
        with open(path) as fh:
            for line in fh:
                line = line.strip()
                if line.startswith("{") and '"hypervolume_fraction"' in line:
                    r = json.loads(line)
                    runs[(r["function"], r["optimizer"])].append(r["hypervolume_fraction"])
    problems = sorted({f for f, _ in runs})
    optimizers = sorted({o for _, o in runs})
    print(f"{'problem':<8} {'budget':>6}  " + "  ".join(f"{o:>24}" for o in optimizers))
    for f in problems:
        for b in budgets:
            gap = {}
            for o in optimizers:
                rs = [r[b - 1] for r in runs.get((f, o), []) if len(r) >= b]
                if rs:
                    gap[o] = 1 - statistics.median(rs)
            cells = []
            for o in optimizers:
                if o not in gap:
                    cells.append(f"{'-':>24}")
                    continue
                others = [g for k, g in gap.items() if k != o]
                ratio = f"{gap[o] / min(others):.3f}x" if others and min(others) > 0 else "-"
                cells.append(f"{1 - gap[o]:>8.4f} gap {gap[o]:.4f} {ratio:>6}")
            print(f"{f:<8} {b:>6}  " + "  ".join(cells))
    print("cells: median hypervolume fraction, gap = 1 - fraction, gap / best other gap")


if __name__ == "__main__":
    main()
