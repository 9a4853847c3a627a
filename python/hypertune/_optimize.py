"""Study.optimize: Optuna-style optimization of a Python function, with
worker threads."""

from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Optional

from hypertune.errors import HypertuneError, InvalidArgumentError, LeaseLostError

if TYPE_CHECKING:
    from hypertune.study import Study
    from hypertune.trial import Trial


class _Runs:
    """How many more runs may start (None: no limit). Thread-safe."""

    def __init__(self, limit: Optional[int]):
        self._left = limit
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left is None:
                return True
            if self._left <= 0:
                return False
            self._left -= 1
            return True


def _check_arguments(n_trials: Any, n_workers: Any, catch: Any) -> None:
    if n_trials is not None and (
        isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0
    ):
        raise InvalidArgumentError(f"n_trials: expected None or an integer >= 0, got {n_trials!r}")
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise InvalidArgumentError(f"n_workers: expected an integer >= 1, got {n_workers!r}")
    if not isinstance(catch, tuple) or not all(
        isinstance(c, type) and issubclass(c, BaseException) for c in catch
    ):
        raise InvalidArgumentError(f"catch: expected a tuple of exception classes, got {catch!r}")


def _finish(trial: Trial, result: Any) -> None:
    if result is None:
        raise InvalidArgumentError(
            f"optimize: the function returned None for trial {trial.id}; return the "
            "objective's value or a dict of metrics, or finish the trial in the function"
        )
    trial.complete(result)


def optimize(
    study: Study,
    fn: Callable[[Trial], Any],
    *,
    n_trials: Optional[int],
    n_workers: int,
    catch: tuple[type[BaseException], ...],
) -> None:
    """See Study.optimize."""
    _check_arguments(n_trials, n_workers, catch)
    runs = _Runs(n_trials)
    stop = threading.Event()
    lock = threading.Lock()
    running: dict[int, Trial] = {}  # thread id -> its trial
    errors: list[BaseException] = []

    def run_one() -> bool:
        """Runs fn on one trial; False when there is nothing more to run."""
        if stop.is_set() or not runs.take():
            return False
        trial = study.ask()
        if trial is None:
            return False
        me = threading.get_ident()
        with lock:
            running[me] = trial
        try:
            with trial:
                result = fn(trial)
                if trial.held:
                    _finish(trial, result)
        except catch:
            pass  # recorded: the with-block marked the trial INFEASIBLE
        except LeaseLostError as lost:
            # The trial went to another worker; that is no reason to stop.
            warnings.warn(f"optimize: {lost}", stacklevel=2)
        finally:
            with lock:
                running.pop(me, None)
        return True

    if n_workers == 1:
        while run_one():
            pass
        return

    def work() -> None:
        try:
            while run_one():
                pass
        except BaseException as error:
            with lock:
                errors.append(error)
            stop.set()

    threads = [
        threading.Thread(target=work, name=f"hypertune-optimize-{i}", daemon=True)
        for i in range(n_workers)
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            thread.join()
    except KeyboardInterrupt:
        stop.set()
        with lock:
            interrupted = list(running.values())
        for trial in interrupted:
            try:
                if trial.held:
                    trial.give_back("interrupted (KeyboardInterrupt)")
            except HypertuneError:
                pass  # its lease runs out instead
        raise
    if errors:
        raise errors[0]
