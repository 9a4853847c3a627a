"""What a user coming from Optuna types, against a real hypertuned:
study.best_trial / best_value / best_params / best_trials / direction(s),
trial.report(value, step) beside report(step, **metrics), an Optuna-style
objective (suggest_float and its kin, TrialPruned, n_jobs, a tuple for
several objectives) under optimize(), and trials_dataframe's feasible
column and Optuna layout, of a study made here and of one imported from an
Optuna file."""

from __future__ import annotations

import datetime
import os
import re
import subprocess

import pytest

import hypertune
from helpers import program, study_config, unique_name


def complete_with(study: hypertune.Study, losses: list[float]) -> list[hypertune.Trial]:
    done = []
    for loss in losses:
        trial = study.ask()
        trial.complete(loss=loss)
        done.append(trial)
    return done


# ----- The best so far, and the directions -----


def test_best_trial_value_params_and_direction(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))
    assert study.direction == "MINIMIZE"
    assert study.directions == ["MINIMIZE"]
    assert study.best_trials == []
    for name in ("best_trial", "best_value", "best_params"):
        with pytest.raises(ValueError, match=re.escape(
                f"study {study.name!r} has no best trial yet: no trial has COMPLETED with a "
                "feasible result (trials by state: none)")):
            getattr(study, name)
    failed = study.ask()
    failed.fail("broken")
    with pytest.raises(ValueError, match=r"\(trials by state: FAILED 1\)"):
        study.best_trial

    done = complete_with(study, [0.7, 0.2, 0.5])
    best = study.best_trial
    assert best.id == done[1].id and best.number == done[1].id - 1
    assert study.best_value == 0.2
    assert study.best_params == done[1].params
    assert isinstance(study.best_params["x"], float) and isinstance(study.best_params["y"], int)
    assert [t.id for t in study.best_trials] == [done[1].id]

    maximized = client.create_study(study_config(
        unique_name(), metrics=[{"name": "acc", "goal": "MAXIMIZE"}]))
    assert maximized.direction == "MAXIMIZE"


def test_several_objectives_point_to_best_trials(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
        {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"},
    ]))
    assert study.directions == ["MINIMIZE", "MAXIMIZE"]
    with pytest.raises(hypertune.FailedPreconditionError, match=re.escape(
            "direction: the study has 2 objectives (loss, acc); study.directions has each "
            "one's goal")):
        study.direction
    # Optuna's return of a multi-objective function: the values in order.
    ids = []
    for pair in [(1.0, 0.5), (2.0, 0.9), (3.0, 0.4)]:  # the third is dominated
        trial = study.ask()
        trial.complete(pair)
        ids.append(trial.id)
    assert study.trial(ids[1]).metrics == {"loss": 2.0, "acc": 0.9}
    assert sorted(t.id for t in study.best_trials) == ids[:2]
    for name in ("best_trial", "best_value", "best_params"):
        with pytest.raises(hypertune.FailedPreconditionError, match=re.escape(
                f"{name}: the study has 2 objectives (loss, acc), so no single best; "
                "study.best_trials is the Pareto front")):
            getattr(study, name)
    trial = study.ask()
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(
            '3 values for the study\'s 2 objective(s) ("loss", "acc"); give one value per '
            "objective, in that order")):
        trial.complete((1.0, 2.0, 3.0))
    trial.complete([0.5, 0.1])
    assert study.trial(trial.id).metrics == {"loss": 0.5, "acc": 0.1}


# ----- report in either order -----


def curve(study: hypertune.Study, trial: hypertune.Trial) -> list[tuple[int, dict]]:
    return [(m.step, m.metrics) for m in study.trial(trial.id).measurements]


