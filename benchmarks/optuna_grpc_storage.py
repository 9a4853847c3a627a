#!/usr/bin/python3
"""Optuna 4.9's own GrpcStorageProxy against hypertuned's Optuna storage door
(service/optuna/, docs/optuna-grpc-storage.md).

Two checks and one measurement:

1. same trials: one seeded study (TPE, or random with --sampler random) run
   sequentially by Optuna against (a) Optuna's own run_grpc_proxy_server
   over SQLite and (b) hypertuned; every trial's number, state, parameters,
   distributions, values, intermediate values and user attributes must be
   the same.
2. concurrency: W Optuna processes (default 16) optimize one study through
   GrpcStorageProxy against hypertuned: every trial must be stored, with 0
   errors.
3. trials/s of those W processes against hypertuned, against Optuna's own
   proxy over SQLite, and against Optuna on SQLite directly (RDBStorage).

Optuna 4.9 comes from its public source tree (OPTUNA_SRC, default
/work/peers/src/optuna-4.9.0; /work/shared/peers/README.md). Its shipped
gRPC stubs need a newer protobuf than Debian's, so this script generates
them again from the tree's api.proto with Debian's protoc into a temporary
folder and imports them in their place; the tree is not changed.

usage (from the repository root, Debian's python3):
    PYTHONPATH=build/python:testing /usr/bin/python3 \
        benchmarks/optuna_grpc_storage.py [--trials 60] [--workers 16] \
        [--worker-trials 25] [--sampler tpe|random]
Prints one JSON line per result and a summary table.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
import warnings

OPTUNA_SRC = os.environ.get("OPTUNA_SRC", "/work/peers/src/optuna-4.9.0")
STUB_MODULE = "optuna.storages._grpc.auto_generated"


def load_optuna(stub_dir: str):
    """Imports Optuna 4.9 from OPTUNA_SRC with stubs generated into
    `stub_dir` (made once by prepare_stubs)."""
    sys.path.insert(0, OPTUNA_SRC)
    sys.path.insert(0, stub_dir)
    import api_pb2  # pylint: disable=import-outside-toplevel,import-error
    import api_pb2_grpc  # pylint: disable=import-outside-toplevel,import-error

    sys.modules[STUB_MODULE + ".api_pb2"] = api_pb2
    sys.modules[STUB_MODULE + ".api_pb2_grpc"] = api_pb2_grpc
    import optuna  # pylint: disable=import-outside-toplevel

    assert optuna.__version__.startswith("4."), optuna.__version__
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    return optuna


def prepare_stubs(stub_dir: str) -> None:
    proto_dir = os.path.join(OPTUNA_SRC, "optuna", "storages", "_grpc")
    plugin = subprocess.run(["which", "grpc_python_plugin"], check=True,
                            capture_output=True, text=True).stdout.strip()
    subprocess.run(["protoc", "-I", proto_dir, f"--python_out={stub_dir}",
                    f"--grpc_out={stub_dir}", f"--plugin=protoc-gen-grpc={plugin}",
                    os.path.join(proto_dir, "api.proto")], check=True)


def objective(trial) -> float:
    """A define-by-run objective: float, log float, int, a categorical whose
    branch adds a parameter, three reported steps (pruned by the median
    rule), a user attribute."""
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    layers = trial.suggest_int("layers", 1, 6)
    model = trial.suggest_categorical("model", ["linear", "tree"])
    extra = 0.0
    if model == "tree":
        extra = 0.1 * trial.suggest_int("depth", 2, 12)
    else:
        extra = trial.suggest_float("alpha", 0.0, 1.0, step=0.25)
    loss = (x - 1.0) ** 2 + (math.log10(lr) + 2.5) ** 2 + 0.2 * layers + extra
    for step in range(3):
        trial.report(loss + (2 - step), step)
        if trial.should_prune():
            import optuna  # pylint: disable=import-outside-toplevel

            raise optuna.TrialPruned()
    trial.set_user_attr("layers_x2", layers * 2)
    return loss


def sampler_for(optuna, name: str, seed: int):
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    return optuna.samplers.TPESampler(seed=seed, n_startup_trials=10)


def trial_record(t) -> dict:
    return {
        "number": t.number,
        "state": t.state.name,
        "params": t.params,
        "distributions": {k: repr(v) for k, v in t.distributions.items()},
        "values": t.values,
        "intermediate": dict(t.intermediate_values),
        "user_attrs": t.user_attrs,
    }


def run_optuna_proxy(db_path: str, port: int, stub_dir: str) -> subprocess.Popen:
    """Optuna's own run_grpc_proxy_server over SQLite, as its own process."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "proxy-server", db_path, str(port), stub_dir],
        stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert "serving" in line, line
    return proc


