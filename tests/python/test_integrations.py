"""hypertune.integration against a real hypertuned.

Lightning, Transformers, MLflow and TensorBoard are not Debian packages, so
most tests here drive the integrations with stand-ins, said in each test:
a minimal fake Lightning trainer (the attributes the callback's hook
reads: callback_metrics, current_epoch, sanity_checking, should_stop), a
minimal fake Transformers trainer (args, state, control, train, evaluate,
add_callback, remove_callback, model_init; its evaluate calls the
callbacks' on_evaluate as Trainer's does), a fake ``mlflow`` module put
into sys.modules (set_tracking_uri, set_experiment, start_run, log_params,
log_metric, set_tag, end_run), and a fake SummaryWriter. The trials, their
reports and early stopping are real. Where a framework is installed, its
test runs the real thing; where it is not, that test is skipped with the
reason.
"""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
import types
import warnings
from types import SimpleNamespace
from typing import Any

import pytest

import hypertune
from hypertune.errors import InvalidArgumentError
from hypertune.integration import lightning as ht_lightning
from hypertune.integration import mlflow as ht_mlflow
from hypertune.integration import tensorboard as ht_tensorboard
from hypertune.integration import transformers as ht_transformers
from helpers import ROOT, study_config, unique_name

MEDIAN = {"rule": "MEDIAN", "min_trials": 3, "grace_steps": 1}


def good_history(study: hypertune.Study, first_step: int = 0, steps: int = 4) -> None:
    """Three trials with falling losses, so that the median rule has
    something to judge a poor trial against."""
    for _ in range(3):
        trial = study.ask()
        for step in range(first_step, first_step + steps):
            trial.report(step, loss=1.0 / (step + 1))
        trial.complete(loss=1.0 / (first_step + steps))


# ----- PyTorch Lightning -----


class FakeLightningTrainer:
    """Stands in for a Lightning Trainer (Lightning is not installed here):
    the attributes HypertuneCallback reads and writes, and a fit loop that
    calls on_validation_end after each epoch's validation and stops when
    should_stop is set, as Lightning's loop does."""

    def __init__(self, max_epochs: int):
        self.max_epochs = max_epochs
        self.current_epoch = 0
        self.callback_metrics: dict[str, Any] = {}
        self.sanity_checking = False
        self.should_stop = False
        self.epochs_run = 0

    def fit(self, callback: Any, val_loss: Any) -> None:
        self.sanity_checking = True  # Lightning validates twice before training
        self.callback_metrics = {"val_loss": 99.0}
        callback.on_validation_end(self, None)
        self.sanity_checking = False
        for epoch in range(self.max_epochs):
            self.current_epoch = epoch
            self.callback_metrics = {"val_loss": val_loss(epoch), "train_loss": 0.5}
            callback.on_validation_end(self, None)
            self.epochs_run += 1
            if self.should_stop:
                return


class Scalar:
    """A 0-d tensor's stand-in: a value float() reads."""

    def __init__(self, value: float):
        self.value = value

    def __float__(self) -> float:
        return self.value


def test_lightning_callback_reports_each_epoch_with_a_fake_trainer(client):
    """With a fake trainer (see FakeLightningTrainer): one report per
    epoch, at the epoch, none for the sanity check."""
    study = client.create_study(study_config(unique_name("lightning")))
    trial = study.ask()
    trainer = FakeLightningTrainer(max_epochs=3)
    callback = ht_lightning.HypertuneCallback(trial, monitor="val_loss")
    trainer.fit(callback, lambda epoch: Scalar(1.0 / (epoch + 1)))
    assert trainer.epochs_run == 3 and not trainer.should_stop
    # The same epoch validated again (val_check_interval < 1): not reported twice.
    trainer.callback_metrics = {"val_loss": 7.0}
    callback.on_validation_end(trainer, None)
    trial.complete(loss=1.0 / 3)
    stored = study.trial(trial.id)
    assert [(m.step, m.metrics) for m in stored.measurements] == [
        (0, {"loss": 1.0}), (1, {"loss": 0.5}), (2, {"loss": pytest.approx(1.0 / 3)})]


