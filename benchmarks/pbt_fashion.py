#!/usr/bin/python3
"""PBT against GP_BANDIT+ASHA and RANDOM on the PyTorch Fashion-MNIST example
(examples/pytorch_fashion_mnist), at equal device-seconds, through the Python
client against a real hypertuned (with --http, to read the dashboard's feed).

  PYTHONPATH=build/python:testing nice -n 5 /usr/bin/python3 benchmarks/pbt_fashion.py \
      [--minutes 8] [--workers 2] [--population 4] [--interval 2] [--seed 1] \
      [--train-size 10000] [--val-size 5000] [--methods pbt,asha,random]

Model, data and optimizer are the example's (train.py's Net, its IDX loader,
SGD with Nesterov momentum, width 8, 1 torch thread per worker); the space is
its study.json's (lr, momentum, weight_decay, batch_size, dropout). Each
method gets the same budget: --workers worker threads for --minutes of wall
clock each (device-seconds = workers x minutes x 60; an epoch begun before
the deadline is finished, and the measured figure is printed):

- ASHA: the example's study.json (GP_BANDIT, ASHA in pause mode, rungs 1, 3,
  9), max_trials raised so that the budget binds; paused trials resume from
  their checkpoint when promoted; cosine learning-rate decay over 9 epochs as
  train.py does.
- RANDOM: the same space, every trial trained 9 epochs (cosine decay).
- PBT: a population of --population, judged every --interval epochs; each
  worker trains its share of the members one epoch at a time, round robin,
  until the budget is spent. The learning rate is the member's own,
  constant: PBT's exploits make its schedule. The loop is the one of
  docs/pbt.md: report() returns the Exploit, and the member loads the donor's
  checkpoint (model and optimizer state; one file per member and epoch) and
  goes on from its step with the explored parameters.

Metric: the best validation accuracy of any checkpoint a method saved within
its budget (the final model of a RANDOM trial, the latest of an ASHA trial,
a PBT member at any epoch), and that checkpoint's test-set accuracy (t10k).
Printed: a table per method, PBT's lineage, and the exploits the dashboard's
feed (/api/studies/NAME/changes?view=compact) holds against the client's.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

import hypertune
from hypertuned_process import Hypertuned, free_port

EXAMPLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                       "pytorch_fashion_mnist")
sys.path.insert(0, EXAMPLE)
import train as example  # noqa: E402  pylint: disable=wrong-import-position

WIDTH = 8  # the example's default width (not tuned by its study)
EPOCHS = 9  # the example's full run and ASHA's max_resource


@dataclass
class Data:
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_val: torch.Tensor
    y_val: torch.Tensor


@dataclass
class Result:
    """What one method did within its budget."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    epochs: int = 0
    trials: set = field(default_factory=set)
    best: tuple = (-1.0, "", 0, 0)  # (val_accuracy, checkpoint, trial id, epoch)
    busy: float = 0.0  # device-seconds: each worker's time from start to its end

    def record(self, trial_id: int, epoch: int, val_accuracy: float, path: str) -> None:
        with self.lock:
            self.epochs += 1
            self.trials.add(trial_id)
            if path and val_accuracy > self.best[0]:
                self.best = (val_accuracy, path, trial_id, epoch)


def build(params: dict, state: dict | None = None):
    model = example.Net(WIDTH, params["dropout"])
    optimizer = torch.optim.SGD(model.parameters(), lr=params["lr"], momentum=params["momentum"],
                                weight_decay=params["weight_decay"], nesterov=True)
    if state is not None:
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        # The loaded state carries the donor's settings: the member's own win.
        for group in optimizer.param_groups:
            group.update(lr=params["lr"], momentum=params["momentum"],
                         weight_decay=params["weight_decay"])
    return model, optimizer


def train_epoch(model, optimizer, data: Data, batch_size: int, epoch: int, seed: int) -> float:
    order = torch.randperm(len(data.x_train),
                           generator=torch.Generator().manual_seed(seed * 1000 + epoch))
    total = 0.0
    for i in range(0, len(order), batch_size):
        batch = order[i:i + batch_size]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(data.x_train[batch]), data.y_train[batch])
        loss.backward()
        optimizer.step()
        total += loss.item() * len(batch)
    return total / len(order)


def checkpoint(ckpt_dir: str, trial_id: int, epoch: int, model, optimizer, val: float) -> str:
    path = os.path.join(ckpt_dir, f"trial-{trial_id}-step-{epoch}.pt")
    example.save(path, {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                        "epoch": epoch, "val_accuracy": val})
    return path


def load_checkpoint(uri: str) -> dict:
    return torch.load(uri.removeprefix("file://"))