def test_report_takes_optunas_order_beside_its_own(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE"}, {"name": "lr"}]))
    trial = study.ask()
    trial.report(0.9, 1)                      # Optuna: value, step
    trial.report(1, step=2)                   # Optuna: an int value, the step named
    trial.report(value=0.7, step=3)           # Optuna: both named
    trial.report(4, loss=0.6, lr=0.1)         # hypertune: step, metrics by name
    trial.report(5, {"loss": 0.5})            # hypertune: step, a dict
    trial.report(step=6, metrics={"loss": 0.4})
    trial.report(6, loss=0.4)                 # the same again: harmless
    assert curve(study, trial) == [
        (1, {"loss": 0.9}), (2, {"loss": 1.0}), (3, {"loss": 0.7}),
        (4, {"loss": 0.6, "lr": 0.1}), (5, {"loss": 0.5}), (6, {"loss": 0.4})]
    trial.complete(loss=0.4)


def test_report_with_numpy_values(client: hypertune.Client) -> None:
    numpy = pytest.importorskip("numpy", reason="python3-numpy is not installed")
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    trial.report(numpy.float32(0.5), numpy.int64(1))   # a NumPy float is a value
    trial.report(numpy.int64(2), loss=numpy.float64(0.25))
    assert curve(study, trial) == [(1, {"loss": 0.5}), (2, {"loss": 0.25})]
    trial.complete(loss=0.25)


@pytest.mark.parametrize("first, second", [(3, 0.85), (3, 1)])
def test_an_integer_then_a_number_is_ambiguous(client: hypertune.Client, first, second) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    with pytest.raises(TypeError) as raised:
        trial.report(first, second)
    assert str(raised.value) == (
        f"trial {trial.id} report({first!r}, {second!r}): an integer then a number is "
        "ambiguous. hypertune's form takes the step first and the metrics by name: "
        'report(step, loss=value) or report(step, {"loss": value}); Optuna\'s takes the value '
        "first: report(value, step) with a float value, or report(value, step=step)")
    assert trial.held and curve(study, trial) == []  # nothing was sent
    trial.complete(loss=1.0)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda t: t.report(0.5, 1.5), hypertune.InvalidArgumentError,
         "report: step: expected an integer, got float 1.5"),
        (lambda t: t.report(0.5, step=2, acc=0.1), TypeError,
         "expected report(step, metrics_dict, **metrics) or Optuna's report(value, step)"),
        (lambda t: t.report(0.5, 1, 2), TypeError, "got 3 positional argument(s)"),
        (lambda t: t.report(loss=0.5), TypeError, "missing the step"),
        (lambda t: t.report(1, [0.5]), hypertune.InvalidArgumentError,
         "metrics: expected a dict of metric name -> number, got list [0.5]"),
        (lambda t: t.report("0.5", 1), hypertune.InvalidArgumentError,
         "step: expected an integer, got str '0.5'"),
    ],
)
def test_report_arguments_that_fit_no_form(client: hypertune.Client, call, error,
                                           message) -> None:
    study = client.create_study(study_config(unique_name()))
    trial = study.ask()
    with pytest.raises(error) as raised:
        call(trial)
    assert message in str(raised.value) and f"trial {trial.id}" in str(raised.value)
    trial.complete(loss=1.0)


def test_a_metric_named_value_is_that_metric(client: hypertune.Client) -> None:
    # An Optuna import names the objective "value"; report(value=, step=)
    # means the same in both forms there.
    imported = client.create_study(study_config(unique_name(), metrics=[
        {"name": "value", "goal": "MINIMIZE"}]))
    trial = imported.ask()
    trial.report(value=0.3, step=1)
    trial.report(0.2, 2)
    assert curve(imported, trial) == [(1, {"value": 0.3}), (2, {"value": 0.2})]
    trial.complete(0.2)
    # Beside another objective it is a metric, which the report must pair
    # with the objective.
    recorded = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE"}, {"name": "value"}]))
    trial = recorded.ask()
    with pytest.raises(hypertune.InvalidArgumentError, match='no "loss", the objective'):
        trial.report(value=0.3, step=1)
    trial.complete(loss=1.0)


# ----- An Optuna-style objective under optimize() -----

