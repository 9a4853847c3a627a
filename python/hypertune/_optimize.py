"""Study.optimize: Optuna-style optimization of a Python function, with
worker threads, a time limit, callbacks and a progress bar.

Threads: the worker threads only run trials; the calling thread calls the
callbacks and draws the bar, from a queue of the trials the workers end, so
callbacks need no locks of their own.

The loop knows the study by its public face (:class:`OptimizedStudy`: study.py
imports this module), and asks for trials with the function the study
passes in.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
import warnings
from collections.abc import Iterable
from typing import Any, Callable, Optional, Protocol

from hypertune import _signals
from hypertune.errors import (
    FailedPreconditionError,
    HypertuneError,
    InvalidArgumentError,
    LeaseLostError,
)
from hypertune.trial import Trial, is_pruned, loses_the_worker

#: What optimize() says when the study's budget ends the call early.
BUDGET_SPENT = (
    "optimize: study {name!r} has spent its budget ({budget}): {ran_text}; raise it with "
    "study.update({raise_with}) and call optimize again"
)


class OptimizedStudy(Protocol):
    """What the loop reads of the :class:`~hypertune.Study` it runs on (and
    hands to the callbacks)."""

    @property
    def name(self) -> str: ...

    @property
    def goal(self) -> str: ...

    @property
    def objectives(self) -> list[str]: ...

    @property
    def state(self) -> str: ...

    @property
    def spec(self) -> Any: ...

    def best(self) -> Optional[Trial]: ...


#: Asks for the next trial, as Study.ask does, but answers None once the
#: event is set or the monotonic clock passes the deadline (if not None).
Ask = Callable[[threading.Event, Optional[float]], Optional[Trial]]


class Stops:
    """The stop events of the optimize() runs on one Study object, which
    its stop() sets. Thread-safe."""

    def __init__(self) -> None:
        self._events: set[threading.Event] = set()
        self._lock = threading.Lock()

    def add(self, event: threading.Event) -> None:
        with self._lock:
            self._events.add(event)

    def discard(self, event: threading.Event) -> None:
        with self._lock:
            self._events.discard(event)

    def stop_all(self, study_name: str) -> None:
        """Sets every event.

        Raises:
            FailedPreconditionError: no optimize is running (no event).
        """
        with self._lock:
            if not self._events:
                raise FailedPreconditionError(
                    f"study {study_name!r} stop(): no optimize is running on this Study object"
                )
            for event in self._events:
                event.set()


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


def _exceptions(name: str, value: Any) -> tuple[type[BaseException], ...]:
    """``value`` as a tuple of exception classes: a tuple, a list or (as
    Optuna's ``catch`` takes) one class."""
    if isinstance(value, type):
        value = (value,)
    elif isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or not all(
        isinstance(c, type) and issubclass(c, BaseException) for c in value
    ):
        raise InvalidArgumentError(
            f"{name}: expected an exception class or a tuple of them, got {value!r}"
        )
    return value


def workers(n_workers: Any, n_jobs: Any) -> Any:
    """The threads asked for, by hypertune's ``n_workers`` or Optuna's
    ``n_jobs`` (-1: one per CPU)."""
    if n_jobs is None:
        return n_workers
    if n_workers != 1:
        raise InvalidArgumentError(
            f"n_jobs: give n_workers or Optuna's n_jobs, not both (n_workers={n_workers!r}, "
            f"n_jobs={n_jobs!r})"
        )
    if n_jobs == -1 and not isinstance(n_jobs, bool):
        return os.cpu_count() or 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise InvalidArgumentError(f"n_jobs: expected an integer >= 1 or -1, got {n_jobs!r}")
    return n_jobs


def _check_arguments(n_trials: Any, n_workers: Any, timeout: Any) -> None:
    if n_trials is not None and (
        isinstance(n_trials, bool) or not isinstance(n_trials, int) or n_trials < 0
    ):
        raise InvalidArgumentError(f"n_trials: expected None or an integer >= 0, got {n_trials!r}")
    if isinstance(n_workers, bool) or not isinstance(n_workers, int) or n_workers < 1:
        raise InvalidArgumentError(f"n_workers: expected an integer >= 1, got {n_workers!r}")
    if timeout is not None and (
        isinstance(timeout, bool)
        or not isinstance(timeout, (int, float))
        or not timeout >= 0  # NaN too
    ):
        raise InvalidArgumentError(f"timeout: expected None or seconds >= 0, got {timeout!r}")


def _check_callbacks(callbacks: Any) -> list[Callable[[OptimizedStudy, Trial], Any]]:
    if callbacks is None:
        return []
    if isinstance(callbacks, (str, bytes)) or callable(callbacks) or not isinstance(
        callbacks, Iterable
    ):
        raise InvalidArgumentError(
            f"callbacks: expected a list of functions callback(study, trial), got {callbacks!r}"
        )
    listed = list(callbacks)
    for index, callback in enumerate(listed):
        if not callable(callback):
            raise InvalidArgumentError(
                f"callbacks[{index}]: expected a function callback(study, trial), "
                f"got {callback!r}"
            )
    return listed


def _finish(trial: Trial, result: Any) -> None:
    if result is None:
        raise InvalidArgumentError(
            f"optimize: the function returned None for trial {trial.id}; return the "
            "objective's value or a dict of metrics, or finish the trial in the function"
        )
    trial.complete(result)


class _Progress:
    """The tqdm bar of show_progress_bar: trials ended, and the best
    value so far of a single objective. Used from the calling thread."""

    def __init__(self, study: OptimizedStudy, total: Optional[int], bar: Callable[..., Any]):
        self._minimize = study.goal == "MINIMIZE"
        self._single = len(study.objectives) == 1  # else no single best value
        self._best: Optional[float] = None
        if self._single:
            best = study.best()
            self._best = best.value if best is not None else None
        # Redrawn in place on a terminal; to a log file, a line now and then.
        interactive = bool(getattr(sys.stderr, "isatty", lambda: False)())
        self._bar = bar(
            total=total, desc=f"study {study.name}", unit="trial", file=sys.stderr,
            mininterval=0.1 if interactive else 30.0, dynamic_ncols=interactive,
        )
        self._show_best()

    @staticmethod
    def open(study: OptimizedStudy, total: Optional[int], wanted: bool) -> Optional[_Progress]:
        """A bar when ``wanted`` and tqdm imports; else None, with a warning
        if it was wanted."""
        if not wanted:
            return None
        try:
            import tqdm
        except ImportError:
            warnings.warn(
                "optimize: show_progress_bar needs tqdm (apt-get install python3-tqdm); "
                "running without a progress bar",
                stacklevel=4,
            )
            return None
        return _Progress(study, total, tqdm.tqdm)

    def _show_best(self) -> None:
        if self._best is not None:
            self._bar.set_postfix(best=f"{self._best:.6g}", refresh=False)

    def ended(self, trial: Trial) -> None:
        if self._single and trial.state == "COMPLETED" and trial.feasible is not False:
            value = trial.value
            if value is not None and (
                self._best is None
                or (value < self._best if self._minimize else value > self._best)
            ):
                self._best = value
                self._show_best()
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()


# What a worker thread puts on the queue of ended trials when it is done.
_WORKER_DONE = object()


def optimize(
    study: OptimizedStudy,
    fn: Callable[[Trial], Any],
    *,
    ask: Ask,
    stops: Stops,
    n_trials: Optional[int],
    n_workers: int,
    catch: tuple[type[BaseException], ...],
    timeout: Optional[float] = None,
    callbacks: Optional[Iterable[Callable[[OptimizedStudy, Trial], Any]]] = None,
    show_progress_bar: bool = False,
    infeasible: tuple[type[BaseException], ...] = (),
) -> None:
    """See Study.optimize; trials come from ``ask``, and ``stops`` holds
    this run's stop event while it runs."""
    _check_arguments(n_trials, n_workers, timeout)
    catch = _exceptions("catch", catch)
    infeasible = _exceptions("infeasible", infeasible)
    listeners = _check_callbacks(callbacks)
    runs = _Runs(n_trials)
    started = [0]  # trials this call ran
    budget_spent = threading.Event()
    deadline = None if timeout is None else time.monotonic() + timeout
    stop = threading.Event()
    lock = threading.Lock()
    running: dict[int, Trial] = {}  # thread id -> its trial
    errors: list[BaseException] = []

    def run_one() -> Any:
        """Runs fn on one trial: returns it once ended, None if its lease
        was lost, _WORKER_DONE when there is nothing more to run."""
        if stop.is_set() or (deadline is not None and time.monotonic() >= deadline):
            return _WORKER_DONE
        if not runs.take():
            return _WORKER_DONE
        trial = ask(stop, deadline)
        if trial is None:
            if study.state == "COMPLETED":
                budget_spent.set()
            return _WORKER_DONE
        trial.infeasible_exceptions = infeasible
        me = threading.get_ident()
        with lock:
            running[me] = trial
            started[0] += 1
        try:
            with trial:
                result = fn(trial)
                if trial.held:
                    _finish(trial, result)
        except LeaseLostError as lost:
            # The trial went to another worker; that is no reason to stop.
            warnings.warn(f"optimize: {lost}", stacklevel=2)
            return None
        except BaseException as error:
            # Recorded by the with-block. A pruned trial (Optuna's
            # TrialPruned) ended as Optuna's do, and the run goes on.
            if is_pruned(error):
                return trial
            if not isinstance(error, catch):
                raise
            # In catch: FAILED, INFEASIBLE where the parameters caused it,
            # given back where the worker lost it (not an ended trial
            # then: it runs again).
            if loses_the_worker(error):
                return None
        finally:
            with lock:
                running.pop(me, None)
        return trial

    progress = _Progress.open(study, n_trials, show_progress_bar)

    def ended(trial: Trial) -> None:
        """What follows each ended trial, in the calling thread."""
        if progress is not None:
            progress.ended(trial)
        for callback in listeners:
            callback(study, trial)

    stops.add(stop)
    try:
        if n_workers == 1:
            while True:
                outcome = run_one()
                if outcome is _WORKER_DONE:
                    break
                if outcome is not None:
                    ended(outcome)
        else:
            _run_in_threads(run_one, ended, n_workers, stop, lock, running, errors)
    finally:
        stops.discard(stop)
        if progress is not None:
            progress.close()
    short = started[0] == 0 if n_trials is None else started[0] < n_trials
    if budget_spent.is_set() and short:
        _warn_budget_spent(study, started[0], n_trials)


def _warn_budget_spent(study: OptimizedStudy, ran: int, asked: Optional[int]) -> None:
    """Says that the study's budget ended the call before it ran the
    trials asked for (``asked``, None: as many as the budget allows)."""
    spec = study.spec
    more = 1 if asked is None else asked - ran
    if spec.max_trials > 0:
        budget = f"max_trials={spec.max_trials}"
        raise_with = f"max_trials={spec.max_trials + more}"
    elif spec.max_device_hours > 0:
        budget = f"max_device_hours={spec.max_device_hours:g}"
        raise_with = "max_device_hours=<more hours>"
    else:
        budget = "it is COMPLETED"
        raise_with = "max_trials=<more trials>"
    if asked is None:
        ran_text = "no trial ran in this call"
    else:
        ran_text = f"{ran} of the {asked} trials asked for (n_trials) ran in this call"
    warnings.warn(
        BUDGET_SPENT.format(name=study.name, budget=budget, ran_text=ran_text,
                            raise_with=raise_with),
        stacklevel=4,
    )


def _run_in_threads(
    run_one: Callable[[], Any],
    ended: Callable[[Trial], None],
    n_workers: int,
    stop: threading.Event,
    lock: threading.Lock,
    running: dict[int, Trial],
    errors: list[BaseException],
) -> None:
    """Runs trials in ``n_workers`` threads while the calling thread calls
    ``ended`` on each trial they end; raises the first error of either."""
    finished: queue.SimpleQueue = queue.SimpleQueue()

    def work() -> None:
        try:
            while True:
                outcome = run_one()
                if outcome is _WORKER_DONE:
                    return
                if outcome is not None:
                    finished.put(outcome)
        except BaseException as error:
            with lock:
                errors.append(error)
            stop.set()
        finally:
            finished.put(_WORKER_DONE)

    threads = [
        threading.Thread(target=work, name=f"hypertune-optimize-{i}", daemon=True)
        for i in range(n_workers)
    ]
    for thread in threads:
        thread.start()
    # The trials are held in the worker threads, so their with-blocks cannot
    # turn SIGTERM into Terminated: this thread does, and gives them back.
    terminable = _signals.enter()
    try:
        working = n_workers
        while working:
            outcome = finished.get()
            if outcome is _WORKER_DONE:
                working -= 1
                continue
            with lock:
                failed = bool(errors)
            if failed:
                continue  # the run is ending: no more callbacks
            try:
                ended(outcome)
            except (KeyboardInterrupt, _signals.Terminated):
                raise
            except BaseException as error:
                with lock:
                    errors.append(error)
                stop.set()
        for thread in threads:
            thread.join()
    except (KeyboardInterrupt, _signals.Terminated) as interruption:
        stop.set()
        reason = ("preempted (SIGTERM)" if isinstance(interruption, _signals.Terminated)
                  else "interrupted (KeyboardInterrupt)")
        with lock:
            interrupted = list(running.values())
        for trial in interrupted:
            try:
                if trial.held:
                    trial.give_back(reason, preempted=True)
            except HypertuneError:
                pass  # its lease runs out instead
        raise
    finally:
        if terminable:
            _signals.leave()
    if errors:
        raise errors[0]
