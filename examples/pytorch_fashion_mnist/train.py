#!/usr/bin/python3
"""A PyTorch training script for Fashion-MNIST that hypertune can tune.

Standalone it trains with its flags (the defaults are the "default
configuration"); started by ``hypertune worker`` it takes the trial's
parameters instead, reports validation accuracy every epoch, checkpoints
every epoch (torch.save) and records the checkpoint's URI on the trial as
holding that epoch, so that a trial paused by ASHA, or handed to another
worker, resumes after the checkpoint's step. See README.md.

Data: the IDX files of Debian's dataset-fashion-mnist. Training uses the
first ``--train-size`` of the first 50,000 training images; validation is
the last 10,000 training images, held out; the test set (t10k) is only used
with ``--test``, to report the final accuracy of a chosen configuration.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import math
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import hypertune

DATA_DIR = "/usr/share/datasets/fashion-mnist"
VALIDATION = 10_000  # the last training images, never trained on
MEAN, STD = 0.2860, 0.3530


def read_idx(path: str) -> np.ndarray:
    """An IDX file (gzip) as an array: magic, dimension sizes, then uint8 data."""
    with gzip.open(path, "rb") as file:
        data = file.read()
    dims = data[3]
    shape = [int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(dims)]
    return np.frombuffer(data, np.uint8, offset=4 + 4 * dims).reshape(shape)


def load(data_dir: str, split: str) -> tuple[torch.Tensor, torch.Tensor]:
    images = read_idx(os.path.join(data_dir, f"{split}-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(data_dir, f"{split}-labels-idx1-ubyte.gz"))
    x = (torch.from_numpy(images.astype(np.float32) / 255.0) - MEAN) / STD
    return x.unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


class Net(nn.Module):
    """Two conv-BN-ReLU-pool blocks and a linear head."""

    def __init__(self, width: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.BatchNorm2d(2 * width), nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Dropout(dropout), nn.Linear(2 * width * 49, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) over a whole split."""
    model.eval()
    correct, loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x), 1000):
            logits = model(x[i:i + 1000])
            loss += F.cross_entropy(logits, y[i:i + 1000], reduction="sum").item()
            correct += (logits.argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x), loss / len(x)


def save(path: str, state: dict) -> None:
    """torch.save, atomically: whoever resumes the trial reads the whole of
    the previous checkpoint or of this one, never half a file."""
    torch.save(state, path + ".tmp")
    os.replace(path + ".tmp", path)


