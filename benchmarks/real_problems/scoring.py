"""The mean normalized score of BENCHMARKS.md section 1b, from the JSON lines of
real_problems.py run (one line per optimizer, problem, seed and mode; "best"
is the best loss after each evaluation).

Per problem, opt = the lowest loss any row reached (every optimizer, seed and
mode in the files scored together) and zero = the median over random search's
rows of their final best (or, with zero="round", of their best after the same
number of evaluations). A row's score after e evaluations is

    100 * (1 - (best[e] - opt) / (zero - opt))

so 100 = the best anyone found, 0 = the median random search, below 0 = worse.
An optimizer's score is the mean over problems within a seed, then the mean
over seeds, +- the standard error over seeds. A problem where zero == opt
(random search found the best) cannot be normalized and is left out, with a
note. Batch and sequential rows are compared at equal evaluations: "after r
rounds" means after 8 r evaluations in both modes.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from typing import Iterable, Optional

ROUNDS = (4, 8, 16)
Q = 8  # evaluations per round


def load(paths: Iterable[str]) -> list[dict]:
    rows = []
    for path in paths:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line.startswith("{"):
                    rows.append(json.loads(line))
    return rows


def label(row: dict) -> str:
    """optimizer/mode, e.g. hypertune-gp_bandit/batch8."""
    return f"{row['optimizer']}/{row['mode']}"


def at(row: dict, evals: int) -> Optional[float]:
    """The row's best loss after `evals` evaluations, None if it ran fewer."""
    best = row["best"]
    return best[evals - 1] if len(best) >= evals else None


class Normalizer:
    """opt and zero per problem (see the module's comment)."""

    def __init__(self, rows: list[dict], random: str = "hypertune-random",
                 zero: str = "final"):
        self.opt: dict[str, float] = {}
        self.randoms: dict[str, list[dict]] = defaultdict(list)
        self.zero_mode = zero
        for row in rows:
            p = row["problem"]
            self.opt[p] = min(self.opt.get(p, math.inf), min(row["best"]))
            if row["optimizer"] == random:
                self.randoms[p].append(row)
        self.notes: list[str] = []
        for p in sorted(self.opt):
            if not self.randoms[p]:
                self.notes.append(f"{p}: no {random} rows, left out")

    def zero(self, problem: str, evals: int) -> Optional[float]:
        rows = self.randoms.get(problem)
        if not rows:
            return None
        if self.zero_mode == "final":
            values = [r["best"][-1] for r in rows]
        else:
            values = [v for v in (at(r, evals) for r in rows) if v is not None]
        return statistics.median(values) if values else None

    def score(self, problem: str, best: float, evals: int) -> Optional[float]:
        zero = self.zero(problem, evals)
        if zero is None:
            return None
        span = zero - self.opt[problem]
        if span <= 1e-12 * max(1.0, abs(zero)):
            note = f"{problem}: random search's median equals the best found; left out"
            if note not in self.notes:
                self.notes.append(note)
            return None
        return 100.0 * (1.0 - (best - self.opt[problem]) / span)


def mean_se(values: list[float]) -> tuple[float, float]:
    if not values:
        return math.nan, math.nan
    if len(values) == 1:
        return values[0], math.nan
    return statistics.fmean(values), statistics.stdev(values) / math.sqrt(len(values))


def scores_by_seed(rows: list[dict], norm: Normalizer, evals: int) -> dict:
    """label -> seed -> problem -> score after `evals` evaluations."""
    out: dict = defaultdict(lambda: defaultdict(dict))
    for row in rows:
        best = at(row, evals)
        if best is None:
            continue
        s = norm.score(row["problem"], best, evals)
        if s is not None:
            out[label(row)][row["seed"]][row["problem"]] = s
    return out


def summary(rows: list[dict], norm: Normalizer, rounds=ROUNDS) -> dict:
    """label -> {r: (mean, se, seeds, problems)} over seeds of the mean over
    problems."""
    out: dict = defaultdict(dict)
    for r in rounds:
        for lab, seeds in scores_by_seed(rows, norm, r * Q).items():
            per_seed = [statistics.fmean(s.values()) for s in seeds.values() if s]
            problems = {p for s in seeds.values() for p in s}
            out[lab][r] = (*mean_se(per_seed), len(per_seed), len(problems))
    return out


def head_to_head(rows: list[dict], norm: Normalizer, a: str, b: str, evals: int,
                 tie: float = 1.0) -> tuple[int, int, int]:
    """Wins, losses and ties of label a against label b over the (problem,
    seed) pairs both ran, by final score; within `tie` points is a tie."""
    by = scores_by_seed(rows, norm, evals)
    w = lo = t = 0
    for seed, problems in by.get(a, {}).items():
        other = by.get(b, {}).get(seed, {})
        for p, s in problems.items():
            if p not in other:
                continue
            d = s - other[p]
            if abs(d) <= tie:
                t += 1
            elif d > 0:
                w += 1
            else:
                lo += 1
    return w, lo, t


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    if not v:
        return math.nan
    return v[min(len(v) - 1, int(round(q * (len(v) - 1))))]