def wait_ready(optuna, port: int):
    storage = optuna.storages.GrpcStorageProxy(host="127.0.0.1", port=port)
    storage.wait_server_ready(timeout=30)
    return storage


def same_trials(optuna, args, hypertune_port: int, proxy_port: int) -> dict:
    runs = {}
    for label, port in (("optuna_proxy_sqlite", proxy_port), ("hypertuned", hypertune_port)):
        storage = wait_ready(optuna, port)
        study = optuna.create_study(
            study_name="same-trials", storage=storage, direction="minimize",
            sampler=sampler_for(optuna, args.sampler, 0),
            pruner=optuna.pruners.MedianPruner(n_startup_trials=5, n_warmup_steps=1))
        study.optimize(objective, n_trials=args.trials)
        # Read back through a fresh client: what the server stored.
        fresh = optuna.load_study(study_name="same-trials", storage=wait_ready(optuna, port))
        runs[label] = [trial_record(t) for t in fresh.trials]
    a, b = runs["optuna_proxy_sqlite"], runs["hypertuned"]
    differing = [i for i, (x, y) in enumerate(zip(a, b)) if x != y]
    if len(a) != len(b):
        differing.append(min(len(a), len(b)))
    states = {}
    for t in b:
        states[t["state"]] = states.get(t["state"], 0) + 1
    result = {"check": "same_trials", "sampler": args.sampler, "trials": len(b),
              "states": states, "identical": not differing,
              "first_difference": differing[0] if differing else None}
    if differing:
        i = differing[0]
        result["optuna"] = a[i] if i < len(a) else None
        result["hypertuned"] = b[i] if i < len(b) else None
    return result