SPACE = [
    {"name": "x", "double_spec": {"min": -5.0, "max": 10.0}},
    {"name": "lr", "double_spec": {"min": 1e-4, "max": 0.1, "scale": "LOG"}},
    {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
    {"name": "batch", "discrete_spec": {"values": [16, 32, 48, 64]}},
    {"name": "dropout", "discrete_spec": {"values": [0.0, 0.25, 0.5]}},
    {"name": "act", "categorical_spec": {"values": ["relu", "None", "1"]}},
]


def test_an_optuna_objective_runs_as_written(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), parameters=SPACE))
    seen = {}

    def objective(trial):
        x = trial.suggest_float("x", -5, 10)
        lr = trial.suggest_float("lr", 1e-4, 0.1, log=True)
        layers = trial.suggest_int("layers", 1, 4)
        batch = trial.suggest_int("batch", 16, 64, step=16)
        dropout = trial.suggest_float("dropout", 0.0, 0.5, step=0.25)
        act = trial.suggest_categorical("act", ["relu", None, 1])
        trial.set_user_attr("act_type", type(act).__name__)
        seen[trial.number] = (x, lr, layers, batch, dropout, act)
        return (x - 2) ** 2 + layers

    ended = []
    study.optimize(objective, n_trials=6, n_jobs=2,
                   callbacks=[lambda s, t: ended.append((t.number, t.state))])
    assert sorted(ended) == [(n, "COMPLETED") for n in range(6)]
    for trial in study.trials():
        x, lr, layers, batch, dropout, act = seen[trial.number]
        params = trial.params
        assert (x, lr, layers, batch, dropout) == (
            params["x"], params["lr"], params["layers"], params["batch"], params["dropout"])
        assert type(x) is float and type(layers) is int and type(batch) is int
        assert act in ("relu", None, 1) and str(act) == params["act"]
        assert trial.user_attrs == {"act_type": type(act).__name__}
        assert trial.value == (x - 2) ** 2 + layers
    best = min(study.trials(), key=lambda t: t.value)
    assert study.best_value == best.value and study.best_params == best.params


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.suggest_float("z", 0, 1), [
            "suggest_float('z', 0, 1): the study has no parameter 'z' (its parameters: "
            '"x", "lr", "layers", "batch", "dropout", "act"). A hypertune study\'s search '
            "space is declared when it is created, not by the objective: add "
            '{"name": "z", "double_spec": {"min": 0, "max": 1}} to its config\'s "parameters"']),
        (lambda t: t.suggest_float("x", 0, 1), [
            "suggest_float('x', 0, 1): the study searches 'x' as "
            '{"double_spec": {"min": -5.0, "max": 10.0}}, and this call asks for '
            '{"double_spec": {"min": 0, "max": 1}}']),
        (lambda t: t.suggest_float("lr", 1e-4, 0.1), [
            '"scale": "LOG"}}, and this call asks for {"double_spec": {"min": 0.0001, '
            '"max": 0.1}}']),
        (lambda t: t.suggest_int("x", -5, 10), [
            'asks for {"integer_spec": {"min": -5, "max": 10}}']),
        (lambda t: t.suggest_int("batch", 16, 64, step=32), [
            'searches \'batch\' as {"discrete_spec": {"values": [16.0, 32.0, 48.0, 64.0]}}']),
        (lambda t: t.suggest_categorical("act", ["relu", "tanh"]), [
            'asks for {"categorical_spec": {"values": ["relu", "tanh"]}}']),
        (lambda t: t.suggest_categorical("act", [1, "1"]), [
            "hypertune cannot search this domain: two of its choices have the same label"]),
    ],
)
def test_a_suggest_call_that_disagrees_with_the_study(client: hypertune.Client, call,
                                                      message) -> None:
    study = client.create_study(study_config(unique_name(), parameters=SPACE))
    trial = study.ask()
    with pytest.raises(hypertune.InvalidArgumentError) as raised:
        call(trial)
    for part in message:
        assert part in str(raised.value)
    assert f"trial {trial.id} " in str(raised.value)
    trial.complete(loss=1.0)


