"""hypertune: the Python client of the hypertune tuning service.

Create a study, ask for trials and report on them, read the history::

    import hypertune

    client = hypertune.Client()                    # $HYPERTUNE_SERVER or 127.0.0.1:50051
    study = client.create_study("study.json", if_exists="load")
    study.optimize(lambda trial: train(**trial.params), n_trials=50)
    print(study.best())
    study.trials_dataframe()

or, in a training loop::

    trial = study.ask()
    with trial:                                    # an exception: FAILED
        for epoch in range(1, epochs + 1):
            trial.report(epoch, val_accuracy=evaluate())
            if trial.should_stop:
                break
        trial.complete(val_accuracy=evaluate())

Under ``hypertune worker``, :func:`current_trial` is the trial the worker
holds; :class:`HyperTune` is a drop-in for cloudml-hypertune's reporting
call.
"""

try:
    import grpc as _grpc  # noqa: F401  (checked here for a clear message)
    import google.protobuf as _protobuf  # noqa: F401
except ModuleNotFoundError as _missing:
    import sys as _sys

    raise ModuleNotFoundError(
        f"hypertune needs grpcio and protobuf, which this Python "
        f"({_sys.executable}) lacks ({_missing}). Debian's python3 "
        "(/usr/bin/python3) has them from apt (python3-grpcio "
        "python3-protobuf, which `make` installs); a virtual environment "
        "made from it with --system-site-packages sees them too; another "
        "Python needs `pip install grpcio protobuf`.",
        name=_missing.name,
    ) from None

from hypertune._signals import Terminated
from hypertune.client import DEFAULT_SERVER, Client
from hypertune.cloudml import HyperTune
from hypertune.current import current_trial
from hypertune.errors import (
    AlreadyExistsError,
    DeadlineExceededError,
    FailedPreconditionError,
    HypertuneError,
    InvalidArgumentError,
    LeaseLostError,
    NotFoundError,
    PermissionDeniedError,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
)
from hypertune.study import Study, TrialEvent
from hypertune.trial import Attempt, Exploit, Infeasible, Measurement, Trial, TrialPruned

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_SERVER",
    "AlreadyExistsError",
    "Attempt",
    "Client",
    "DeadlineExceededError",
    "Exploit",
    "FailedPreconditionError",
    "HyperTune",
    "HypertuneError",
    "Infeasible",
    "InvalidArgumentError",
    "LeaseLostError",
    "Measurement",
    "NotFoundError",
    "PermissionDeniedError",
    "Study",
    "Terminated",
    "Trial",
    "TrialEvent",
    "TrialPruned",
    "UnauthenticatedError",
    "UnavailableError",
    "UnimplementedError",
    "current_trial",
]