# ----- ASHA and RANDOM: one trial at a time per worker, 9 epochs at most -----

def fixed_worker(study, data: Data, args, ckpt_dir: str, deadline: float, result: Result):
    torch.set_num_threads(1)
    began = time.monotonic()
    while time.monotonic() < deadline:
        trial = study.ask()
        if trial is None:
            break
        params = trial.params
        start, last = 1, None
        state = None
        if trial.checkpoint_uri:  # promoted by ASHA: resume
            state = load_checkpoint(trial.checkpoint_uri)
            start, last = state["epoch"] + 1, state["val_accuracy"]
        model, optimizer = build(params, state)
        for epoch in range(start, EPOCHS + 1):
            if time.monotonic() >= deadline:
                break
            for group in optimizer.param_groups:
                group["lr"] = params["lr"] * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / EPOCHS))
            loss = train_epoch(model, optimizer, data, params["batch_size"], epoch, args.seed)
            if not math.isfinite(loss):
                break
            last, _ = example.evaluate(model, data.x_val, data.y_val)
            path = checkpoint(ckpt_dir, trial.id, epoch, model, optimizer, last)
            result.record(trial.id, epoch, last, path)
            trial.set_checkpoint("file://" + path, step=epoch)
            trial.report(epoch, val_accuracy=last)
            if trial.should_stop:  # paused at a rung (or stopped)
                break
        if last is None or not math.isfinite(last):
            trial.fail("diverged or no epoch within the budget")
        else:
            trial.complete(val_accuracy=last)
    with result.lock:
        result.busy += time.monotonic() - began


# ----- PBT: each worker trains its members round robin -----

@dataclass
class Member:
    trial: hypertune.Trial
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    step: int = 0
    last: float = float("nan")


def pbt_worker(members: list, data: Data, args, ckpt_dir: str, deadline: float,
               result: Result, log: list):
    torch.set_num_threads(1)
    began = time.monotonic()
    while time.monotonic() < deadline:
        for member in members:
            if time.monotonic() >= deadline:
                break
            trial = member.trial
            params = trial.params
            member.step += 1
            train_epoch(member.model, member.optimizer, data, params["batch_size"], member.step,
                        args.seed)
            member.last, _ = example.evaluate(member.model, data.x_val, data.y_val)
            exploit = trial.report(member.step, val_accuracy=member.last)
            if exploit is not None:
                with result.lock:
                    result.epochs += 1
                log.append(exploit_line(trial.id, exploit))
                state = load_checkpoint(trial.checkpoint_uri)
                member.model, member.optimizer = build(trial.params, state)
                member.step, member.last = trial.checkpoint_step, state["val_accuracy"]
                continue
            path = checkpoint(ckpt_dir, trial.id, member.step, member.model, member.optimizer,
                              member.last)
            result.record(trial.id, member.step, member.last, path)
            trial.set_checkpoint("file://" + path, step=member.step)
    for member in members:
        member.trial.complete(val_accuracy=member.last)
    with result.lock:
        result.busy += time.monotonic() - began


def short(params: dict) -> str:
    return (f"lr={params['lr']:.3g} mom={params['momentum']:.2f} wd={params['weight_decay']:.2g} "
            f"bs={params['batch_size']} drop={params['dropout']:.2f}")


def exploit_line(trial_id: int, e) -> str:
    return (f"trial {trial_id} at epoch {e.step} ({e.value:.4f}) took trial "
            f"{e.donor_trial_id}'s epoch {e.checkpoint_step} ({e.donor_value:.4f}): "
            f"{short(e.params_before)} -> {short(e.params)}")


# ----- The studies -----

def space_and_asha() -> tuple:
    with open(os.path.join(EXAMPLE, "study.json"), encoding="utf-8") as file:
        spec = json.load(file)["spec"]
    return spec["parameters"], spec["early_stopping"]