def test_suggesting_an_inactive_parameter(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name(), parameters=[
        {"name": "opt", "categorical_spec": {"values": ["sgd", "adam"]}},
        {"name": "momentum", "double_spec": {"min": 0.0, "max": 1.0},
         "parent": "opt", "parent_categories": ["sgd"]},
    ]))
    study.enqueue({"opt": "adam"})
    trial = study.ask()
    assert trial.suggest_categorical("opt", ["sgd", "adam"]) == "adam"
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(
            "suggest_float('momentum', 0.0, 1.0): 'momentum' is not active in this trial: "
            "it depends on 'opt', whose value here does not enable it")):
        trial.suggest_float("momentum", 0.0, 1.0)
    trial.complete(loss=1.0)


def pruned_class(name: str) -> type:
    if name == "optuna":
        optuna = pytest.importorskip("optuna", reason="python3-optuna is not installed")
        return optuna.TrialPruned
    return hypertune.TrialPruned


@pytest.mark.parametrize("pruned_by", ["hypertune", "optuna"])
def test_a_pruned_trial_is_stopped_and_the_run_goes_on(client: hypertune.Client,
                                                       pruned_by) -> None:
    pruned = pruned_class(pruned_by)
    study = client.create_study(study_config(
        unique_name(), early_stopping={"rule": "MEDIAN", "min_trials": 3, "grace_steps": 1}))

    def objective(trial):
        trial.suggest_float("x", 0.0, 1.0)
        for step in (1, 2, 3):
            trial.report(5.0 if trial.number == 3 else 1.0 / step, step)
            if trial.should_prune():
                raise pruned()
        return 1.0 / 3

    ended = []
    study.optimize(objective, n_trials=5,
                   callbacks=[lambda s, t: ended.append((t.number, t.state))])
    assert ended == [(0, "COMPLETED"), (1, "COMPLETED"), (2, "COMPLETED"), (3, "STOPPED"),
                     (4, "COMPLETED")]
    stopped = study.trial(4)
    assert stopped.state == "STOPPED" and "median" in stopped.stop_reason.lower()
    # Stopped before its last step, with its last report as the result.
    assert stopped.metrics == {"loss": 5.0}
    last = stopped.measurements[-1].step
    assert last < 3 and stopped.proto.final_measurement.step == last


def test_pruning_without_the_studys_word_fails_the_trial(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial):
        if trial.number == 0:
            trial.report(0.5, 1)
        raise hypertune.TrialPruned("not worth it")

    study.optimize(objective, n_trials=2)  # not raised: the run went on
    first, second = study.trials()
    assert (first.state, second.state) == ("FAILED", "FAILED")
    assert first.failure_reason == (
        "TrialPruned: not worth it (pruned by the objective, but the study's early stopping "
        "had not stopped it: no result to keep)")
    assert second.failure_reason.endswith("but it reported no intermediate value: no result "
                                          "to keep)")


@pytest.mark.parametrize(
    "arguments, message",
    [
        ({"n_jobs": 0}, "n_jobs: expected an integer >= 1 or -1, got 0"),
        ({"n_jobs": 2, "n_workers": 2}, "n_jobs: give n_workers or Optuna's n_jobs, not both"),
        ({"catch": "ValueError"}, "catch: expected an exception class or a tuple of them"),
    ],
)
def test_bad_optuna_arguments(client: hypertune.Client, arguments, message) -> None:
    study = client.create_study(study_config(unique_name()))
    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(message)):
        study.optimize(lambda trial: 1.0, **arguments)
    assert study.trials() == []


def test_catch_takes_one_class_and_n_jobs_all_cpus(client: hypertune.Client) -> None:
    study = client.create_study(study_config(unique_name()))

    def objective(trial):
        if trial.number == 0:
            raise ValueError("bad batch")
        return 0.5

    study.optimize(objective, n_trials=3, n_jobs=-1, catch=ValueError)  # as Optuna takes it
    assert sorted(t.state for t in study.trials()) == ["COMPLETED", "COMPLETED", "FAILED"]