def test_lightning_callback_stops_the_trainer_when_the_service_says(client):
    """With a fake trainer (see FakeLightningTrainer): the median rule stops
    a poor trial, and the callback sets trainer.should_stop."""
    study = client.create_study(study_config(unique_name("lightning"), early_stopping=MEDIAN))
    good_history(study)
    poor = study.ask()
    trainer = FakeLightningTrainer(max_epochs=10)
    callback = ht_lightning.HypertuneCallback(poor, monitor="val_loss")
    trainer.fit(callback, lambda epoch: 5.0)
    assert trainer.should_stop and trainer.epochs_run < 10
    assert callback.stopped_epoch == trainer.current_epoch
    poor.complete(loss=5.0)
    assert study.trial(poor.id).state == "STOPPED"


def test_lightning_callback_warns_once_of_a_missing_monitor(client):
    """With a fake trainer (see FakeLightningTrainer)."""
    study = client.create_study(study_config(unique_name("lightning")))
    trial = study.ask()
    trainer = FakeLightningTrainer(max_epochs=3)
    callback = ht_lightning.HypertuneCallback(trial, monitor="val_acc")
    with pytest.warns(UserWarning, match="'val_acc' is not among the logged metrics "
                                         r"\(train_loss, val_loss\)") as caught:
        trainer.fit(callback, lambda epoch: 1.0)
    assert len(caught) == 1
    trial.complete(loss=1.0)
    assert study.trial(trial.id).measurements == []


class FakeDDPRanks:
    """Stands in for two DDP processes of one Lightning training (Lightning
    and torch are not installed here): two fake trainers, global ranks 0
    and 1, whose ``strategy.broadcast(obj, src=0)`` hands every rank what
    rank 0 passed, as Lightning's strategies do. The ranks run each epoch's
    validation in turn, rank 0 first (the collective waits for it)."""

    def __init__(self, max_epochs: int):
        self.trainers = [FakeLightningTrainer(max_epochs) for _ in range(2)]
        self.sent: list[Any] = []
        for rank, trainer in enumerate(self.trainers):
            trainer.world_size = 2
            trainer.is_global_zero = rank == 0
            trainer.strategy = SimpleNamespace(broadcast=self._broadcaster(rank))

    def _broadcaster(self, rank: int):
        def broadcast(obj: Any, src: int = 0) -> Any:
            assert src == 0
            if rank == 0:
                self.sent.append(obj)
            return self.sent[-1]
        return broadcast

    def fit(self, callbacks: list, val_loss: Any) -> None:
        for trainer, callback in zip(self.trainers, callbacks):
            callback.setup(trainer, None, "fit")
        for epoch in range(self.trainers[0].max_epochs):
            for rank, (trainer, callback) in enumerate(zip(self.trainers, callbacks)):
                trainer.current_epoch = epoch
                # Each rank sees its own shard's loss; rank 0's is reported.
                trainer.callback_metrics = {"val_loss": val_loss(epoch) + rank}
                callback.on_validation_end(trainer, None)
                trainer.epochs_run += 1
            if all(t.should_stop for t in self.trainers):
                return
            assert not any(t.should_stop for t in self.trainers)


def test_lightning_callback_under_ddp_stops_every_rank_at_once(client):
    """With two fake DDP ranks (see FakeDDPRanks): rank 0 alone reports, and
    when the median rule stops the trial every rank stops at the same
    epoch, through the strategy's broadcast."""
    study = client.create_study(study_config(unique_name("lightning"), early_stopping=MEDIAN))
    good_history(study)
    poor = study.ask()
    ranks = FakeDDPRanks(max_epochs=10)
    callbacks = [ht_lightning.HypertuneCallback(poor, monitor="val_loss") for _ in range(2)]
    ranks.fit(callbacks, lambda epoch: 5.0)
    stopped = [c.stopped_epoch for c in callbacks]
    assert stopped[0] is not None and stopped == [stopped[0]] * 2
    assert [t.epochs_run for t in ranks.trainers] == [stopped[0] + 1] * 2
    poor.complete(loss=5.0)
    stored = study.trial(poor.id)
    assert stored.state == "STOPPED"
    # Rank 0's values only (rank 1's were 6.0), once per epoch.
    assert [(m.step, m.metrics) for m in stored.measurements] == [
        (epoch, {"loss": 5.0}) for epoch in range(stopped[0] + 1)]