def table(rows: list[dict], random: str = "hypertune-random", zero: str = "final",
          tie: float = 1.0, rounds=ROUNDS, reference: Optional[list[dict]] = None) -> str:
    """The report `real_problems.py score` prints; its last round is `final`
    (per problem, head to head). opt and zero come from `reference` (default:
    `rows`), so that a table of some seeds or optimizers keeps the scale of
    all the rows loaded."""
    norm = Normalizer(reference if reference is not None else rows, random, zero)
    summ = summary(rows, norm, rounds)
    final = rounds[-1]

    def order(lab):
        m = summ[lab].get(final)
        return -m[0] if m and not math.isnan(m[0]) else math.inf

    labels = sorted(summ, key=order)
    out = []
    out.append(f"mean normalized score (100 = best found, 0 = median {random} final best"
               f"{'' if zero == 'final' else ' at the same round'}), mean over problems, "
               "+- standard error over seeds; after r rounds = after 8 r evaluations")
    out.append(f"{'optimizer/mode':34s} {'seeds':>5s} {'probs':>5s} "
               + " ".join(f"{'r' + str(r):>14s}" for r in rounds))
    for lab in labels:
        cells = []
        for r in rounds:
            m = summ[lab].get(r)
            cells.append(f"{m[0]:7.1f} +-{m[1]:4.1f}" if m and not math.isnan(m[1]) else
                         f"{m[0]:7.1f}       " if m else f"{'-':>14s}")
        last = next(summ[lab][r] for r in reversed(rounds) if r in summ[lab])
        out.append(f"{lab:34s} {last[2]:5d} {last[3]:5d} " + " ".join(cells))

    # Per problem, final.
    by = scores_by_seed(rows, norm, final * Q)
    problems = sorted({p for seeds in by.values() for s in seeds.values() for p in s})
    if problems:
        out.append("")
        out.append(f"per problem after {final} rounds (mean over seeds)")
        short = [p[:12] for p in problems]
        out.append(f"{'optimizer/mode':34s} " + " ".join(f"{s:>12s}" for s in short))
        for lab in labels:
            cells = []
            for p in problems:
                v = [s[p] for s in by.get(lab, {}).values() if p in s]
                cells.append(f"{statistics.fmean(v):12.1f}" if v else f"{'-':>12s}")
            out.append(f"{lab:34s} " + " ".join(cells))

    # Head to head (final), rows against columns.
    if len(labels) > 1:
        out.append("")
        out.append(f"head to head after {final} rounds: wins-losses-ties of the row against the "
                   f"column per problem and seed (tie: within {tie:g} points)")
        out.append(f"{'':34s} " + " ".join(f"{'c' + str(i):>9s}" for i in range(len(labels))))
        for i, a in enumerate(labels):
            cells = []
            for j, b in enumerate(labels):
                if i == j:
                    cells.append(f"{'.':>9s}")
                    continue
                w, lo, t = head_to_head(rows, norm, a, b, final * Q, tie)
                cells.append(f"{f'{w}-{lo}-{t}':>9s}")
            out.append(f"c{i:<2d} {lab_short(a):30s} " + " ".join(cells))

    # Spread, repeats, latency.
    out.append("")
    out.append("batch spread = median over rounds of the median pairwise distance within a "
               "batch in the unit cube / sqrt(d) (uniform random: ~0.4); repeats = "
               "suggestions equal to an earlier or pending one; latency = wall time of one "
               "round's suggestions")
    out.append(f"{'optimizer/mode':34s} {'spread':>7s} {'repeats':>8s} {'p50 s':>8s} "
               f"{'p95 s':>8s} {'clean':>7s}")
    for lab in labels:
        mine = [r for r in rows if label(r) == lab]
        spreads = [statistics.median(x for x in r["spread"] if x is not None)
                   for r in mine if any(x is not None for x in r.get("spread", []))]
        lat = [s for r in mine for s in r.get("suggest_seconds", [])]
        repeats = sum(r.get("repeats", 0) for r in mine)
        clean = clean_score(mine, norm)
        out.append(f"{lab:34s} "
                   f"{(f'{statistics.median(spreads):.3f}' if spreads else '-'):>7s} "
                   f"{repeats:8d} {percentile(lat, 0.5):8.3f} {percentile(lat, 0.95):8.3f} "
                   f"{(f'{clean:.1f}' if clean is not None else '-'):>7s}")
    out.append("clean = mean normalized score of the incumbent's loss re-evaluated on 5 fresh "
               "splits (what a lucky fold hides), same normalization")
    for note in norm.notes:
        out.append(f"note: {note}")
    return "\n".join(out)


def clean_score(rows: list[dict], norm: Normalizer) -> Optional[float]:
    per_seed = defaultdict(list)
    for r in rows:
        if r.get("incumbent_clean") is None:
            continue
        s = norm.score(r["problem"], r["incumbent_clean"], len(r["best"]))
        if s is not None:
            per_seed[r["seed"]].append(s)
    if not per_seed:
        return None
    return statistics.fmean(statistics.fmean(v) for v in per_seed.values())


def lab_short(lab: str) -> str:
    return lab[:30]
