"""A small deterministic model for the user-level fault benchmark: logistic
regression trained by mini-batch SGD with momentum, in pure Python (Debian's
python3 has no numpy), with a checkpoint of everything an epoch needs.

Each epoch's loss and accuracy depend only on the parameters and the state
the previous epoch left: the data and every epoch's shuffle come from an
integer generator seeded by constants and the epoch number, and the state is
saved exactly (floats as their hex form). So a run resumed from the
checkpoint of epoch k gives, bit for bit, the metrics an uninterrupted run
gives from epoch k + 1 on; `reference_curve` is that uninterrupted run.

fault_trainer.cc is its C++ twin for the SDK programs (its own reference:
`--reference`); the two need not agree with each other, only with themselves.
"""

from __future__ import annotations

import json
import math
import os
from typing import Optional

SAMPLES = 96
FEATURES = 5


class Lcg:
    """Numerical Recipes' 32-bit linear congruential generator: the same
    integers on every machine and in C++ (fault_trainer.cc)."""

    def __init__(self, seed: int):
        self.state = seed & 0xFFFFFFFF

    def next(self) -> int:
        self.state = (1664525 * self.state + 1013904223) & 0xFFFFFFFF
        return self.state

    def uniform(self) -> float:
        """In [-1, 1)."""
        return self.next() / 2147483648.0 - 1.0


def dataset() -> tuple[list[list[float]], list[float]]:
    """SAMPLES points of FEATURES features in [-1, 1) and 0/1 labels from a
    fixed linear rule with noise."""
    rng = Lcg(12345)
    truth = [rng.uniform() * 2.0 for _ in range(FEATURES)]
    xs, ys = [], []
    for _ in range(SAMPLES):
        x = [rng.uniform() for _ in range(FEATURES)]
        margin = sum(w * v for w, v in zip(truth, x)) + 0.3 * rng.uniform()
        xs.append(x)
        ys.append(1.0 if margin > 0.0 else 0.0)
    return xs, ys


_DATA = dataset()


def _sigmoid(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


class State:
    """Weights, bias and momentum after `epoch` epochs, and how long that
    epoch took (a recorded metric, the wall clock's)."""

    def __init__(self) -> None:
        self.epoch = 0
        self.weights = [0.0] * FEATURES
        self.bias = 0.0
        self.velocity = [0.0] * (FEATURES + 1)
        self.epoch_seconds = 0.0

    def to_json(self) -> str:
        return json.dumps({
            "epoch": self.epoch,
            "weights": [w.hex() for w in self.weights],
            "bias": self.bias.hex(),
            "velocity": [v.hex() for v in self.velocity],
            "epoch_seconds": self.epoch_seconds,
        })

    @staticmethod
    def from_json(text: str) -> State:
        data = json.loads(text)
        state = State()
        state.epoch = int(data["epoch"])
        state.weights = [float.fromhex(w) for w in data["weights"]]
        state.bias = float.fromhex(data["bias"])
        state.velocity = [float.fromhex(v) for v in data["velocity"]]
        state.epoch_seconds = float(data.get("epoch_seconds", 0.0))
        return state


def train_epoch(state: State, lr: float, batch_size: int, momentum: float) -> dict[str, float]:
    """Trains one more epoch in place; returns evaluate(state) after it."""
    xs, ys = _DATA
    order = list(range(SAMPLES))
    rng = Lcg(1000 + state.epoch)
    for i in range(SAMPLES - 1, 0, -1):  # Fisher-Yates
        j = rng.next() % (i + 1)
        order[i], order[j] = order[j], order[i]
    for start in range(0, SAMPLES, batch_size):
        batch = order[start:start + batch_size]
        grad = [0.0] * (FEATURES + 1)
        for k in batch:
            error = _sigmoid(sum(w * v for w, v in zip(state.weights, xs[k])) + state.bias) - ys[k]
            for f in range(FEATURES):
                grad[f] += error * xs[k][f]
            grad[FEATURES] += error
        for f in range(FEATURES + 1):
            state.velocity[f] = momentum * state.velocity[f] - lr * grad[f] / len(batch)
        for f in range(FEATURES):
            state.weights[f] += state.velocity[f]
        state.bias += state.velocity[FEATURES]
    state.epoch += 1
    return evaluate(state)


def evaluate(state: State) -> dict[str, float]:
    """The metrics of `state` on the whole set: loss (mean log loss) and
    accuracy."""
    xs, ys = _DATA
    loss = 0.0
    correct = 0
    for x, y in zip(xs, ys):
        p = _sigmoid(sum(w * v for w, v in zip(state.weights, x)) + state.bias)
        p = min(max(p, 1e-12), 1.0 - 1e-12)
        loss -= y * math.log(p) + (1.0 - y) * math.log(1.0 - p)
        correct += (p >= 0.5) == (y == 1.0)
    return {"loss": loss / SAMPLES, "accuracy": correct / SAMPLES}


def reference_curve(params: dict, epochs: int) -> list[dict[str, float]]:
    """The metrics of epochs 1..epochs of an uninterrupted run."""
    state = State()
    return [
        train_epoch(state, params["lr"], int(params["batch_size"]), params["momentum"])
        for _ in range(epochs)
    ]


def save_checkpoint(path: str, state: State) -> None:
    """Writes `state` to `path` atomically: a process killed mid-write leaves
    the previous checkpoint whole."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as out:
        out.write(state.to_json())
    os.replace(temporary, path)


def load_checkpoint(path: str) -> Optional[State]:
    """The state saved at `path`, or None if there is none."""
    try:
        with open(path) as source:
            return State.from_json(source.read())
    except FileNotFoundError:
        return None


def study_spec_parameters() -> list[dict]:
    """The search space both twins train over."""
    return [
        {"name": "lr", "double_spec": {"min": 0.01, "max": 3.0, "scale": "LOG"}},
        {"name": "batch_size", "discrete_spec": {"values": [8, 16, 32]}},
        {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.9}},
    ]