def test_lightning_callback_in_a_real_trainer(client, tmp_path):
    """With Lightning itself, where it is installed: a three-epoch fit of a
    one-weight regression reports epochs 0, 1 and 2."""
    if ht_lightning.LIGHTNING_MODULE is None:
        pytest.skip("Lightning is not installed (neither lightning.pytorch nor "
                    "pytorch_lightning); the fake-trainer tests above cover the callback")
    import importlib

    torch = pytest.importorskip("torch")
    pl = importlib.import_module(ht_lightning.LIGHTNING_MODULE)

    class Line(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def loss(self, batch: Any) -> Any:
            x, y = batch
            return torch.mean((self.weight * x - y) ** 2)

        def training_step(self, batch: Any, index: int) -> Any:
            return self.loss(batch)

        def validation_step(self, batch: Any, index: int) -> None:
            self.log("val_loss", self.loss(batch))

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.linspace(-1, 1, 32).unsqueeze(1)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, 2 * x), batch_size=8)
    study = client.create_study(study_config(unique_name("lightning")))
    trial = study.ask()
    trainer = pl.Trainer(max_epochs=3, callbacks=[ht_lightning.HypertuneCallback(trial)],
                         default_root_dir=str(tmp_path), logger=False,
                         enable_checkpointing=False, enable_progress_bar=False)
    trainer.fit(Line(), data, data)
    trial.complete(loss=float(trainer.callback_metrics["val_loss"]))
    assert [m.step for m in study.trial(trial.id).measurements] == [0, 1, 2]


# ----- Hugging Face Transformers -----


class FakeHFTrainer:
    """Stands in for transformers.Trainer (Transformers is not installed
    here): ``args`` with two TrainingArguments fields, ``state.global_step``
    (10 per epoch, reset by train()), ``control.should_training_stop``, a
    callback list, a model_init called with no argument at each train() (as
    Trainer calls a zero-argument one), and an evaluate() that calls each
    callback's on_evaluate, as Trainer's does. The "eval_loss" of an epoch
    is ``loss_of(args, model, epoch)``."""

    def __init__(self, loss_of: Any, model_init: Any = None, evaluate_in_train: bool = True,
                 callbacks_see_evaluate: bool = True):
        self.args = SimpleNamespace(learning_rate=5e-5, num_train_epochs=3, output_dir="out")
        self.state = SimpleNamespace(global_step=0)
        self.control = SimpleNamespace(should_training_stop=False)
        self.model_init = model_init
        self.model: Any = None
        self.callbacks: list = []
        self.loss_of = loss_of
        self.evaluate_in_train = evaluate_in_train
        self.callbacks_see_evaluate = callbacks_see_evaluate
        self.epoch = 0
        self.trained: list[tuple[float, Any]] = []  # (learning_rate, model) of each train()

    def add_callback(self, callback: Any) -> None:
        self.callbacks.append(callback)

    def remove_callback(self, callback: Any) -> None:
        self.callbacks.remove(callback)

    def train(self) -> None:
        self.state.global_step = 0
        self.control.should_training_stop = False
        if self.model_init is not None:
            self.model = self.model_init()
        self.trained.append((self.args.learning_rate, self.model))
        for epoch in range(1, int(self.args.num_train_epochs) + 1):
            self.epoch = epoch
            self.state.global_step += 10
            if self.evaluate_in_train:
                self.evaluate()
            if self.control.should_training_stop:
                return

    def evaluate(self) -> dict[str, float]:
        metrics = {"eval_loss": self.loss_of(self.args, self.model, self.epoch),
                   "eval_runtime": 0.1, "epoch": float(self.epoch)}
        if self.callbacks_see_evaluate:
            for callback in self.callbacks:
                callback.on_evaluate(self.args, self.state, self.control, metrics=metrics)
        return metrics


