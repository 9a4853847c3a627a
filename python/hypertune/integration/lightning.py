"""A PyTorch Lightning callback that reports a validation metric to a
hypertune trial at the end of each validation run, and stops the trainer
when the service stops the trial early (or pauses it at an ASHA rung)::

    from hypertune.integration.lightning import HypertuneCallback

    with study.ask() as trial:
        model = Model(lr=trial.params["lr"])
        trainer = lightning.pytorch.Trainer(
            max_epochs=20, callbacks=[HypertuneCallback(trial, monitor="val_loss")])
        trainer.fit(model, datamodule=data)
        trial.complete(val_loss=float(trainer.callback_metrics["val_loss"]))

The callback subclasses Lightning's ``Callback`` from ``lightning.pytorch``
(Lightning 2), else from ``pytorch_lightning`` (the older package name),
whichever is installed; with neither it subclasses ``object`` and still
works with anything that calls its hooks the same way. It uses only the
documented hooks ``setup(trainer, pl_module, stage)`` and
``on_validation_end(trainer, pl_module)``, and the trainer's
``callback_metrics``, ``current_epoch``, ``sanity_checking``, ``world_size``,
``is_global_zero``, ``strategy.broadcast`` and ``should_stop``. It finishes
nothing: the trial is completed (or settled by the ``with`` block) by the
caller, once ``fit`` returns.

Under DDP (several processes, ``world_size`` > 1) the global rank 0
reports, and its stop decision reaches every rank through
``trainer.strategy.broadcast``, so that all of them stop at the same epoch.
Every rank must hold the same trial: run the training under ``hypertune
worker`` (``hypertune worker STUDY --gpus 0,1 -- torchrun ...`` or
Lightning's own launcher), where :func:`hypertune.current_trial` attaches
each rank to the worker's trial; only rank 0's ``trial.complete`` is sent.

Why ``on_validation_end`` and not ``on_validation_epoch_end``: Lightning
calls the callbacks' ``on_validation_epoch_end`` before the module's own,
so a metric the module logs there (a torchmetrics ``compute()``, say) is
not yet in ``callback_metrics``, which would then hold the previous
epoch's value. ``on_validation_end`` comes after all of the epoch's
logging; Lightning's own EarlyStopping judges there too.
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any, Optional

if TYPE_CHECKING:
    from hypertune.trial import Trial


def _callback_base() -> tuple[Optional[str], type]:
    """The Lightning package found and its Callback class, or (None,
    ``object``) where Lightning is absent."""
    for module in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return module, importlib.import_module(module).Callback
        except ImportError:
            continue
    return None, object


#: Which Lightning the callback subclasses: "lightning.pytorch",
#: "pytorch_lightning", or None (neither is installed: it subclasses object).
LIGHTNING_MODULE, _Base = _callback_base()


class HypertuneCallback(_Base):  # type: ignore[misc, valid-type]
    """Reports ``trainer.callback_metrics[monitor]`` as the trial's metric
    ``metric`` (default: the study's objective) at step
    ``trainer.current_epoch``, after each validation run; sets
    ``trainer.should_stop`` once :attr:`Trial.should_stop` says the service
    stopped or paused the trial.

    The sanity-check validation Lightning runs before training is not
    reported, nor is a second validation within one epoch (with
    ``val_check_interval`` < 1), nor, for a trial resumed without its
    checkpoint, the epochs up to those it had recorded: a trial's steps only
    go up. A ``monitor``
    that is not among the logged metrics draws one warning naming those that
    are, and nothing is reported for that epoch (early stopping then cannot
    judge the trial). Under DDP only the global rank 0 reports; its stop
    decision is broadcast to every rank.
    """

    def __init__(self, trial: Trial, monitor: str = "val_loss", metric: Optional[str] = None):
        super().__init__()
        self.trial = trial
        self.monitor = monitor
        self.metric = metric or trial.objective or monitor
        #: The epoch at which the trainer was told to stop, or None.
        self.stopped_epoch: Optional[int] = None
        # A resumed trial has steps recorded already; the server refuses
        # lower ones.
        self._last_epoch: Optional[int] = max((m.step for m in trial.measurements), default=None)
        self._warned = False

    def setup(self, trainer: Any, pl_module: Any, stage: Optional[str] = None) -> None:
        pass  # Nothing to prepare; DDP is handled at each validation.

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        if getattr(trainer, "sanity_checking", False):
            return
        epoch = int(trainer.current_epoch)
        stop = False
        if getattr(trainer, "is_global_zero", True):
            self._report(trainer, epoch)
            stop = self.trial.should_stop
        if getattr(trainer, "world_size", 1) > 1:
            # Every rank calls this collective at each validation, and all
            # take rank 0's word.
            stop = bool(trainer.strategy.broadcast(stop, src=0))
        if stop:
            self.stopped_epoch = epoch
            trainer.should_stop = True

    def _report(self, trainer: Any, epoch: int) -> None:
        """Rank 0: reports ``monitor`` for ``epoch``, unless it is a step
        already reported."""
        if self._last_epoch is not None and epoch <= self._last_epoch:
            return
        value = trainer.callback_metrics.get(self.monitor)
        if value is None:
            if not self._warned:
                self._warned = True
                logged = ", ".join(sorted(trainer.callback_metrics)) or "none"
                warnings.warn(
                    f"HypertuneCallback: monitor {self.monitor!r} is not among the logged "
                    f"metrics ({logged}); trial {self.trial.id} is not reported this epoch",
                    stacklevel=3,
                )
            return
        self.trial.report(epoch, {self.metric: float(value)})  # a 0-d tensor too
        self._last_epoch = epoch