def concurrency(args, label: str, storage_arg: str, stub_dir: str) -> dict:
    """W worker processes on one study; trials/s from the first worker's start
    (after its imports) to the last one's end."""
    study_name = f"concurrent-{label}"
    setup = subprocess.run(
        [sys.executable, __file__, "create", storage_arg, study_name, stub_dir],
        check=True, capture_output=True, text=True)
    assert "created" in setup.stdout, setup.stdout + setup.stderr
    workers = [
        subprocess.Popen([sys.executable, __file__, "worker", storage_arg, study_name,
                          str(args.worker_trials), str(seed), stub_dir],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for seed in range(args.workers)]
    reports = []
    for w in workers:
        out, err = w.communicate()
        line = out.strip().splitlines()[-1] if out.strip() else ""
        try:
            reports.append(json.loads(line))
        except json.JSONDecodeError:
            reports.append({"trials": 0, "errors": 1, "kinds": [err.strip()[-300:]],
                            "start": math.inf, "end": -math.inf})
    check = subprocess.run(
        [sys.executable, __file__, "count", storage_arg, study_name, stub_dir],
        check=True, capture_output=True, text=True)
    stored = json.loads(check.stdout.strip().splitlines()[-1])
    start = min(r["start"] for r in reports)
    end = max(r["end"] for r in reports)
    done = sum(r["trials"] for r in reports)
    kinds = sorted({k for r in reports for k in r["kinds"]})
    return {"check": "concurrency", "storage": label, "workers": args.workers,
            "trials_done": done, "errors": sum(r["errors"] for r in reports),
            "error_kinds": kinds[:5], "stored": stored,
            "seconds": round(end - start, 3),
            "trials_per_s": round(done / (end - start), 1) if end > start else None}


def storage_from(optuna, arg: str):
    if arg.startswith("grpc:"):
        port = int(arg.split(":", 1)[1])
        return optuna.storages.GrpcStorageProxy(host="127.0.0.1", port=port)
    return optuna.storages.RDBStorage(arg, engine_kwargs={"connect_args": {"timeout": 60}})


def main_worker(argv: list[str]) -> None:
    storage_arg, study_name, n, seed, stub_dir = argv
    optuna = load_optuna(stub_dir)
    storage = storage_from(optuna, storage_arg)
    study = optuna.load_study(study_name=study_name, storage=storage,
                              sampler=optuna.samplers.RandomSampler(seed=int(seed)))
    done, errors, kinds = 0, 0, set()
    start = time.time()
    for _ in range(int(n)):
        try:
            study.optimize(objective, n_trials=1)
            done += 1
        except Exception as e:  # pylint: disable=broad-except
            errors += 1
            kinds.add(f"{type(e).__name__}: {str(e)[:120]}")
    end = time.time()
    print(json.dumps({"trials": done, "errors": errors, "kinds": sorted(kinds),
                      "start": start, "end": end}))


def main_create(argv: list[str]) -> None:
    storage_arg, study_name, stub_dir = argv
    optuna = load_optuna(stub_dir)
    optuna.create_study(study_name=study_name, storage=storage_from(optuna, storage_arg),
                        direction="minimize")
    print("created")


def main_count(argv: list[str]) -> None:
    storage_arg, study_name, stub_dir = argv
    optuna = load_optuna(stub_dir)
    study = optuna.load_study(study_name=study_name, storage=storage_from(optuna, storage_arg))
    states = {}
    for t in study.trials:
        states[t.state.name] = states.get(t.state.name, 0) + 1
    numbers = sorted(t.number for t in study.trials)
    print(json.dumps({"trials": len(numbers), "states": states,
                      "numbers_dense": numbers == list(range(len(numbers)))}))


def main_proxy_server(argv: list[str]) -> None:
    db_path, port, stub_dir = argv
    optuna = load_optuna(stub_dir)
    from concurrent.futures import ThreadPoolExecutor  # pylint: disable=import-outside-toplevel
    from optuna.storages._grpc.server import make_server  # pylint: disable=import-outside-toplevel

    storage = optuna.storages.get_storage(f"sqlite:///{db_path}")
    server = make_server(storage, "127.0.0.1", int(port), ThreadPoolExecutor(max_workers=16))
    server.start()
    print("serving", flush=True)
    server.wait_for_termination()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("worker", "create", "count", "proxy-server"):
        {"worker": main_worker, "create": main_create, "count": main_count,
         "proxy-server": main_proxy_server}[sys.argv[1]](sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--trials", type=int, default=60)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--worker-trials", type=int, default=25)
    parser.add_argument("--sampler", choices=["tpe", "random"], default="tpe")
    parser.add_argument("--skip-concurrency", action="store_true")
    args = parser.parse_args()

    from hypertuned_process import Hypertuned, free_port  # pylint: disable=import-outside-toplevel

    with tempfile.TemporaryDirectory() as tmp:
        stub_dir = os.path.join(tmp, "stubs")
        os.makedirs(stub_dir)
        prepare_stubs(stub_dir)
        optuna = load_optuna(stub_dir)
        server = Hypertuned(os.path.join(tmp, "hypertuned"))
        server.start()
        hypertune_port = int(server.address.rsplit(":", 1)[1])
        proxy_port = free_port()
        proxy = run_optuna_proxy(os.path.join(tmp, "proxy.db"), proxy_port, stub_dir)
        results = []
        try:
            results.append(same_trials(optuna, args, hypertune_port, proxy_port))
            print(json.dumps(results[-1]), flush=True)
            if not args.skip_concurrency:
                for label, storage_arg in (
                        ("hypertuned", f"grpc:{hypertune_port}"),
                        ("optuna_proxy_sqlite", f"grpc:{proxy_port}"),
                        ("optuna_sqlite", f"sqlite:///{os.path.join(tmp, 'direct.db')}")):
                    results.append(concurrency(args, label, storage_arg, stub_dir))
                    print(json.dumps(results[-1]), flush=True)
        finally:
            proxy.terminate()
            proxy.wait()
            server.kill()
    print(f"\nOptuna {optuna.__version__}, {args.sampler} sampler, {args.trials} trials: "
          f"same trials on Optuna's proxy and hypertuned: {results[0]['identical']}")
    if len(results) > 1:
        print(f"{'storage':24} {'workers':>7} {'trials':>7} {'errors':>6} {'trials/s':>9}")
        for r in results[1:]:
            print(f"{r['storage']:24} {r['workers']:>7} {r['trials_done']:>7} "
                  f"{r['errors']:>6} {r['trials_per_s']!s:>9}")
    if not results[0]["identical"] or any(r.get("errors") for r in results[1:2]):
        sys.exit(1)


if __name__ == "__main__":
    main()