HP_SPACE = [
    {"name": "learning_rate", "double_spec": {"min": 1e-5, "max": 1e-2, "scale": "LOG"}},
    {"name": "hidden", "discrete_spec": {"values": [16, 32, 64]}},
]


def test_transformers_search_trains_each_trial_and_returns_the_best(server):
    """With a fake trainer (see FakeHFTrainer): each trial's learning_rate
    reaches trainer.args, its model parameter reaches model_init, each
    evaluation is reported at its global step, and the best run is the
    study's best trial."""
    def model_init(trial: hypertune.Trial) -> dict:
        return {"hidden": trial.params["hidden"]}

    def loss_of(args: Any, model: dict, epoch: int) -> float:
        return abs(args.learning_rate - 1e-3) * 100 + 64 / model["hidden"] + 1.0 / epoch

    trainer = FakeHFTrainer(loss_of, model_init)
    name = unique_name("hf")
    best = ht_transformers.run_hp_search(
        trainer, n_trials=4, direction="minimize", hp_space=HP_SPACE, server=server.address,
        study_name=name, algorithm="RANDOM", seed=4)
    with hypertune.Client(server.address) as client:
        study = client.get_study(name)
        trials = study.trials()
        assert [t.state for t in trials] == ["COMPLETED"] * 4
        for trial, (learning_rate, model) in zip(trials, trainer.trained):
            assert learning_rate == trial.params["learning_rate"]
            assert model == {"hidden": trial.params["hidden"]}
            assert [m.step for m in trial.measurements] == [10, 20, 30]
            assert trial.metrics["objective"] == pytest.approx(
                loss_of(SimpleNamespace(**trial.params), model, 3))
        chosen = study.best()
    assert (best.run_id, best.objective, best.hyperparameters) == (
        str(chosen.id), chosen.value, chosen.params)
    # The trainer is left as it was.
    assert trainer.args.learning_rate == 5e-5 and trainer.model_init is model_init
    assert trainer.callbacks == []


def test_transformers_search_evaluates_once_when_training_does_not(client):
    """With a fake trainer (see FakeHFTrainer) that never evaluates during
    train() and whose evaluate() calls no callback: the search evaluates
    once at the end and completes the trial with that objective (here the
    sum of the non-loss metrics, as Transformers' default objective)."""
    def loss_of(args: Any, model: Any, epoch: int) -> float:
        return 0.25

    trainer = FakeHFTrainer(loss_of, evaluate_in_train=False, callbacks_see_evaluate=False)
    name = unique_name("hf")
    best = ht_transformers.run_hp_search(
        trainer, n_trials=2, direction="maximize", hp_space=lambda: HP_SPACE[:1],
        compute_objective=lambda metrics: metrics["eval_loss"] * 2, client=client,
        study_name=name)
    study = client.get_study(name)
    assert [t.metrics for t in study.trials()] == [{"objective": 0.5}] * 2
    assert best.objective == 0.5 and study.goal == "MAXIMIZE"


def test_transformers_callback_stops_training_when_the_service_says(client):
    """With a fake trainer (see FakeHFTrainer): the median rule stops a poor
    trial, and the callback sets control.should_training_stop."""
    study = client.create_study(study_config(unique_name("hf"), early_stopping=MEDIAN))
    good_history(study, first_step=10, steps=3)
    poor = study.ask()
    trainer = FakeHFTrainer(lambda args, model, epoch: 9.0)
    trainer.args.num_train_epochs = 20
    trainer.add_callback(ht_transformers.HypertuneTrainerCallback(poor, metric="loss"))
    trainer.train()
    assert trainer.control.should_training_stop and trainer.epoch < 20
    poor.complete(loss=9.0)
    assert study.trial(poor.id).state == "STOPPED"


def test_transformers_search_marks_a_failed_training_infeasible(client):
    """With a fake trainer (see FakeHFTrainer) whose model_init raises."""
    def broken(trial: hypertune.Trial) -> None:
        raise RuntimeError("CUDA out of memory")

    name = unique_name("hf")
    with pytest.raises(RuntimeError, match="out of memory"):
        ht_transformers.run_hp_search(FakeHFTrainer(lambda *a: 1.0, broken), n_trials=3,
                                      hp_space=HP_SPACE, client=client, study_name=name)
    trial, = client.get_study(name).trials()
    assert trial.state == "INFEASIBLE" and "out of memory" in trial.infeasible_reason


