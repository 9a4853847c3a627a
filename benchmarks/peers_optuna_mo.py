#!/usr/bin/python3
"""Side-by-side peers for the multi-objective and constrained protocols: Optuna
(Debian's python3-optuna) on the problems of testing/mo_functions.h.

  peers_optuna_mo.py multi-objective --sampler nsga2|motpe|tpe|random \
      --problems zdt1,zdt2,zdt3,dtlz2 --trials 100 --seeds 10 > peers_mo.jsonl
  peers_optuna_mo.py constrained --sampler tpe|nsga2|random \
      --problems gardner,gramacy,branin_disc --trials 50 --seeds 10 > peers_c.jsonl

Output: one JSON object per line, the schema `hypertune-bench` prints:
  multi-objective: {"optimizer", "function", "dim", "objectives", "seed",
                    "trials", "hypervolume_fraction": [k -> hypervolume of
                    the first k+1 trials above the reference point over the
                    true front's], "seconds"}
  constrained:     {"optimizer", "function", "dim", "seed", "trials",
                    "best_regret": [k -> best feasible value of the first
                    k+1 trials minus the minimum], "seconds"}
Samplers: nsga2 = NSGAIISampler (population 50), motpe = MOTPESampler, tpe =
TPESampler (multi-objective through its MOTPE split; with constraints_func
for the constrained problems). Install with: apt-get install -y
python3-optuna (run with /usr/bin/python3). compare_mo.py prints the tables.
"""
import argparse
import json
import math
import time
import warnings

import optuna

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", category=FutureWarning)


# Problems: the definitions of testing/mo_functions.cc, all minimized.
def zdt_g(x):
    return 1 + 9 * sum(x[1:]) / (len(x) - 1)


def zdt1(x):
    g = zdt_g(x)
    return [x[0], g * (1 - math.sqrt(x[0] / g))]


def zdt2(x):
    g = zdt_g(x)
    return [x[0], g * (1 - (x[0] / g) ** 2)]


def zdt3(x):
    g = zdt_g(x)
    return [x[0], g * (1 - math.sqrt(x[0] / g) - x[0] / g * math.sin(10 * math.pi * x[0]))]


def dtlz2(x):
    g = sum((v - 0.5) ** 2 for v in x[2:])
    a, b = x[0] * math.pi / 2, x[1] * math.pi / 2
    return [(1 + g) * math.cos(a) * math.cos(b), (1 + g) * math.cos(a) * math.sin(b), (1 + g) * math.sin(a)]


# name: (f, dimension, objectives, reference point, true front's hypervolume)
MULTI_OBJECTIVE = {
    "zdt1": (zdt1, 6, 2, [11.0, 11.0], 121 - (1 - 2 / 3)),
    "zdt2": (zdt2, 6, 2, [11.0, 11.0], 121 - (1 - 1 / 3)),
    "zdt3": (zdt3, 6, 2, [11.0, 11.0], 128.7781161),
    "dtlz2": (dtlz2, 6, 3, [1.1, 1.1, 1.1], 1.1 ** 3 - math.pi / 6),
}


def gardner(x):
    return math.cos(2 * x[0]) * math.cos(x[1]) + math.sin(x[0]), [
        math.cos(x[0]) * math.cos(x[1]) - math.sin(x[0]) * math.sin(x[1]) - 0.5]


def gramacy(x):
    return x[0] + x[1], [1.5 - x[0] - 2 * x[1] - 0.5 * math.sin(2 * math.pi * (x[0] ** 2 - 2 * x[1])),
                         x[0] ** 2 + x[1] ** 2 - 1.5]


def branin(x):
    b, c, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 1 / (8 * math.pi)
    u = x[1] - b * x[0] ** 2 + c * x[0] - 6
    return u * u + 10 * (1 - t) * math.cos(x[0]) + 10


def branin_disc(x):
    return branin(x), [(x[0] - 2.5) ** 2 + (x[1] - 7.5) ** 2 - 50]