# ----- trials_dataframe: feasible, and Optuna's layout -----


def test_dataframe_feasible_column(client: hypertune.Client) -> None:
    pytest.importorskip("pandas", reason="python3-pandas is not installed")
    study = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
        {"name": "memory", "role": "CONSTRAINT", "upper_bound": 10},
    ]))
    study.ask().complete(loss=0.5, memory=4.0)   # meets the constraint
    study.ask().complete(loss=0.1, memory=12.0)  # breaks it
    study.ask().infeasible("out of memory")      # no result
    study.ask().fail("a bug")                     # no result
    study.enqueue({"x": 0.5, "y": 2})             # not run
    frame = study.trials_dataframe()
    assert list(frame["feasible"]) == [True, False, None, None, None]
    assert list(frame.columns[-2:]) == ["infeasible_reason", "feasible"]
    assert study.best_value == 0.5  # the infeasible 0.1 is no best

    plain = client.create_study(study_config(unique_name()))
    complete_with(plain, [0.3])
    plain.ask().infeasible("diverged")
    assert list(plain.trials_dataframe()["feasible"]) == [True, None]


def test_dataframe_in_optunas_layout(client: hypertune.Client) -> None:
    pandas = pytest.importorskip("pandas", reason="python3-pandas is not installed")
    study = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE"}, {"name": "lr"}],
        early_stopping={"rule": "MEDIAN", "min_trials": 1, "grace_steps": 1}))
    first = study.ask()
    first.report(1, loss=0.5)
    first.set_user_attr("model", "/ckpt/1.pt")
    first.complete(loss=0.4, lr=0.01)
    poor = study.ask()
    poor.report(1, loss=9.0)
    assert poor.should_prune()
    poor.complete(loss=9.0)
    study.ask().fail("a bug")
    running = study.ask()
    study.enqueue({"x": 0.25, "y": 3})

    frame = study.trials_dataframe(style="optuna")
    assert list(frame.columns) == [
        "number", "value", "datetime_start", "datetime_complete", "duration", "params_x",
        "params_y", "user_attrs_model", "state", "feasible", "metrics_lr"]
    assert isinstance(frame.index, pandas.RangeIndex)
    assert list(frame["number"]) == [0, 1, 2, 3, 4]
    assert list(frame["state"]) == ["COMPLETE", "PRUNED", "FAIL", "RUNNING", "WAITING"]
    assert frame["value"][0] == 0.4 and frame["value"][1] == 9.0
    assert frame["value"][2:].isna().all()
    assert list(frame["feasible"]) == [True, True, None, None, None]
    assert list(frame["user_attrs_model"]) == ["/ckpt/1.pt", None, None, None, None]
    assert frame["metrics_lr"][0] == 0.01
    assert frame["params_x"][4] == 0.25 and frame["params_y"][4] == 3
    stored = study.trial(first.id)
    assert frame["datetime_start"][0] == pandas.Timestamp(stored.start_time)
    assert frame["duration"][0] == stored.end_time - stored.start_time
    assert frame["datetime_start"][0].tzinfo is not None  # UTC, as the default style
    assert pandas.isna(frame["duration"][3])  # still running
    with_curves = study.trials_dataframe(style="optuna", intermediate=True)
    assert list(with_curves.columns[-1:]) == ["intermediate_loss_1"]
    assert list(with_curves["intermediate_loss_1"][:2]) == [0.5, 9.0]
    # Optuna's attrs: the groups named, in the layout's order.
    chosen = study.trials_dataframe(attrs=("state", "number", "value", "params",
                                           "system_attrs"))
    assert list(chosen.columns) == ["number", "value", "params_x", "params_y", "state"]
    pandas.testing.assert_frame_equal(chosen, frame[chosen.columns])
    for arguments, message in [
            ({"attrs": ("number", "nope")}, "attrs: unknown 'nope'; expected some of: number"),
            ({"attrs": "number"}, "attrs: expected a tuple of names, got 'number'"),
            ({"attrs": ("number",), "style": "hypertune"},
             'attrs: selects columns of style="optuna" only')]:
        with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(message)):
            study.trials_dataframe(**arguments)
    running.complete(loss=1.0)

    objectives = client.create_study(study_config(unique_name(), metrics=[
        {"name": "loss", "goal": "MINIMIZE", "role": "OBJECTIVE"},
        {"name": "acc", "goal": "MAXIMIZE", "role": "OBJECTIVE"}]))
    objectives.ask().complete((0.5, 0.9))
    frame = objectives.trials_dataframe(style="optuna")
    assert list(frame.columns[:3]) == ["number", "values_loss", "values_acc"]
    assert (frame["values_loss"][0], frame["values_acc"][0]) == (0.5, 0.9)

    with pytest.raises(hypertune.InvalidArgumentError, match=re.escape(
            "trials_dataframe: style: expected \"hypertune\" or \"optuna\", got 'pandas'")):
        study.trials_dataframe(style="pandas")