def test_transformers_search_checks_its_arguments(client):
    trainer = FakeHFTrainer(lambda *a: 1.0)
    with pytest.raises(InvalidArgumentError, match="direction"):
        ht_transformers.run_hp_search(trainer, 1, direction=["minimize", "maximize"],
                                      hp_space=HP_SPACE, client=client)
    with pytest.raises(InvalidArgumentError, match="hp_space"):
        ht_transformers.run_hp_search(trainer, 1, hp_space={"lr": (0, 1)}, client=client)
    with pytest.raises(InvalidArgumentError, match="n_trials"):
        ht_transformers.run_hp_search(trainer, 0, hp_space=HP_SPACE, client=client)


def test_default_objective_is_transformers_default():
    objective = ht_transformers.default_compute_objective
    assert objective({"eval_loss": 0.3, "epoch": 2.0, "eval_runtime": 1.5}) == 0.3
    assert objective({"eval_loss": 0.3, "eval_f1": 0.8, "eval_acc": 0.9,
                      "eval_samples_per_second": 10.0}) == pytest.approx(1.7)


# ----- MLflow -----


def fake_mlflow() -> types.ModuleType:
    """A stand-in ``mlflow`` module (mlflow is not installed here) that
    records each run it is told about in ``module.runs``."""
    module = types.ModuleType("mlflow")
    module.runs = []
    module.experiments = []

    def start_run(run_name: str = "", nested: bool = False) -> None:
        module.runs.append({"name": run_name, "nested": nested, "params": {}, "metrics": [],
                            "tags": {}, "status": None})

    def log_params(params: dict) -> None:
        module.runs[-1]["params"].update(params)

    def log_metric(key: str, value: float, step: int = 0) -> None:
        module.runs[-1]["metrics"].append((key, value, step))

    def set_tag(key: str, value: str) -> None:
        module.runs[-1]["tags"][key] = value

    def end_run(status: str = "FINISHED") -> None:
        module.runs[-1]["status"] = status

    module.start_run, module.log_params, module.log_metric = start_run, log_params, log_metric
    module.set_tag, module.end_run = set_tag, end_run
    module.set_experiment = module.experiments.append
    module.set_tracking_uri = lambda uri: setattr(module, "tracking_uri", uri)
    return module


def conditional_study(client: hypertune.Client) -> hypertune.Study:
    """A study whose momentum exists only for sgd: two trials, one
    COMPLETED after two reports, one INFEASIBLE."""
    study = client.create_study({
        "name": unique_name("logged"),
        "spec": {
            "parameters": [
                {"name": "optimizer", "categorical_spec": {"values": ["sgd", "adam"]}},
                {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.99},
                 "parent": "optimizer", "parent_categories": ["sgd"]},
            ],
            "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "algorithm": "RANDOM",
            "seed": 2,
        },
    })
    done = study.ask()
    done.report(1, loss=0.8)
    done.report(2, loss=0.6)
    done.complete(loss=0.55)
    study.ask().infeasible("diverged")
    return study


def test_mlflow_callback_logs_each_trial_as_a_run(client, monkeypatch):
    """With a fake mlflow module (see fake_mlflow)."""
    mlflow = fake_mlflow()
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    study = conditional_study(client)
    callback = ht_mlflow.MLflowCallback(tracking_uri="file:///tmp/mlruns")
    for trial in study.trials():
        callback(study, trial)  # what Study.optimize(callbacks=[...]) does after each
    assert mlflow.tracking_uri == "file:///tmp/mlruns"
    assert mlflow.experiments == [study.name] * 2
    completed, infeasible = mlflow.runs
    first, second = study.trials()
    assert completed["name"] == f"{study.name}-trial-{first.id}"
    assert completed["nested"]  # inside a run of the caller's, a child of it
    assert completed["params"] == first.params
    assert completed["metrics"] == [("loss", 0.8, 1), ("loss", 0.6, 2), ("loss", 0.55, 2)]
    assert completed["tags"] == {"hypertune.study": study.name,
                                 "hypertune.trial_id": str(first.id),
                                 "hypertune.state": "COMPLETED"}
    assert completed["status"] == "FINISHED"
    assert infeasible["params"] == second.params
    assert ("momentum" in infeasible["params"]) == (second.params["optimizer"] == "sgd")
    assert infeasible["metrics"] == []
    assert infeasible["tags"]["hypertune.state"] == "INFEASIBLE"
    assert infeasible["tags"]["hypertune.infeasible_reason"] == "diverged"
    assert infeasible["status"] == "FAILED"


