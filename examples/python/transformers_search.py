#!/usr/bin/python3
"""A Hugging Face Transformers hyperparameter search on hypertune: a tiny
BERT, built from its config (nothing downloaded), learns whether a
sequence of random tokens holds token 7 (needs torch and transformers:
pip install transformers).

    hypertuned --db /tmp/hf.db &
    python3 examples/python/transformers_search.py --server 127.0.0.1:50051

learning_rate and num_train_epochs are TrainingArguments fields, set on the
trainer's args for each trial; hidden is the model's, read by model_init
from the trial it is handed.
"""

from __future__ import annotations

import argparse
import inspect
import tempfile

import torch
from transformers import BertConfig, BertForSequenceClassification, Trainer, TrainingArguments

from hypertune.integration.transformers import run_hp_search

HP_SPACE = [
    {"name": "learning_rate", "double_spec": {"min": 1e-5, "max": 1e-2, "scale": "LOG"}},
    {"name": "num_train_epochs", "integer_spec": {"min": 1, "max": 4}},
    {"name": "hidden", "discrete_spec": {"values": [16, 32, 64]}},
]


class Tokens(torch.utils.data.Dataset):
    """Random sequences of 16 tokens; the label: whether token 7 is in it."""

    def __init__(self, size: int, seed: int):
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(0, 64, (size, 16), generator=generator)
        self.labels = (self.ids == 7).any(dim=1).long()

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.ids[index], "attention_mask": torch.ones(16, dtype=torch.long),
                "labels": self.labels[index]}


def model_init(trial):
    hidden = trial.params["hidden"] if trial is not None else 32
    config = BertConfig(vocab_size=64, hidden_size=hidden, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=2 * hidden,
                        max_position_embeddings=32, num_labels=2)
    return BertForSequenceClassification(config)


def training_arguments(output_dir: str) -> TrainingArguments:
    # Transformers 4.41 renamed evaluation_strategy to eval_strategy.
    names = inspect.signature(TrainingArguments).parameters
    strategy = "eval_strategy" if "eval_strategy" in names else "evaluation_strategy"
    return TrainingArguments(output_dir=output_dir, per_device_train_batch_size=32,
                             save_strategy="no", report_to="none", disable_tqdm=True,
                             **{strategy: "epoch"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default=None, help="hypertuned's HOST:PORT")
    parser.add_argument("--trials", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as output_dir:
        trainer = Trainer(model_init=model_init, args=training_arguments(output_dir),
                          train_dataset=Tokens(512, seed=0), eval_dataset=Tokens(256, seed=1))
        best = run_hp_search(
            trainer, n_trials=args.trials, direction="minimize", hp_space=HP_SPACE,
            compute_objective=lambda metrics: metrics["eval_loss"],
            server=args.server, study_name="transformers-example",
            algorithm="GP_BANDIT", seed=0,
            early_stopping={"rule": "MEDIAN", "min_trials": 3, "grace_steps": 1})
    print(f"best: trial {best.run_id}, eval_loss {best.objective:.4f}, {best.hyperparameters}")


if __name__ == "__main__":
    main()