def make_optuna_file(path: str, name: str) -> None:
    """An Optuna SQLite storage holding study ``name``: three COMPLETE
    trials and one PRUNED, with user attributes of a number, a bool and a
    str."""
    optuna = pytest.importorskip("optuna", reason="python3-optuna is not installed")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(storage=f"sqlite:///{path}", study_name=name,
                                sampler=optuna.samplers.RandomSampler(seed=3))

    def objective(trial):
        x = trial.suggest_float("x", -1.0, 1.0)
        trial.set_user_attr("score", 0.25 * trial.number)
        trial.set_user_attr("good", trial.number % 2 == 0)
        trial.set_user_attr("tag", "run-%d" % trial.number)
        trial.report(x + 1.0, 0)
        if trial.number == 3:
            raise optuna.TrialPruned()
        return x * x

    study.optimize(objective, n_trials=4)


def test_dataframe_of_an_imported_optuna_study(client: hypertune.Client, server,
                                              tmp_path) -> None:
    pytest.importorskip("pandas", reason="python3-pandas is not installed")
    name = unique_name("imported")
    path = os.path.join(str(tmp_path), "optuna.db")
    make_optuna_file(path, name)
    imported = subprocess.run(
        [program("hypertune"), "--server", server.address, "import-optuna", path],
        capture_output=True, text=True, timeout=120)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    study = client.get_study(name)
    # The import keeps numbers also as metrics "user_attr.KEY": shown once.
    assert "user_attr.score" in study.trial(1).metrics
    frame = study.trials_dataframe()
    assert [c for c in frame.columns if "user_attr" in c] == [
        "user_attrs_good", "user_attrs_score", "user_attrs_tag"]
    assert list(frame["user_attrs_score"]) == [0.0, 0.25, 0.5, 0.75]
    assert list(frame["user_attrs_good"]) == [True, False, True, False]
    assert list(frame["user_attrs_tag"]) == ["run-0", "run-1", "run-2", "run-3"]

    optuna_frame = study.trials_dataframe(style="optuna")
    assert list(optuna_frame.columns) == [
        "number", "value", "datetime_start", "datetime_complete", "duration", "params_x",
        "user_attrs_good", "user_attrs_score", "user_attrs_tag", "state", "feasible"]
    assert list(optuna_frame["state"]) == ["COMPLETE", "COMPLETE", "COMPLETE", "PRUNED"]
    assert list(optuna_frame["number"]) == [0, 1, 2, 3]
    assert list(optuna_frame["user_attrs_score"]) == [0.0, 0.25, 0.5, 0.75]
    x = optuna_frame["params_x"]
    assert list(optuna_frame["value"][:3]) == [v * v for v in x[:3]]
    assert optuna_frame["value"][3] == x[3] + 1.0  # the pruned trial's last report
    assert study.best_value == min(v * v for v in x[:3])
    assert isinstance(optuna_frame["datetime_start"][0], datetime.datetime)
