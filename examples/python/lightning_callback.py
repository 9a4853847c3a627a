#!/usr/bin/python3
"""Tunes a small PyTorch Lightning model with HypertuneCallback: each
trial's validation loss is reported every epoch, and the median rule stops
poor trials early (needs torch and Lightning: pip install lightning).

    hypertuned --db /tmp/lightning.db &
    python3 examples/python/lightning_callback.py --server 127.0.0.1:50051

The data are synthetic (y = sin(3x) + noise), so it runs anywhere in a
minute on a CPU.
"""

from __future__ import annotations

import argparse
import importlib

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import hypertune
from hypertune.integration.lightning import LIGHTNING_MODULE, HypertuneCallback

if LIGHTNING_MODULE is None:
    raise SystemExit("this example needs Lightning: pip install lightning")
pl = importlib.import_module(LIGHTNING_MODULE)

STUDY = {
    "name": "lightning-example",
    "spec": {
        "parameters": [
            {"name": "lr", "double_spec": {"min": 1e-4, "max": 0.3, "scale": "LOG"}},
            {"name": "hidden", "discrete_spec": {"values": [8, 32, 128]}},
        ],
        "metrics": [{"name": "val_loss", "goal": "MINIMIZE"}],
        "algorithm": "GP_BANDIT",
        "early_stopping": {"rule": "MEDIAN", "min_trials": 3, "grace_steps": 2},
        "max_trials": 12,
        "seed": 0,
    },
}


class Regressor(pl.LightningModule):
    def __init__(self, hidden: int, lr: float):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 1))
        self.lr = lr

    def step(self, batch):
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def training_step(self, batch, index):
        return self.step(batch)

    def validation_step(self, batch, index):
        self.log("val_loss", self.step(batch))

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


def loaders(seed: int = 0) -> tuple[DataLoader, DataLoader]:
    generator = torch.Generator().manual_seed(seed)
    x = torch.rand(1024, 1, generator=generator) * 2 - 1
    y = torch.sin(3 * x) + 0.05 * torch.randn(x.shape, generator=generator)
    train, val = TensorDataset(x[:768], y[:768]), TensorDataset(x[768:], y[768:])
    return DataLoader(train, batch_size=64, shuffle=True), DataLoader(val, batch_size=256)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="hypertuned's HOST:PORT")
    parser.add_argument("--epochs", type=int, default=15)
    args = parser.parse_args()
    train, val = loaders()
    with hypertune.Client(args.server) as client:
        study = client.create_study(STUDY, if_exists="load")
        while (trial := study.ask()) is not None:
            with trial:
                callback = HypertuneCallback(trial, monitor="val_loss")
                trainer = pl.Trainer(max_epochs=args.epochs, callbacks=[callback],
                                     logger=False, enable_checkpointing=False,
                                     enable_progress_bar=False)
                trainer.fit(Regressor(trial.params["hidden"], trial.params["lr"]), train, val)
                trial.complete(val_loss=float(trainer.callback_metrics["val_loss"]))
            stopped = f", stopped at epoch {callback.stopped_epoch}" if callback.stopped_epoch \
                is not None else ""
            # A NaN val_loss made the trial INFEASIBLE: no result to print.
            result = (f"val_loss {trial.metrics['val_loss']:.4f}" if trial.metrics
                      else f"{trial.state} ({trial.infeasible_reason})")
            print(f"trial {trial.id} {trial.params}: {result}{stopped}")
        print("best:", study.best())


if __name__ == "__main__":
    main()
