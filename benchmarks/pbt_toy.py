#!/usr/bin/python3
"""PBT's toy problem (Jaderberg et al. 2017, section 4 and figure 2) through
the Python client against a real hypertuned: PBT against GRID and RANDOM
over the same hyperparameters at equal steps.

  PYTHONPATH=build/python:testing /usr/bin/python3 benchmarks/pbt_toy.py \
      [--seeds 10] [--population 4] [--steps 40] [--interval 4]

The model is theta in R^2, the true objective Q(theta) = 1.2 - |theta|^2 and
the surrogate a member trains on Q^(theta | h) = 1.2 - h0 theta0^2 -
h1 theta1^2: from theta = (0.9, 0.9), each step is one gradient ascent step
on Q^ (theta_i += lr * (-2 h_i theta_i), lr 0.01 as the paper's), and each
member reports Q(theta) at every step. h = (h0, h1) in [0, 1]^2 are the
hyperparameters; only h = (1, 1) follows Q's own gradient.

Every method spends population x steps gradient steps: PBT (perturbation
interval --interval, checkpoints kept in memory by URI), GRID (sqrt(N)
points per parameter, so that it runs N configurations) and RANDOM, each
with N trials of --steps steps. Printed per method: the best final Q over its
trials, mean and standard deviation over seeds, and the exploits PBT made.

--paper runs the paper's figure 2 instead: a population of two that starts
from h = (1, 0) and h = (0, 1) (enqueued), against the same two run with h
fixed (a RANDOM study of those two enqueued trials): neither fixed member
can reach Q's optimum, and PBT gets there by combining them.
"""
import argparse
import math
import statistics
import sys
import tempfile

import hypertune
from hypertuned_process import Hypertuned

LR = 0.01


def space(grid_points: int = 0) -> list:
    spec = {"min": 0.0, "max": 1.0}
    if grid_points:
        spec["grid_points"] = grid_points
    return [{"name": "h0", "double_spec": spec}, {"name": "h1", "double_spec": spec}]


def q(theta: list) -> float:
    return 1.2 - theta[0] ** 2 - theta[1] ** 2


def train(theta: list, h: dict) -> list:
    """One gradient ascent step on the surrogate."""
    return [theta[0] + LR * (-2.0 * h["h0"] * theta[0]), theta[1] + LR * (-2.0 * h["h1"] * theta[1])]


PAPER_START = [{"h0": 1.0, "h1": 0.0}, {"h0": 0.0, "h1": 1.0}]


def run_pbt(client: hypertune.Client, name: str, seed: int, args: argparse.Namespace) -> tuple:
    study = client.create_study({
        "name": name,
        "spec": {
            "parameters": space(),
            "metrics": [{"name": "q", "goal": "MAXIMIZE"}],
            "algorithm": "PBT",
            "seed": seed,
            "pbt": {"population_size": args.population,
                    "perturbation_interval": args.interval},
        },
    })
    if args.paper:
        for params in PAPER_START:
            study.enqueue(params)
    members = [study.ask() for _ in range(args.population)]
    thetas = {t.id: [0.9, 0.9] for t in members}
    checkpoints = {}  # uri -> theta: the population's checkpoint store
    exploits = 0
    step = {t.id: 0 for t in members}
    for _ in range(args.steps):
        for trial in members:
            if step[trial.id] >= args.steps:
                continue
            thetas[trial.id] = train(thetas[trial.id], trial.params)
            step[trial.id] += 1
            exploit = trial.report(step[trial.id], q=q(thetas[trial.id]))
            if exploit is not None:
                exploits += 1
                thetas[trial.id] = list(checkpoints[exploit.checkpoint_uri])
                step[trial.id] = exploit.checkpoint_step
                continue
            uri = f"mem://{trial.id}/{step[trial.id]}"
            checkpoints[uri] = list(thetas[trial.id])
            trial.set_checkpoint(uri, step=step[trial.id])
    # Members that exploited late have steps left: they run to the end.
    while any(step[t.id] < args.steps for t in members):
        for trial in members:
            if step[trial.id] < args.steps:
                thetas[trial.id] = train(thetas[trial.id], trial.params)
                step[trial.id] += 1
    finals = [q(thetas[t.id]) for t in members]
    for trial, final in zip(members, finals):
        trial.complete(q=final)
    return max(finals), exploits


def run_fixed(client: hypertune.Client, name: str, seed: int, algorithm: str,
              args: argparse.Namespace) -> float:
    points = round(math.sqrt(args.population)) if algorithm == "GRID" else 0
    if args.paper:
        points, algorithm = 0, "RANDOM"
    study = client.create_study({
        "name": name,
        "spec": {
            "parameters": space(points),
            "metrics": [{"name": "q", "goal": "MAXIMIZE"}],
            "algorithm": algorithm,
            "seed": seed,
            "max_trials": args.population,
        },
    })
    if args.paper:
        for params in PAPER_START:
            study.enqueue(params)
    best = -math.inf
    for _ in range(args.population):
        trial = study.ask()
        theta = [0.9, 0.9]
        for s in range(1, args.steps + 1):
            theta = train(theta, trial.params)
            trial.report(s, q=q(theta))
        trial.complete(q=q(theta))
        best = max(best, q(theta))
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--interval", type=int, default=4)
    parser.add_argument("--paper", action="store_true",
                        help="the paper's figure 2: two members from h = (1, 0) and (0, 1)")
    args = parser.parse_args()
    if args.paper:
        args.population = 2
    results = {"PBT": [], "GRID": [], "RANDOM": []}
    if args.paper:
        results = {"PBT": [], "FIXED": []}
    exploits = []
    with tempfile.TemporaryDirectory() as tmp, Hypertuned(tmp) as server:
        with hypertune.Client(server.address) as client:
            for seed in range(1, args.seeds + 1):
                best, made = run_pbt(client, f"pbt-{seed}", seed, args)
                results["PBT"].append(best)
                exploits.append(made)
                for algorithm in [m for m in results if m != "PBT"]:
                    results[algorithm].append(run_fixed(
                        client, f"{algorithm.lower()}-{seed}", seed, algorithm, args))
    optimum = q([0.9 * (1 - 2 * LR) ** args.steps] * 2)
    print(f"population {args.population}, {args.steps} steps each "
          f"({args.population * args.steps} gradient steps per method), "
          f"{args.seeds} seeds; Q with h = (1, 1) throughout: {optimum:.4f}")
    print(f"{'method':8} {'best final Q (mean)':>20} {'sd':>8} {'min':>8} {'max':>8}")
    for method, values in results.items():
        print(f"{method:8} {statistics.mean(values):20.4f} {statistics.stdev(values):8.4f} "
              f"{min(values):8.4f} {max(values):8.4f}")
    print(f"PBT exploits per run: mean {statistics.mean(exploits):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