BRANIN_MIN = 0.397887357729738
# name: (f returning (value, constraints), bounds, minimum, regret while infeasible)
CONSTRAINED = {
    "gardner": (gardner, [(0, 6), (0, 6)], -2.0, 4.0),
    "gramacy": (gramacy, [(0, 1), (0, 1)], 0.5997884, 2 - 0.5997884),
    "branin_disc": (branin_disc, [(-5, 10), (0, 15)], BRANIN_MIN, branin([-5, 0]) - BRANIN_MIN),
}


def hypervolume(points, ref):
    """Exact hypervolume of minimized points below ref: sweep in 2-d, slices in 3-d."""
    pts = [p for p in points if all(a < r for a, r in zip(p, ref))]
    if not pts:
        return 0.0
    if len(ref) == 2:
        pts.sort()
        volume, covered = 0.0, ref[1]
        for a, b in pts:
            if b < covered:
                volume += (ref[0] - a) * (covered - b)
                covered = b
        return volume
    pts.sort(key=lambda p: p[-1])
    volume = 0.0
    for k, p in enumerate(pts):
        upper = pts[k + 1][-1] if k + 1 < len(pts) else ref[-1]
        if upper > p[-1]:
            volume += (upper - p[-1]) * hypervolume([q[:-1] for q in pts[:k + 1]], ref[:-1])
    return volume


def make_sampler(name, seed, constraints_func=None):
    if name == "nsga2":
        return optuna.samplers.NSGAIISampler(seed=seed, constraints_func=constraints_func)
    if name == "motpe":
        return optuna.samplers.MOTPESampler(seed=seed)
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, constraints_func=constraints_func)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    raise SystemExit(f"unknown sampler {name}")


def multi_objective(args):
    for name in args.problems.split(","):
        f, dim, m, ref, front_hv = MULTI_OBJECTIVE[name]
        for seed in range(args.seeds):
            study = optuna.create_study(directions=["minimize"] * m, sampler=make_sampler(args.sampler, seed))
            start = time.perf_counter()
            study.optimize(lambda t: f([t.suggest_float(f"x{i}", 0, 1) for i in range(dim)]), n_trials=args.trials)
            seconds = time.perf_counter() - start
            values, fractions = [], []
            for t in study.trials:
                values.append(list(t.values))
                fractions.append(hypervolume(values, ref) / front_hv)
            print(json.dumps({"optimizer": f"optuna-{args.sampler}", "function": name, "dim": dim, "objectives": m,
                              "seed": seed, "trials": args.trials, "hypervolume_fraction": fractions,
                              "seconds": seconds}), flush=True)


def constrained(args):
    for name in args.problems.split(","):
        f, bounds, fmin, infeasible_regret = CONSTRAINED[name]

        def objective(t):
            value, cons = f([t.suggest_float(f"x{i}", lo, hi) for i, (lo, hi) in enumerate(bounds)])
            t.set_user_attr("constraints", cons)
            return value

        for seed in range(args.seeds):
            sampler = make_sampler(args.sampler, seed, lambda t: t.user_attrs["constraints"])
            study = optuna.create_study(sampler=sampler)
            start = time.perf_counter()
            study.optimize(objective, n_trials=args.trials)
            seconds = time.perf_counter() - start
            best, regret = math.inf, []
            for t in study.trials:
                if all(c <= 0 for c in t.user_attrs["constraints"]):
                    best = min(best, t.value)
                regret.append(best - fmin if best < math.inf else infeasible_regret)
            print(json.dumps({"optimizer": f"optuna-{args.sampler}", "function": name, "dim": len(bounds),
                              "seed": seed, "trials": args.trials, "best_regret": regret,
                              "seconds": seconds}), flush=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    mo = sub.add_parser("multi-objective")
    mo.add_argument("--sampler", default="nsga2")
    mo.add_argument("--problems", default=",".join(MULTI_OBJECTIVE))
    mo.add_argument("--trials", type=int, default=100)
    mo.add_argument("--seeds", type=int, default=10)
    c = sub.add_parser("constrained")
    c.add_argument("--sampler", default="tpe")
    c.add_argument("--problems", default=",".join(CONSTRAINED))
    c.add_argument("--trials", type=int, default=50)
    c.add_argument("--seeds", type=int, default=10)
    a = p.parse_args()
    multi_objective(a) if a.cmd == "multi-objective" else constrained(a)