def test_mlflow_callback_in_study_optimize(client, monkeypatch):
    """With a fake mlflow module (see fake_mlflow), through
    Study.optimize's callbacks."""
    import inspect

    if "callbacks" not in inspect.signature(hypertune.Study.optimize).parameters:
        pytest.skip("Study.optimize takes no callbacks on this branch (added by another "
                    "change); the callback is tested by hand above")
    mlflow = fake_mlflow()
    monkeypatch.setitem(sys.modules, "mlflow", mlflow)
    study = client.create_study(study_config(unique_name("logged")))
    study.optimize(lambda trial: trial.params["x"], n_trials=3,
                   callbacks=[ht_mlflow.MLflowCallback(experiment_name="sweep")])
    assert mlflow.experiments == ["sweep"] * 3
    assert sorted(run["params"]["x"] for run in mlflow.runs) == sorted(
        t.params["x"] for t in study.trials())


def test_mlflow_callback_without_mlflow_says_what_to_install(client, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow raises ImportError
    study = client.create_study(study_config(unique_name("logged")))
    trial = study.ask()
    trial.complete(loss=1.0)
    with pytest.raises(ImportError, match="pip install mlflow"):
        ht_mlflow.MLflowCallback()(study, trial)


# ----- TensorBoard -----


class FakeWriter:
    """Stands in for a SummaryWriter (torch's needs the tensorboard package,
    which is not installed here): records its calls in ``log``."""

    log: list = []

    def __init__(self, log_dir: str):
        self.log_dir = log_dir
        FakeWriter.log.append(("open", log_dir))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        FakeWriter.log.append(("scalar", self.log_dir, tag, value, step))

    def add_text(self, tag: str, text: str) -> None:
        FakeWriter.log.append(("text", self.log_dir, tag, text))

    def add_hparams(self, hparams: dict, metrics: dict, hparam_domain_discrete: Any = None,
                    run_name: Any = None) -> None:
        FakeWriter.log.append(("hparams", self.log_dir, hparams, metrics,
                               hparam_domain_discrete, run_name))

    def flush(self) -> None:
        pass

    def close(self) -> None:
        FakeWriter.log.append(("close", self.log_dir))


def test_tensorboard_callback_writes_curves_and_hparams(client, tmp_path):
    """With a fake SummaryWriter (see FakeWriter)."""
    FakeWriter.log = []
    study = conditional_study(client)
    callback = ht_tensorboard.TensorBoardCallback(str(tmp_path), writer_factory=FakeWriter)
    first, second = study.trials()
    for trial in (first, second):
        callback(study, trial)
    one, two = str(tmp_path / f"trial-{first.id}"), str(tmp_path / f"trial-{second.id}")
    domain = {"optimizer": ["sgd", "adam"]}
    assert FakeWriter.log == [
        ("open", one),
        ("scalar", one, "loss", 0.8, 1),
        ("scalar", one, "loss", 0.6, 2),
        ("text", one, "state", "COMPLETED"),
        ("hparams", one, first.params, {"final/loss": 0.55}, domain, "."),
        ("close", one),
        ("open", two),
        ("text", two, "state", "INFEASIBLE: diverged"),
        ("hparams", two, second.params, {}, domain, "."),
        ("close", two),
    ]


class FakeTensorBoardXWriter(FakeWriter):
    """Stands in for tensorboardX's SummaryWriter, whose add_hparams names
    its folder ``name`` and takes no categorical domains."""

    def add_hparams(self, hparams: dict, metrics: dict, name: Any = None,  # type: ignore[override]
                    global_step: Any = None) -> None:
        FakeWriter.log.append(("hparams", self.log_dir, hparams, metrics, name))


def test_tensorboard_callback_with_a_tensorboardx_writer(client, tmp_path):
    """With a fake tensorboardX writer (see FakeTensorBoardXWriter)."""
    FakeWriter.log = []
    study = conditional_study(client)
    first = study.trials()[0]
    ht_tensorboard.TensorBoardCallback(str(tmp_path), FakeTensorBoardXWriter)(study, first)
    assert ("hparams", str(tmp_path / f"trial-{first.id}"), first.params,
            {"final/loss": 0.55}, ".") in FakeWriter.log


def test_tensorboard_callback_writes_event_files(client, tmp_path):
    """With torch's (or tensorboardX's) real SummaryWriter where one can be
    imported, read back with TensorBoard's EventAccumulator."""
    try:
        ht_tensorboard.summary_writer_class()
    except ImportError as error:
        pytest.skip(str(error))
    accumulator = pytest.importorskip(
        "tensorboard.backend.event_processing.event_accumulator",
        reason="reading event files back needs the tensorboard package")
    study = conditional_study(client)
    first = study.trials()[0]
    ht_tensorboard.TensorBoardCallback(str(tmp_path))(study, first)
    events = accumulator.EventAccumulator(str(tmp_path / f"trial-{first.id}"))
    events.Reload()
    assert [(e.step, e.value) for e in events.Scalars("loss")] == [
        (1, pytest.approx(0.8)), (2, pytest.approx(0.6))]


def test_tensorboard_without_a_writer_says_what_to_install(monkeypatch):
    for module in ("torch.utils.tensorboard", "tensorboardX"):
        monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match="pip install tensorboard"):
        ht_tensorboard.summary_writer_class()