def resume(trial: hypertune.Trial, model: nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Restores the trial's checkpoint into ``model`` and ``optimizer``, and
    returns the metrics of the epoch it holds; that epoch is then the
    trial's ``checkpoint_step``, and training goes on after it."""
    path = trial.checkpoint_uri.removeprefix("file://")
    state = torch.load(path)
    epoch = state["epoch"]
    if epoch not in (trial.checkpoint_step, trial.checkpoint_step + 1):
        raise RuntimeError(f"{path} holds epoch {epoch}, but the trial's checkpoint is of "
                           f"step {trial.checkpoint_step}")
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    torch.set_rng_state(state["rng"])  # dropout goes on as if never paused
    print(f"trial {trial.id} (attempt {trial.attempt}): resuming after epoch {epoch}",
          flush=True)
    # The last worker was lost after saving the checkpoint but before
    # recording it, or before reporting its epoch: both now, from the file.
    if epoch > trial.checkpoint_step:
        trial.set_checkpoint(trial.checkpoint_uri, step=epoch)
    if all(m.step != epoch for m in trial.measurements):
        trial.report(epoch, **state["metrics"])
    return state["metrics"]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    # The default configuration; a trial's parameters of the same names win.
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight_decay", type=float, default=0.0)
    p.add_argument("--batch_size", type=int, default=64)
    p.add_argument("--dropout", type=float, default=0.25)
    p.add_argument("--width", type=int, default=8)
    p.add_argument("--epochs", type=int, default=9,
                   help="epochs of a full run (a study with ASHA sets max_resource to this)")
    p.add_argument("--train-size", type=int, default=50_000)
    p.add_argument("--val-size", type=int, default=VALIDATION,
                   help="validate on this many of the last 10,000 training images")
    p.add_argument("--data-dir", default=DATA_DIR)
    p.add_argument("--checkpoint-dir", default="/tmp/pytorch-fashion-mnist")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--test", action="store_true", help="report test-set accuracy at the end")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    trial = hypertune.current_trial()  # None when run by hand
    config = {k: getattr(args, k) for k in
              ("lr", "momentum", "weight_decay", "batch_size", "dropout", "width")}
    if trial is not None:
        config.update(trial.params)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    x, y = load(args.data_dir, "train")
    train_end = len(x) - VALIDATION
    x_train, y_train = x[:min(args.train_size, train_end)], y[:min(args.train_size, train_end)]
    x_val, y_val = x[train_end:train_end + args.val_size], y[train_end:train_end + args.val_size]

    model = Net(config["width"], config["dropout"])
    optimizer = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config["momentum"],
                                weight_decay=config["weight_decay"], nesterov=True)
    checkpoint = os.path.join(
        args.checkpoint_dir,
        f"{trial.study_name}-trial-{trial.id}.pt" if trial is not None else "standalone.pt")
    os.makedirs(args.checkpoint_dir, exist_ok=True)

    # An exception settles the trial: FloatingPointError (a diverged loss)
    # and out of memory make it INFEASIBLE, any other FAILED.
    with trial if trial is not None else contextlib.nullcontext():
        start = 1
        val_accuracy = val_loss = float("nan")
        if trial is not None and trial.checkpoint_uri:
            # Promoted after an ASHA pause, or handed over after its worker
            # was lost (a new attempt): go on after the checkpoint's step.
            saved = resume(trial, model, optimizer)
            start = trial.checkpoint_step + 1
            val_accuracy, val_loss = saved["val_accuracy"], saved["val_loss"]
        for epoch in range(start, args.epochs + 1):
            if trial is not None and trial.should_stop:
                break  # by the report of the resumed epoch: paused or stopped
            began = time.monotonic()
            # Cosine decay by epoch: a resumed trial continues the same schedule.
            for group in optimizer.param_groups:
                group["lr"] = config["lr"] * 0.5 * (1 + math.cos(math.pi * (epoch - 1) / args.epochs))
            # The batches depend on (seed, epoch) only, so a resumed run sees
            # the batches an uninterrupted one would.
            order = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(
                args.seed * 1000 + epoch))
            train_loss = 0.0
            for i in range(0, len(order), config["batch_size"]):
                batch = order[i:i + config["batch_size"]]
                optimizer.zero_grad()
                loss = F.cross_entropy(model(x_train[batch]), y_train[batch])
                loss.backward()
                optimizer.step()
                train_loss += loss.item() * len(batch)
            train_loss /= len(order)
            if not math.isfinite(train_loss):
                raise FloatingPointError(f"training loss is {train_loss} at epoch {epoch}")
            val_accuracy, val_loss = evaluate(model, x_val, y_val)
            print(f"epoch {epoch}: train_loss {train_loss:.4f} val_accuracy {val_accuracy:.4f} "
                  f"val_loss {val_loss:.4f} ({time.monotonic() - began:.1f} s)", flush=True)
            save(checkpoint, {
                "model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "rng": torch.get_rng_state(), "epoch": epoch, "config": config,
                "metrics": {"val_accuracy": val_accuracy, "val_loss": val_loss,
                            "train_loss": train_loss}})
            if trial is None:
                continue
            # The checkpoint first, as holding this epoch: the report may
            # pause the trial at a rung.
            trial.set_checkpoint("file://" + os.path.abspath(checkpoint), step=epoch)
            trial.report(epoch, val_accuracy=val_accuracy, val_loss=val_loss,
                         train_loss=train_loss)
            if trial.should_stop:  # stopped early, or paused until promoted
                print(f"trial {trial.id}: {'paused' if trial.paused else 'stopped'} after "
                      f"epoch {epoch} ({trial.stop_reason})", flush=True)
                break
        final = {"val_accuracy": val_accuracy, "val_loss": val_loss}
        if args.test:
            x_test, y_test = load(args.data_dir, "t10k")
            final["test_accuracy"], final["test_loss"] = evaluate(model, x_test, y_test)
        print("final: " + " ".join(f"{k} {v:.4f}" for k, v in final.items()), flush=True)
        if trial is not None:
            trial.complete(**final)


if __name__ == "__main__":
    main()
