#!/usr/bin/python3
"""A PyTorch-style training script, as a user writes one, for the user-level
fault benchmark (benchmarks/user_faults.py). It trains model.py's
deterministic model, saves a checkpoint after every epoch and resumes from
the trial's checkpoint. Three ways to run it:

  train.py optimize --config STUDY.json ...   # a notebook cell: create_study
                                              # (if_exists="load"), optimize()
  hypertune worker S -- train.py worker ...   # attaches with current_trial()
  hypertune worker S -- train.py print ...    # prints `hypertune: ...` lines

Besides training it keeps two logs the benchmark reads (--events, --errors;
one JSON object a line, appended by every process): when it took and
settled each trial, and every exception or warning that reached this code,
with its traceback. It catches nothing the client raises: an exception that
reaches it is what a user would have seen.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
import time
import traceback
import warnings
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import model  # noqa: E402  (next to this script)

KIND = "python"
_args: argparse.Namespace


def log(path: str, **record) -> None:
    """Appends one JSON line (one write, so lines from processes running at
    once do not mix)."""
    record.setdefault("pid", os.getpid())
    record.setdefault("kind", KIND)
    record.setdefault("t", time.time())
    line = (json.dumps(record) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


def event(what: str, **fields) -> None:
    log(_args.events, ev=what, **fields)


def checkpoint_path(study: str, trial_id: int) -> str:
    return os.path.join(_args.ckpt_dir, f"{study}-trial-{trial_id}.json")


class TrialIO:
    """How a program records its progress on the trial: through the Python
    client's Trial, or by printing the worker's lines."""

    checkpoint_step = 0  # the step the trial's checkpoint holds

    def checkpoint(self, uri: str, epoch: int) -> None: ...
    def report(self, epoch: int, metrics: dict) -> None: ...
    def measured(self, epoch: int) -> bool: ...
    def should_stop(self) -> bool: return False


def train(trial_id: int, study: str, params: dict, resume_from: str, io: TrialIO) -> dict:
    """Runs the epochs left, checkpointing and reporting each; returns the
    final metrics."""
    state = model.load_checkpoint(resume_from) if resume_from else None
    if state is None:
        state = model.State()
    event("trial", study=study, trial=trial_id, resumed_at=state.epoch)
    path = checkpoint_path(study, trial_id)
    metrics = None
    if state.epoch:
        metrics = dict(model.evaluate(state), epoch_seconds=state.epoch_seconds)
        # The last worker was lost after saving this checkpoint but before
        # recording it, or before reporting its epoch: both now, from the
        # file (as examples/pytorch_fashion_mnist does).
        if state.epoch > io.checkpoint_step:
            io.checkpoint("file://" + resume_from, state.epoch)
        if not io.measured(state.epoch):
            io.report(state.epoch, metrics)
            if io.should_stop():
                return metrics
    while state.epoch < _args.epochs:
        began = time.monotonic()
        metrics = model.train_epoch(
            state, params["lr"], int(params["batch_size"]), params["momentum"])
        # The rest of the epoch is the accelerator's time.
        time.sleep(max(0.0, _args.epoch_seconds - (time.monotonic() - began)))
        state.epoch_seconds = time.monotonic() - began
        metrics["epoch_seconds"] = state.epoch_seconds
        model.save_checkpoint(path, state)
        # The checkpoint first: the report may pause the trial at a rung.
        io.checkpoint("file://" + path, state.epoch)
        io.report(state.epoch, metrics)
        if io.should_stop():
            break
    return metrics


class ClientIO(TrialIO):
    def __init__(self, trial):
        self.trial = trial
        self.checkpoint_step = trial.proto.checkpoint_step if trial.checkpoint_uri else 0

    def checkpoint(self, uri: str, epoch: int) -> None:
        set_checkpoint(self.trial, uri, epoch)

    def report(self, epoch: int, metrics: dict) -> None:
        self.trial.report(epoch, **metrics)

    def measured(self, epoch: int) -> bool:
        return any(m.step == epoch for m in self.trial.measurements)

    def should_stop(self) -> bool:
        return self.trial.should_stop


class PrintIO(TrialIO):
    def __init__(self, checkpoint_step: Optional[int]):
        # None: a worker before issue 46, which keeps every measurement.
        self.known = checkpoint_step is not None
        self.checkpoint_step = checkpoint_step or 0

    def checkpoint(self, uri: str, epoch: int) -> None:
        print(f"hypertune: checkpoint={uri} step={epoch}")

    def report(self, epoch: int, metrics: dict) -> None:
        values = " ".join(f"{name}={value!r}" for name, value in metrics.items())
        print(f"hypertune: {values} step={epoch}")

    def measured(self, epoch: int) -> bool:
        # The trial keeps the measurements up to its checkpoint's step.
        return not self.known or epoch <= self.checkpoint_step


def set_checkpoint(trial, uri: str, epoch: int) -> None:
    """Records the checkpoint as holding `epoch`: saved before the epoch's
    report (which may pause the trial), it is one step ahead of the latest
    report. Clients before issue 46 take no step."""
    if "step" in inspect.signature(trial.set_checkpoint).parameters:
        trial.set_checkpoint(uri, step=epoch)
    else:
        trial.set_checkpoint(uri)


def resume_path(uri: str) -> str:
    return uri[len("file://"):] if uri.startswith("file://") else ""


def run_optimize() -> None:
    import hypertune

    with open(_args.config) as source:
        config = json.load(source)
    client = hypertune.Client(_args.server)
    # What a notebook's cell does each time it is run.
    study = client.create_study(config, if_exists="load")

    def objective(trial):
        return train(trial.id, study.name, trial.params,
                     resume_path(trial.checkpoint_uri), ClientIO(trial))

    def settled(_study, trial) -> None:
        event("settled", study=study.name, trial=trial.id, state=trial.state)

    study.optimize(objective, callbacks=[settled])
    event("done", study=study.name)


def run_worker_client() -> None:
    import hypertune

    trial = hypertune.current_trial()
    with trial:
        final = train(trial.id, trial.study_name, trial.params,
                      resume_path(trial.checkpoint_uri), ClientIO(trial))
        trial.complete(**final)
    event("settled", study=trial.study_name, trial=trial.id)


def run_worker_print() -> None:
    study = os.environ["HYPERTUNE_STUDY"]
    trial_id = int(os.environ["HYPERTUNE_TRIAL_ID"])
    params = json.loads(os.environ["HYPERTUNE_PARAMS"])

    # Where the worker says to resume (empty: start afresh). A worker before
    # issue 46 says nothing: then the program's own file, named after the
    # trial, is where it left off.
    resume = os.environ.get("HYPERTUNE_CHECKPOINT_URI")
    step = os.environ.get("HYPERTUNE_CHECKPOINT_STEP")
    io = PrintIO(int(step) if step is not None and resume is not None else None)
    resume = checkpoint_path(study, trial_id) if resume is None else resume_path(resume)
    final = train(trial_id, study, params, resume, io)
    print("hypertune: " + " ".join(f"{k}={v!r}" for k, v in final.items()))
    event("settled", study=study, trial=trial_id)


def main() -> None:
    global _args, KIND
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("mode", choices=["optimize", "worker", "print"])
    parser.add_argument("--config", help="optimize: the study's config (JSON)")
    parser.add_argument("--server", default=None)
    parser.add_argument("--ckpt-dir", required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--errors", required=True)
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--epoch-seconds", type=float, required=True)
    _args = parser.parse_args()
    KIND = {"optimize": "py-optimize", "worker": "py-worker",
            "print": "py-print"}[_args.mode]
    event("start")

    def record_warning(message, category, filename, lineno, file=None, line=None):
        log(_args.errors, what="warning", type=category.__name__, message=str(message))
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    warnings.showwarning = record_warning
    try:
        {"optimize": run_optimize, "worker": run_worker_client,
         "print": run_worker_print}[_args.mode]()
    except BaseException as error:
        log(_args.errors, what="exception", type=type(error).__name__,
            message=str(error)[:500], traceback=traceback.format_exc()[-4000:])
        raise
    event("exit")


if __name__ == "__main__":
    main()
