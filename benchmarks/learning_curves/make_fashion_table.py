#!/usr/bin/python3
"""Makes the tabular learning-curve benchmark: the reference trainer on Fashion-MNIST.

  benchmarks/learning_curves/make_fashion_table.py --bin build/bin \
      [--configs 256] [--epochs 16] [--jobs 1] [--out benchmarks/learning_curves/fashion_mnist.jsonl]

Each configuration is drawn once from a fixed stream (seed 0) over the space below and
trained by `hypertune-train` for the full --epochs on one thread, so its cosine schedule
is the one a trial of that many epochs sees: a trial paused at epoch k and resumed
reports exactly the first k values of its row and then the rest. Every epoch's validation
accuracy and loss and its wall seconds are kept. One JSON line per configuration, in
configuration order; a rerun keeps the lines already written and trains the rest.

The space (the trainer's own hyperparameters):
  lr               log-uniform [1e-3, 1]
  momentum         uniform [0, 0.98]
  weight_decay     log-uniform [1e-6, 1e-2]
  batch_size       log-uniform integer [16, 256]
  label_smoothing  uniform [0, 0.3]
  width            uniform integer [4, 12]
Fixed: 2 stages of depth 1, 2000 training and 2000 validation images, data seed 1.

The first line of the file is a header naming the space and the settings.
"""
import argparse
import concurrent.futures
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile

SPACE = [
    {"name": "lr", "type": "double", "min": 1e-3, "max": 1.0, "scale": "log"},
    {"name": "momentum", "type": "double", "min": 0.0, "max": 0.98, "scale": "linear"},
    {"name": "weight_decay", "type": "double", "min": 1e-6, "max": 1e-2, "scale": "log"},
    {"name": "batch_size", "type": "integer", "min": 16, "max": 256, "scale": "log"},
    {"name": "label_smoothing", "type": "double", "min": 0.0, "max": 0.3, "scale": "linear"},
    {"name": "width", "type": "integer", "min": 4, "max": 12, "scale": "linear"},
]
FIXED = ["--stages", "2", "--depth", "1", "--train-subset", "2000", "--val-size", "2000",
         "--seed", "1", "--threads", "1", "--data", "fashion-mnist"]

REPORT = re.compile(r"^hypertune: val_accuracy=(\S+) val_loss=(\S+) .*step=(\d+)$")
EPOCH = re.compile(r"^epoch (\d+): .*\(([\d.]+) s\)$")


def draw(rng, p):
    u = rng.random()
    lo, hi = p["min"], p["max"]
    if p["scale"] == "log":
        v = math.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))
    else:
        v = lo + u * (hi - lo)
    if p["type"] == "integer":
        return int(min(hi, max(lo, round(v))))
    return float(f"{v:.6g}")


def configurations(n):
    rng = random.Random(0)
    return [{p["name"]: draw(rng, p) for p in SPACE} for _ in range(n)]


def train(binary, index, params, epochs):
    args = [os.path.join(binary, "hypertune-train"), "--epochs", str(epochs), *FIXED]
    for name, value in params.items():
        args += [f"--{name}", str(value)]
    with tempfile.TemporaryDirectory() as ckpt:
        out = subprocess.run(args + ["--checkpoint-dir", ckpt], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, check=True).stdout
    acc, loss, seconds = [None] * epochs, [None] * epochs, [None] * epochs
    for line in out.splitlines():
        if m := REPORT.match(line):
            t = int(m.group(3)) - 1
            acc[t], loss[t] = float(m.group(1)), float(m.group(2))
        elif m := EPOCH.match(line):
            seconds[int(m.group(1)) - 1] = float(m.group(2))
    if any(v is None for v in acc + seconds):
        raise RuntimeError(f"configuration {index}: missing epochs in\n{out}")
    # A diverged run reports nan: keep it as the worst accuracy, as a tuner would.
    acc = [a if math.isfinite(a) else 0.0 for a in acc]
    loss = [round(l, 4) if math.isfinite(l) else None for l in loss]
    return {"index": index, "params": params, "val_accuracy": acc, "val_loss": loss,
            "epoch_seconds": seconds}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default="build/bin")
    parser.add_argument("--configs", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__),
                                                      "fashion_mnist.jsonl"))
    args = parser.parse_args()
    header = {"table": "fashion_mnist_reference_trainer", "space": SPACE,
              "fixed": FIXED, "max_resource": args.epochs, "configs": args.configs,
              "metric": "val_accuracy", "goal": "maximize"}
    done = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            lines = [json.loads(l) for l in f if l.strip()]
        if lines and lines[0].get("table") != header["table"]:
            sys.exit(f"{args.out}: not a table of this script")
        done = {row["index"]: row for row in lines[1:]}
    todo = [(i, p) for i, p in enumerate(configurations(args.configs)) if i not in done]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = [pool.submit(train, args.bin, i, p, args.epochs) for i, p in todo]
        for k, future in enumerate(concurrent.futures.as_completed(futures)):
            row = future.result()
            done[row["index"]] = row
            # Rewrite in order after each run, so the file is whole at any moment.
            with open(args.out + ".tmp", "w") as f:
                f.write(json.dumps(header) + "\n")
                for i in sorted(done):
                    f.write(json.dumps(done[i]) + "\n")
            os.replace(args.out + ".tmp", args.out)
            print(f"{k + 1}/{len(todo)}: configuration {row['index']} "
                  f"final {row['val_accuracy'][-1]:.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