# ----- Shared -----


def test_integration_modules_import_no_framework_until_used():
    code = ("import sys, hypertune.integration.mlflow, hypertune.integration.tensorboard; "
            "print(sorted(m for m in ('mlflow', 'torch', 'tensorboardX') if m in sys.modules))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env, check=True)
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("example", ["lightning_callback.py", "transformers_search.py",
                                     "log_trials.py", "plot_study.py"])
def test_examples_compile(example, tmp_path):
    """The examples of the frameworks not installed here are at least valid
    Python (each runs where its framework is: see docs/integrations.md)."""
    path = os.path.join(ROOT, "examples", "python", example)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        py_compile.compile(path, cfile=str(tmp_path / "out.pyc"), doraise=True)


def test_a_resumed_trial_reports_only_past_its_recorded_steps(client):
    """With the fake trainers (see FakeLightningTrainer, FakeHFTrainer): a
    trial that already holds measurements (as one promoted by ASHA or
    handed over by a lost worker does) and is trained again from the start
    reports only the steps beyond those; the server refuses lower ones."""
    study = client.create_study(study_config(unique_name("resumed")))
    trial = study.ask()
    trial.report(0, loss=0.9)
    trial.report(1, loss=0.8)
    FakeLightningTrainer(max_epochs=3).fit(ht_lightning.HypertuneCallback(trial),
                                           lambda epoch: 0.1 * (epoch + 1))
    trial.complete(loss=0.3)
    assert [(m.step, m.metrics["loss"]) for m in study.trial(trial.id).measurements] == [
        (0, 0.9), (1, 0.8), (2, pytest.approx(0.3))]

    trial = study.ask()
    trial.report(10, loss=0.9)
    trainer = FakeHFTrainer(lambda args, model, epoch: 1.0 / epoch)
    trainer.add_callback(ht_transformers.HypertuneTrainerCallback(trial, metric="loss"))
    trainer.train()
    trial.complete(loss=1.0 / 3)
    assert [(m.step, m.metrics["loss"]) for m in study.trial(trial.id).measurements] == [
        (10, 0.9), (20, 0.5), (30, pytest.approx(1.0 / 3))]