def run_method(client, method: str, data: Data, args, work: str) -> tuple:
    parameters, asha = space_and_asha()
    name = f"fashion-{method}-s{args.seed}"
    spec = {"parameters": parameters,
            "metrics": [{"name": "val_accuracy", "goal": "MAXIMIZE"}],
            "seed": args.seed}
    if method == "pbt":
        spec.update(algorithm="PBT", max_parallel_trials=args.population,
                    pbt={"population_size": args.population,
                         "perturbation_interval": args.interval})
    elif method == "asha":
        spec.update(algorithm="GP_BANDIT", max_trials=1000, max_parallel_trials=args.workers,
                    early_stopping=asha)
    else:
        spec.update(algorithm="RANDOM", max_trials=1000, max_parallel_trials=args.workers)
    study = client.create_study({"name": name, "spec": spec})
    ckpt_dir = os.path.join(work, "ckpt", name)
    os.makedirs(ckpt_dir)
    result, log, threads = Result(), [], []
    began = time.monotonic()
    deadline = began + args.minutes * 60
    if method == "pbt":
        members = []
        for _ in range(args.population):
            trial = study.ask()
            members.append(Member(trial, *build(trial.params)))
        for w in range(args.workers):
            threads.append(threading.Thread(target=pbt_worker, args=(
                members[w::args.workers], data, args, ckpt_dir, deadline, result, log)))
    else:
        for _ in range(args.workers):
            threads.append(threading.Thread(target=fixed_worker, args=(
                study, data, args, ckpt_dir, deadline, result)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"{method}: {time.monotonic() - began:.0f} s wall, load {os.getloadavg()[0]:.1f}",
          flush=True)
    return name, result, log


def feed_exploits(http: str, name: str) -> dict:
    """Exploits per trial in the dashboard's compact changes feed (the latest
    event of each trial holds its whole list)."""
    after, latest = 0, {}
    while True:
        url = f"http://{http}/api/studies/{name}/changes?view=compact&after={after}"
        with urllib.request.urlopen(url, timeout=30) as answer:
            page = json.load(answer)
        for event in page["events"]:
            trial = event["trial"]
            latest[trial["id"]] = [(e["donor"], e["step"]) for e in trial.get("exploits", [])]
        after = int(page["last_sequence"])
        if not page["more"]:
            return latest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--minutes", type=float, default=8.0, help="wall clock per method")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--population", type=int, default=4)
    parser.add_argument("--interval", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--train-size", type=int, default=10_000)
    parser.add_argument("--val-size", type=int, default=5_000)
    parser.add_argument("--methods", default="pbt,asha,random")
    parser.add_argument("--work", help="keep checkpoints and the database here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    x, y = example.load(example.DATA_DIR, "train")
    end = len(x) - example.VALIDATION
    data = Data(x[:args.train_size], y[:args.train_size],
                x[end:end + args.val_size], y[end:end + args.val_size])
    x_test, y_test = example.load(example.DATA_DIR, "t10k")
    work = args.work or tempfile.mkdtemp(prefix="pbt-fashion-")
    http = f"127.0.0.1:{free_port()}"
    print(f"seed {args.seed}, {args.workers} workers x {args.minutes:g} min per method, "
          f"train {args.train_size}, val {args.val_size}; uptime load {os.getloadavg()}; "
          f"work {work}", flush=True)
    rows, lineage = [], {}
    with Hypertuned(work, ["--http", http]) as server, hypertune.Client(server.address) as client:
        for method in args.methods.split(","):
            name, result, log = run_method(client, method, data, args, work)
            val, path, trial_id, epoch = result.best
            test = float("nan")
            if path:
                state = torch.load(path)
                model = example.Net(WIDTH, 0.0)
                model.load_state_dict(state["model"])
                test, _ = example.evaluate(model, x_test, y_test)
            rows.append((method, len(result.trials), result.epochs, val, test, result.busy,
                         f"{trial_id}@{epoch}", len(log)))
            if method == "pbt":
                study = client.get_study(name)
                lineage = {t.id: t for t in study.trials()}
                feed = feed_exploits(http, name)
                print("PBT lineage (trial: donor@step ...), initial -> final parameters:")
                for tid, trial in sorted(lineage.items()):
                    exploits = trial.exploits
                    first = exploits[0].params_before if exploits else trial.params
                    print(f"  trial {tid}: "
                          + (" ".join(f"{e.donor_trial_id}@{e.step}" for e in exploits) or "-")
                          + f"  [{short(first)}] -> [{short(trial.params)}]"
                          + f"  final val {trial.value:.4f}")
                for line in log:
                    print("  " + line)
                client_count = sum(len(t.exploits) for t in lineage.values())
                feed_count = sum(len(v) for v in feed.values())
                print(f"exploits: {len(log)} seen by the workers, {client_count} on the trials, "
                      f"{feed_count} in the dashboard feed "
                      f"({'same' if feed == {t: [(e.donor_trial_id, e.step) for e in lineage[t].exploits] for t in lineage} else 'DIFFERENT'} lineage)",  # noqa: E501 pylint: disable=line-too-long
                      flush=True)
    print(f"\n{'method':7} {'trials':>6} {'epochs':>6} {'best val':>8} {'its test':>8} "
          f"{'device-s':>8} {'best at':>8} {'exploits':>8}")
    for method, trials, epochs, val, test, busy, where, made in rows:
        print(f"{method:7} {trials:6d} {epochs:6d} {val:8.4f} {test:8.4f} {busy:8.0f} "
              f"{where:>8} {made:8d}")
    print(f"uptime load at the end: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
