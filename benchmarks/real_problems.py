#!/usr/bin/python3
"""Real tuning problems (BENCHMARKS.md section 1b): scikit-learn and XGBoost
models on the data sets scikit-learn ships, tuned by hypertune (GP_BANDIT, TPE,
RANDOM, through a real hypertuned) and by its peers (Optuna 3.1 TPE, Optuna 4.9
GPSampler, BoTorch qLogNEI) on the same problems and seeds.

  PYTHONPATH=build/python:testing /usr/bin/python3 benchmarks/real_problems.py run \\
      [--optimizers hypertune-gp_bandit,hypertune-tpe,hypertune-random,optuna31-tpe,
                    optuna49-gp,botorch-qlognei] [--problems all|P1,P2] [--seeds 0-9]
      [--modes batch,seq] [--q 8] [--rounds 16] [--seq-trials 128] [--jobs 2]
      [--tag NAME] [--out FILE.jsonl [--resume]]
  real_problems.py score FILES... [--random hypertune-random] [--zero final|round]
      [--optimizers A,B] [--modes batch8,seq] [--problems P1,P2] [--seeds 0-2] [--rounds 4,8,16]
  real_problems.py list

run: one process per (optimizer, problem, seed, mode) cell, --jobs at a time,
each appending one JSON line to --out (default: stdout):
  {"optimizer", "problem", "seed", "mode" ("batch8" | "seq"), "q", "evals",
   "best": [best loss after each evaluation], "values": [each loss],
   "suggest_seconds": [wall time of each round's suggestions],
   "spread": [per round, median pairwise distance within the batch in the unit
              cube / sqrt(d); null for a round of 1],
   "repeats": suggestions equal to an earlier evaluated or pending one,
   "configs": [each configuration evaluated],
   "incumbent": the configuration of the lowest observed loss,
   "incumbent_clean": its loss re-evaluated on 5 fresh splits (mean),
   "seconds", "versions"}
batch: q suggestions per round (asked at once), evaluated, told, for --rounds
rounds. seq: one suggestion at a time for --seq-trials trials.
The hypertune optimizers share one hypertuned started on a temporary SQLite
file ($HYPERTUNE_BIN_DIR or build/bin); --tag NAME labels their rows
hypertune-gp_bandit+NAME, to score a change against stored baseline rows.

Peers (outside the repository; see ../shared/peers/README.md):
  OPTUNA_SRC=/work/peers/src/optuna-4.9.0 for optuna49-gp,
  BOTORCH_PATH=SHIMS:BOTORCH:GPYTORCH:LINOP for botorch-qlognei
  (defaults: those folders under /work/peers/src when they exist).

score: the mean normalized score table (scoring.py says how), per problem,
head to head, batch spread, repeats, suggestion latency p50/p95. The filters
(--optimizers, --modes, --problems, --seeds) choose the rows shown; the scale
(best found, random's median) stays that of all the rows in FILES.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(ROOT, "testing"))

from real_problems import optimizers as O  # noqa: E402
from real_problems import problems as P  # noqa: E402
from real_problems import scoring  # noqa: E402

PEERS_SRC = os.environ.get("REAL_PROBLEMS_PEERS", "/work/peers/src")
DEFAULT_OPTIMIZERS = ("hypertune-gp_bandit,hypertune-tpe,hypertune-random,optuna31-tpe,"
                      "optuna49-gp,botorch-qlognei")
CLEAN_SPLITS = 5


def parse_seeds(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out.extend(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def peer_env() -> dict:
    env = dict(os.environ)
    src = PEERS_SRC
    if "OPTUNA_SRC" not in env and os.path.isdir(f"{src}/optuna-4.9.0"):
        env["OPTUNA_SRC"] = f"{src}/optuna-4.9.0"
    if "BOTORCH_PATH" not in env and os.path.isdir(f"{src}/botorch-0.11.1"):
        env["BOTORCH_PATH"] = os.pathsep.join(
            f"{src}/{d}" for d in ("shims", "botorch-0.11.1", "gpytorch-1.11",
                                   "linear_operator-0.5.1"))
    return env


# ----- One cell -----

def run_cell(optimizer: str, problem_name: str, seed: int, mode: str, q: int, rounds: int,
             seq_trials: int, server: str | None, tag: str) -> dict:
    problem = P.PROBLEMS[problem_name]
    space = problem.space
    batch = 1 if mode == "seq" else q
    total = seq_trials if mode == "seq" else q * rounds
    opt = O.make(optimizer, problem, seed, server)
    seen: set = set()
    values: list[float] = []
    configs: list[dict] = []
    suggest_seconds: list[float] = []
    spread: list = []
    repeats = 0
    began = time.perf_counter()
    try:
        while len(values) < total:
            n = min(batch, total - len(values))
            t0 = time.perf_counter()
            asked = opt.ask(n)
            suggest_seconds.append(time.perf_counter() - t0)
            if n > 1:
                spread.append(statistics.median(
                    P.distance(space, a, b) for i, a in enumerate(asked) for b in asked[i + 1:]))
            else:
                spread.append(None)
            for c in asked:
                k = P.key(space, c)
                repeats += k in seen
                seen.add(k)
            got = [problem.evaluate(c, P.eval_seed(seed, len(values) + i), seed)
                   for i, c in enumerate(asked)]
            opt.tell(got)
            values.extend(got)
            configs.extend(asked)
    finally:
        opt.close()
    seconds = time.perf_counter() - began
    best, b = [], float("inf")
    for v in values:
        b = min(b, v)
        best.append(b)
    incumbent = configs[values.index(min(values))]
    fresh = [P.eval_seed(seed, 10**6 + i) for i in range(CLEAN_SPLITS)]
    clean = statistics.fmean(problem.evaluate(incumbent, s, s) for s in fresh)
    return {"optimizer": o_label(optimizer, tag), "problem": problem_name, "seed": seed,
            "mode": "seq" if mode == "seq" else f"batch{q}", "q": batch, "evals": len(values),
            "best": best, "values": values, "suggest_seconds": suggest_seconds,
            "spread": spread, "repeats": repeats,
            "incumbent": incumbent, "configs": configs,
            "incumbent_clean": clean, "seconds": round(seconds, 2),
            "versions": O.versions(optimizer)}


# ----- Commands -----

def commit() -> str:
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "-uno"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return ""


def o_label(optimizer: str, tag: str) -> str:
    """The row label of an optimizer: hypertune's carry the run's --tag."""
    return optimizer + (f"+{tag}" if tag and optimizer in O.HYPERTUNE else "")


def cmd_run(args) -> None:
    optimizers = args.optimizers.split(",")
    for o in optimizers:
        if o not in O.ALL:
            sys.exit(f"unknown optimizer {o!r}; known: {', '.join(O.ALL)}")
    names = list(P.PROBLEMS) if args.problems == "all" else args.problems.split(",")
    for n in names:
        if n not in P.PROBLEMS:
            sys.exit(f"unknown problem {n!r}; known: {', '.join(P.PROBLEMS)}")
    seeds = parse_seeds(args.seeds)
    modes = args.modes.split(",")
    cells = [(o, p, s, m) for m in modes for s in seeds for o in optimizers for p in names]
    if args.resume and args.out and os.path.exists(args.out):
        done = {(r["optimizer"].split("+")[0], r["problem"], r["seed"],
                 "seq" if r["mode"] == "seq" else "batch")
                for r in scoring.load([args.out])
                if r["optimizer"] == o_label(r["optimizer"].split("+")[0], args.tag)}
        cells = [c for c in cells if c not in done]
    # Seed by seed, so that a partial run already compares every optimizer;
    # within a seed the slowest first, so the pool ends together.
    cost = {"botorch-qlognei": 0, "optuna49-gp": 1}
    cells.sort(key=lambda c: (c[2], cost.get(c[0], 2), c[3] != "seq"))
    env = peer_env()
    env["REAL_PROBLEMS_COMMIT"] = commit()
    out = open(args.out, "a") if args.out else sys.stdout
    server = None
    with tempfile.TemporaryDirectory(prefix="real_problems_") as work:
        if any(o in O.HYPERTUNE for o in optimizers):
            from hypertuned_process import Hypertuned
            server = Hypertuned(work)
            server.start()
            print(f"hypertuned at {server.address} ({os.path.join(work, 'hypertuned.log')})",
                  file=sys.stderr)
        done = [0]
        began = time.perf_counter()

        def one(cell):
            o, p, s, m = cell
            cmd = [sys.executable, os.path.abspath(__file__), "cell", "--optimizer", o,
                   "--problem", p, "--seed", str(s), "--mode", m, "--q", str(args.q),
                   "--rounds", str(args.rounds), "--seq-trials", str(args.seq_trials),
                   "--tag", args.tag]
            if server is not None:
                cmd += ["--server", server.address]
            t0 = time.perf_counter()
            if stopping.is_set():
                return
            child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
            children.add(child)
            stdout, stderr = child.communicate()
            children.discard(child)
            line = stdout.strip().splitlines()[-1] if stdout.strip() else ""
            done[0] += 1
            if child.returncode != 0 or not line.startswith("{"):
                print(f"[{done[0]}/{len(cells)}] FAILED {o} {p} seed {s} {m}: "
                      f"{stderr.strip()[-1500:]}", file=sys.stderr)
                return
            out.write(line + "\n")
            out.flush()
            row = json.loads(line)
            print(f"[{done[0]}/{len(cells)}] {o} {p} seed {s} {m}: best {row['best'][-1]:.5g} "
                  f"in {time.perf_counter() - t0:.1f} s "
                  f"(total {time.perf_counter() - began:.0f} s)", file=sys.stderr)

        # SIGTERM (or ^C) stops the cells in flight and the server too.
        children: set = set()
        stopping = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        pool = ThreadPoolExecutor(args.jobs)
        try:
            list(pool.map(one, cells))
        finally:
            stopping.set()
            for child in list(children):
                child.kill()
            pool.shutdown(wait=True, cancel_futures=True)
            if server is not None:
                server.kill()
    if args.out:
        out.close()


def cmd_cell(args) -> None:
    row = run_cell(args.optimizer, args.problem, args.seed, args.mode, args.q, args.rounds,
                   args.seq_trials, args.server, args.tag)
    print(json.dumps(row), flush=True)


def cmd_score(args) -> None:
    rows = scoring.load(args.files)
    everything = rows
    if args.optimizers:
        keep = set(args.optimizers.split(","))
        rows = [r for r in rows if r["optimizer"] in keep]
    if args.modes:
        keep = set(args.modes.split(","))
        rows = [r for r in rows if r["mode"] in keep]
    if args.problems:
        keep = set(args.problems.split(","))
        rows = [r for r in rows if r["problem"] in keep]
    if args.seeds:
        keep = set(parse_seeds(args.seeds))
        rows = [r for r in rows if r["seed"] in keep]
    rounds = tuple(int(r) for r in args.rounds.split(","))
    print(scoring.table(rows, random=args.random, zero=args.zero, tie=args.tie, rounds=rounds,
                        reference=everything))


def cmd_list(_args) -> None:
    for p in P.PROBLEMS.values():
        space = ", ".join(
            f"{x.name}:{type(x).__name__.lower()}" + (
                f"[{x.low},{x.high}{',log' if x.log else ''}]" if hasattr(x, "low") else
                (f"{list(x.choices)}" if hasattr(x, "choices") else ""))
            for x in p.space)
        print(f"{p.name:24s} {p.model} on {p.data}, {p.metric}: {space}")
    print("optimizers:", ", ".join(O.ALL))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run")
    run.add_argument("--optimizers", default=DEFAULT_OPTIMIZERS)
    run.add_argument("--problems", default="all")
    run.add_argument("--seeds", default="0-9")
    run.add_argument("--modes", default="batch")
    run.add_argument("--q", type=int, default=8)
    run.add_argument("--rounds", type=int, default=16)
    run.add_argument("--seq-trials", type=int, default=128)
    run.add_argument("--jobs", type=int, default=2)
    run.add_argument("--tag", default="")
    run.add_argument("--out")
    run.add_argument("--resume", action="store_true",
                     help="skip the cells whose rows --out already holds")
    cell = sub.add_parser("cell")
    cell.add_argument("--optimizer", required=True)
    cell.add_argument("--problem", required=True)
    cell.add_argument("--seed", type=int, required=True)
    cell.add_argument("--mode", choices=("batch", "seq"), default="batch")
    cell.add_argument("--q", type=int, default=8)
    cell.add_argument("--rounds", type=int, default=16)
    cell.add_argument("--seq-trials", type=int, default=128)
    cell.add_argument("--server")
    cell.add_argument("--tag", default="")
    score = sub.add_parser("score")
    score.add_argument("files", nargs="+")
    score.add_argument("--random", default="hypertune-random",
                       help="the optimizer whose median final best is 0")
    score.add_argument("--zero", choices=("final", "round"), default="final")
    score.add_argument("--tie", type=float, default=1.0)
    score.add_argument("--rounds", default="4,8,16", help="columns: after these rounds of 8")
    score.add_argument("--optimizers", help="only these optimizer labels")
    score.add_argument("--modes", help="only these modes (batch8, seq)")
    score.add_argument("--problems", help="only these problems")
    score.add_argument("--seeds", help="only these seeds (0-4, or 0,2)")
    sub.add_parser("list")
    args = parser.parse_args()
    {"run": cmd_run, "cell": cmd_cell, "score": cmd_score, "list": cmd_list}[args.command](args)


if __name__ == "__main__":
    main()
