"""The Optuna bridge (hypertune.optuna.Sampler) against a real hypertuned:
plain Optuna scripts whose sampler is the bridge, and the hypertune study
that records them. Skipped without Optuna (Debian: python3-optuna)."""

from __future__ import annotations

import json
import math
import warnings
from typing import Any, Iterator

import pytest

optuna = pytest.importorskip(
    "optuna", reason="the Optuna bridge needs Optuna (apt-get install python3-optuna)"
)

import hypertune  # noqa: E402
import hypertune.optuna  # noqa: E402
from helpers import unique_name  # noqa: E402
from optuna.distributions import (  # noqa: E402
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)

ACTIVATION_COST = {"relu": 0.0, "tanh": 1.0, "sigmoid": 2.0}


def bowl(trial: Any) -> float:
    """Minimum 0 at x=1.5, lr=1e-3, n=7, activation relu."""
    x = trial.suggest_float("x", -5.0, 5.0)
    lr = trial.suggest_float("lr", 1e-5, 1.0, log=True)
    n = trial.suggest_int("n", 1, 10)
    activation = trial.suggest_categorical("activation", ["relu", "tanh", "sigmoid"])
    return ((x - 1.5) ** 2 + (math.log10(lr) + 3) ** 2 + 0.1 * (n - 7) ** 2
            + ACTIVATION_COST[activation])


@pytest.fixture
def make_sampler(server: Any) -> Iterator[Any]:
    """Makes bridges to the module's server; closes them after the test."""
    made = []

    def make(**options: Any) -> hypertune.optuna.Sampler:
        options.setdefault("seed", 3)
        sampler = hypertune.optuna.Sampler(server=server.address, **options)
        made.append(sampler)
        return sampler

    yield make
    for sampler in made:
        sampler.close()


def recorded(sampler: hypertune.optuna.Sampler) -> dict[int, hypertune.Trial]:
    """The hypertune study's trials by the Optuna trial number they record."""
    study = sampler.hypertune_study
    assert study is not None
    by_number = {}
    for trial in study.trials():
        number = hypertune.optuna.optuna_trial_number(trial)
        if number is not None:
            assert number not in by_number, f"Optuna trial {number} recorded twice"
            by_number[number] = trial
    return by_number


def assert_same_params(optuna_trial: Any, hypertune_trial: hypertune.Trial) -> None:
    for name, value in hypertune_trial.params.items():
        assert name in optuna_trial.params, f"trial {optuna_trial.number}: {name} was not asked for"
        expected = hypertune.optuna.category_label(optuna_trial.params[name])
        if isinstance(value, str):
            assert value == expected
        else:
            assert value == pytest.approx(optuna_trial.params[name], rel=1e-12)


# ----- The mapping of distributions -----


def test_distributions_map_to_parameter_specs(client: hypertune.Client) -> None:
    """The server's mapping (InferOptunaSpace), as the bridge asks it."""
    def spec(name: str, distribution: Any) -> Any:
        return hypertune.optuna.parameter_spec(client, name, distribution)

    assert spec("x", FloatDistribution(0.0, 2.0))[0] == {
        "name": "x", "double_spec": {"min": 0.0, "max": 2.0, "scale": "LINEAR"}}
    assert spec("lr", FloatDistribution(1e-4, 1.0, log=True))[0]["double_spec"]["scale"] == "LOG"
    assert spec("q", FloatDistribution(0.0, 1.0, step=0.25))[0] == {
        "name": "q", "discrete_spec": {"values": [0.0, 0.25, 0.5, 0.75, 1.0]}}
    tenths = FloatDistribution(0.0, 0.3, step=0.1)
    grid = spec("r", tenths)[0]["discrete_spec"]["values"]
    assert grid[-1] == 0.3 and hypertune.optuna.to_optuna(grid[-1], tenths)[0]
    assert spec("n", IntDistribution(1, 64, log=True))[0] == {
        "name": "n", "integer_spec": {"min": 1, "max": 64, "scale": "LOG"}}
    assert spec("batch", IntDistribution(16, 64, step=16))[0] == {
        "name": "batch", "discrete_spec": {"values": [16.0, 32.0, 48.0, 64.0]}}
    assert spec("c", CategoricalDistribution([None, True, 2, "x"]))[0] == {
        "name": "c", "categorical_spec": {"values": ["None", "True", "2", "x"]}}
    # Numeric choices are ordered values; a single value is one.
    assert spec("b", CategoricalDistribution([32, 64]))[0] == {
        "name": "b", "discrete_spec": {"values": [32.0, 64.0]}}
    assert spec("one", FloatDistribution(1.0, 1.0))[0] == {
        "name": "one", "discrete_spec": {"values": [1.0]}}
    # A step grid past the server's limit is a range without the step.
    assert spec("fine", FloatDistribution(0.0, 1.0, step=1e-4))[0] == {
        "name": "fine", "double_spec": {"min": 0.0, "max": 1.0, "scale": "LINEAR"}}
    # What hypertune cannot hold says why.
    for name, distribution, why in [
        ("clash", CategoricalDistribution([1, "1"]), 'two choices read "1"'),
        ("layer/0", FloatDistribution(0.0, 1.0), "identifiers"),
    ]:
        held, reason = spec(name, distribution)
        assert held is None and why in reason


def test_values_map_back_only_where_the_distribution_holds_them() -> None:
    to_optuna = hypertune.optuna.to_optuna
    assert to_optuna("None", CategoricalDistribution([None, "a"])) == (True, None)
    assert to_optuna("b", CategoricalDistribution(["a"])) == (False, None)
    assert to_optuna(32, IntDistribution(16, 64, step=16)) == (True, 32)
    assert to_optuna(40, IntDistribution(16, 64, step=16))[0] is False
    assert to_optuna(3.0, FloatDistribution(0.0, 2.0))[0] is False
    assert to_optuna(64.0, CategoricalDistribution([32, 64])) == (True, 64)
    assert to_optuna(48.0, CategoricalDistribution([32, 64]))[0] is False
    assert hypertune.optuna.widened(
        {"name": "x", "double_spec": {"min": 0.0, "max": 1.0, "scale": "LINEAR"}},
        {"name": "x", "double_spec": {"min": -1.0, "max": 0.5, "scale": "LINEAR"}},
    )["double_spec"] == {"min": -1.0, "max": 1.0, "scale": "LINEAR"}
    assert hypertune.optuna.widened(
        {"name": "x", "double_spec": {"min": 0.1, "max": 1.0, "scale": "LOG"}},
        {"name": "x", "double_spec": {"min": 0.1, "max": 1.0, "scale": "LINEAR"}},
    ) is None


def made_trial(state: Any = TrialState.COMPLETE, **params: Any) -> Any:
    """A finished Optuna trial that asked for ``params`` in that order."""
    kinds = {str: CategoricalDistribution(["a", "b", "c"]), float: FloatDistribution(0.0, 1.0)}
    return optuna.trial.create_trial(
        state=state, value=None if state == TrialState.FAIL else 1.0, params=params,
        distributions={name: kinds[type(value)] for name, value in params.items()},
    )


def test_a_categorical_that_decides_a_parameter_becomes_its_parent(
    client: hypertune.Client,
) -> None:
    parameters, left_out = hypertune.optuna.infer_parameters([
        made_trial(c="a", u=0.1, x=0.5),
        made_trial(c="b", x=0.2),
        made_trial(c="c", u=0.3, x=0.1),
        made_trial(c="a", u=0.2, x=0.4),
        made_trial(c="b", x=0.6),
        made_trial(c="c", u=0.7, x=0.3),
        # A failed trial may stop before its branch's parameters: not judged.
        made_trial(TrialState.FAIL, c="a"),
    ], client)
    assert left_out == {}
    by_name = {p["name"]: p for p in parameters}
    # Parents first: by how many trials hold each, then by name.
    assert [p["name"] for p in parameters] == ["c", "x", "u"]
    assert (by_name["u"]["parent"], by_name["u"]["parent_categories"]) == ("c", ["a", "c"])
    assert "parent" not in by_name["x"] and "parent" not in by_name["c"]


def test_a_parameter_nothing_decides_is_left_out(client: hypertune.Client) -> None:
    parameters, left_out = hypertune.optuna.infer_parameters([
        made_trial(c="a", x=0.9, y=0.5),  # y depends on x, not on c
        made_trial(c="a", x=0.1),
        made_trial(c="b", x=0.8, y=0.2),
        made_trial(z=0.5, c="b", x=0.3),
        made_trial(c="a", x=0.3),
    ], client)
    # In fewer than half the trials, and no parameter's values tell when:
    # the independent sampler samples them.
    assert [p["name"] for p in parameters] == ["c", "x"]
    assert set(left_out) == {"y", "z"}


def test_the_order_optuna_lists_parameters_in_does_not_matter(
    client: hypertune.Client,
) -> None:
    """Optuna's storage returns a trial's parameters by name: a child
    (forest_depth) before its parent (model)."""
    def trial(model: str, child: str, value: float) -> Any:
        params = {child: value, "model": model}
        distributions = {
            child: FloatDistribution(0.0, 10.0),
            "model": CategoricalDistribution(["forest", "svm"]),
        }
        return optuna.trial.create_trial(
            state=TrialState.COMPLETE, value=1.0, params=params, distributions=distributions)

    trials = [trial("forest", "forest_depth", 1.0 + i) if i % 2 == 0
              else trial("svm", "svm_c", 0.5 * i) for i in range(8)]
    parameters, left_out = hypertune.optuna.infer_parameters(trials, client)
    by_name = {p["name"]: p for p in parameters}
    assert left_out == {}
    assert by_name["forest_depth"]["parent_categories"] == ["forest"]
    assert by_name["svm_c"]["parent_categories"] == ["svm"]


# ----- Plain Optuna scripts -----


def test_optimize_converges_better_than_random(make_sampler: Any) -> None:
    trials = 30
    sampler = make_sampler()
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-bowl"))
    study.optimize(bowl, n_trials=trials)

    random_bests = []
    for seed in range(5):
        random = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
        random.optimize(bowl, n_trials=trials)
        random_bests.append(random.best_value)
    # The GP's best of 30 beats the best of each of 5 random searches of 30
    # (their bests: 0.37 to 2.5; the GP's: below 0.01 for seeds 3 to 6).
    assert study.best_value < min(random_bests), (study.best_value, random_bests)
    assert study.best_value < 0.3, study.best_params

    # Every trial after the startup ones was suggested by the study, all
    # are recorded with Optuna's values, and its best is Optuna's best.
    hypertune_study = sampler.hypertune_study.refresh()
    assert hypertune_study.spec.algorithm == hypertune.optuna.pb.GP_BANDIT
    # The server's order (service/rpc/optuna_space.h): by how many trials hold
    # a parameter, then the first trial holding it, then by name.
    assert [p.name for p in hypertune_study.spec.parameters] == ["activation", "lr", "n", "x"]
    assert hypertune_study.trial_counts == {"COMPLETED": trials}
    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(trials))
    for optuna_trial in study.trials:
        hypertune_trial = by_number[optuna_trial.number]
        assert hypertune_trial.state == "COMPLETED"
        assert hypertune_trial.metrics["value"] == pytest.approx(optuna_trial.value)
        assert_same_params(optuna_trial, hypertune_trial)
        assert set(hypertune_trial.params) == set(optuna_trial.params)
    best = hypertune_study.best()
    assert best is not None and best.value == pytest.approx(study.best_value)


def test_pruned_and_failed_trials_map_to_hypertune_states(make_sampler: Any) -> None:
    # What each Optuna trial does, by number: 0-4 are startup trials
    # (recorded once the study exists), 5-13 suggested by it, so that each
    # outcome is seen on both paths (a pruning before any report on the
    # second only).
    outcomes = ["value", "pruned", "raise", "nan", "inf",
                "pruned", "raise", "pruned early", "value", "pruned", "nan", "pruned early",
                "inf", "value"]

    def objective(trial: Any) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        outcome = outcomes[trial.number]
        if outcome == "pruned":  # after two intermediate values
            trial.report(x + 1.0, 0)
            trial.report(x + 0.5, 1)
            raise optuna.TrialPruned()
        if outcome == "pruned early":
            raise optuna.TrialPruned()
        for step in range(3):
            trial.report(x + 1.0 / (step + 1), step)
            if outcome == "raise":
                raise ValueError("a bug")
        return {"value": x, "nan": math.nan, "inf": math.inf}[outcome]

    sampler = make_sampler(startup_trials=5)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-prune"))
    study.optimize(objective, n_trials=len(outcomes), catch=(ValueError,))

    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(len(outcomes)))
    for optuna_trial in study.trials:
        hypertune_trial = by_number[optuna_trial.number]
        assert_same_params(optuna_trial, hypertune_trial)
        outcome = outcomes[optuna_trial.number]
        if outcome == "value":
            assert optuna_trial.state == TrialState.COMPLETE
            assert hypertune_trial.state == "COMPLETED"
            assert hypertune_trial.value == pytest.approx(optuna_trial.value)
        elif outcome in ("raise", "nan"):
            # Optuna's FAIL, whose cause the sampler is not told: FAILED,
            # left out of the model as Optuna's samplers leave FAIL out.
            assert optuna_trial.state == TrialState.FAIL
            assert hypertune_trial.state == "FAILED"
            assert hypertune_trial.failure_reason == hypertune.optuna.FAILED_REASON.format(
                number=optuna_trial.number)
        elif outcome == "inf":
            # Optuna completes it with an infinite value: the parameters
            # diverged, a region the optimizer steers away from.
            assert optuna_trial.state == TrialState.COMPLETE
            assert optuna_trial.value == math.inf
            assert hypertune_trial.state == "INFEASIBLE"
            assert "infinite" in hypertune_trial.infeasible_reason
        elif outcome == "pruned":
            assert optuna_trial.state == TrialState.PRUNED
            assert hypertune_trial.state == "STOPPED"
            assert hypertune_trial.value == pytest.approx(optuna_trial.params["x"] + 0.5)
            assert hypertune_trial.stop_reason
        else:
            assert optuna_trial.state == TrialState.PRUNED
            assert hypertune_trial.state == "STOPPED" and hypertune_trial.metrics == {}
        # The intermediate values are the trial's measurements (a FAILED or
        # INFEASIBLE trial keeps its curve); a startup trial is recorded
        # with its result only.
        if optuna_trial.number >= 5:
            steps = {m.step: m.metrics["value"] for m in hypertune_trial.measurements}
            assert steps == pytest.approx(optuna_trial.intermediate_values)
    counts = sampler.hypertune_study.refresh().trial_counts
    assert counts == {"COMPLETED": 3, "STOPPED": 5, "FAILED": 4, "INFEASIBLE": 2}


def test_define_by_run_branches_become_conditional_parameters(make_sampler: Any) -> None:
    def objective(trial: Any) -> float:
        model = trial.suggest_categorical("model", ["linear", "tree"])
        if model == "linear":
            alpha = trial.suggest_float("alpha", 1e-4, 1.0, log=True)
            return (math.log10(alpha) + 2) ** 2
        depth = trial.suggest_int("depth", 1, 12)
        return 0.5 + 0.1 * abs(depth - 6)

    sampler = make_sampler(startup_trials=6)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-branch"))
    study.optimize(objective, n_trials=20)
    startup = study.trials[:6]
    assert {t.params["model"] for t in startup} == {"linear", "tree"}, "the seed should see both"

    spec = {p.name: p for p in sampler.hypertune_study.refresh().spec.parameters}
    assert list(spec) == ["model", "alpha", "depth"] or list(spec) == ["model", "depth", "alpha"]
    assert (spec["alpha"].parent, list(spec["alpha"].parent_categories)) == ("model", ["linear"])
    assert (spec["depth"].parent, list(spec["depth"].parent_categories)) == ("model", ["tree"])
    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(20))
    for optuna_trial in study.trials:
        hypertune_trial = by_number[optuna_trial.number]
        # Each holds exactly the branch it ran, with Optuna's values.
        assert set(hypertune_trial.params) == set(optuna_trial.params)
        assert_same_params(optuna_trial, hypertune_trial)
        assert hypertune_trial.value == pytest.approx(optuna_trial.value)
    # Both branches keep being explored by hypertune's suggestions.
    suggested = {t.params["model"] for t in study.trials[6:]}
    assert suggested == {"linear", "tree"}


def test_a_parameter_new_after_the_study_was_made_still_works(make_sampler: Any) -> None:
    def objective(trial: Any) -> float:
        x = trial.suggest_float("x", 0.0, 1.0)
        if trial.number >= 5:
            return x + trial.suggest_float("late", 0.0, 1.0)
        return x

    sampler = make_sampler(startup_trials=2)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-late"))
    with pytest.warns(UserWarning, match="'late' was first asked for after"):
        study.optimize(objective, n_trials=8)

    assert [p.name for p in sampler.hypertune_study.spec.parameters] == ["x"]
    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(8))
    for optuna_trial in study.trials:
        assert optuna_trial.state == TrialState.COMPLETE
        hypertune_trial = by_number[optuna_trial.number]
        assert hypertune_trial.state == "COMPLETED"
        assert hypertune_trial.params["x"] == pytest.approx(optuna_trial.params["x"])
        other = hypertune_trial.attributes.get(hypertune.optuna.OTHER_PARAMS_ATTRIBUTE)
        if optuna_trial.number >= 5:
            # The value hypertune could not hold is kept beside the trial.
            assert other is not None
            assert json.loads(other) == {"late": optuna_trial.params["late"]}
        else:
            assert other is None


def pipeline(trial: Any) -> float:
    """A define-by-run objective whose branch parameter (model) sorts after
    one of its children (forest_depth)."""
    model = trial.suggest_categorical("model", ["forest", "svm"])
    lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
    if model == "forest":
        depth = trial.suggest_int("forest_depth", 2, 32)
        return abs(math.log10(lr) + 2) + abs(depth - 8) / 10
    c = trial.suggest_float("svm_c", 1e-3, 1e3, log=True)
    return abs(math.log10(lr) + 2) + abs(math.log10(c))


def test_an_existing_sqlite_study_keeps_every_trial(make_sampler: Any, tmp_path: Any) -> None:
    """Optuna's RDB storage returns a trial's parameters by name, not in
    the order the objective asked for them: the bridge opened on a study
    of 42 trials records all 42, the best one among them."""
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    name = unique_name("optuna-sqlite")
    first = optuna.create_study(
        study_name=name, storage=storage, sampler=optuna.samplers.RandomSampler(seed=11))
    first.optimize(pipeline, n_trials=42)
    best = first.best_trial.number
    sampler = make_sampler(study_name=name)
    study = optuna.load_study(study_name=name, storage=storage, sampler=sampler)
    study.optimize(pipeline, n_trials=1)
    by_number = recorded(sampler)
    assert set(range(42)) <= set(by_number), sorted(set(range(42)) - set(by_number))
    assert best in by_number
    spec = {p.name: p for p in sampler.hypertune_study.spec.parameters}
    assert (spec["forest_depth"].parent, list(spec["forest_depth"].parent_categories)) == (
        "model", ["forest"])
    assert (spec["svm_c"].parent, list(spec["svm_c"].parent_categories)) == ("model", ["svm"])
    for trial in study.get_trials(states=(TrialState.COMPLETE,))[:42]:
        assert_same_params(trial, by_number[trial.number])


def test_a_widened_distribution_widens_the_study(make_sampler: Any) -> None:
    def objective(trial: Any) -> float:
        wide = trial.number >= 4
        x = trial.suggest_float("x", 0.0, 3.0 if wide else 1.0)
        n = trial.suggest_int("n", 1, 8 if wide else 4)
        return abs(x - 2.5) + abs(n - 7)

    sampler = make_sampler(startup_trials=2)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-widen"))
    study.optimize(objective, n_trials=12)

    hypertune_study = sampler.hypertune_study.refresh()
    spec = {p.name: p for p in hypertune_study.spec.parameters}
    assert (spec["x"].double_spec.min, spec["x"].double_spec.max) == (0.0, 3.0)
    assert (spec["n"].integer_spec.min, spec["n"].integer_spec.max) == (1, 8)
    changed = [field.path for change in hypertune_study.changes for field in change.fields]
    assert changed.count("parameters") >= 2, "UpdateStudy records each widening"
    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(12))
    for optuna_trial in study.trials:
        assert_same_params(optuna_trial, by_number[optuna_trial.number])
    # hypertune suggests in the wider range once it is known.
    assert any(t.params["x"] > 1.0 or t.params["n"] > 4 for t in study.trials[5:])


def test_an_enqueued_trial_is_recorded_with_its_own_values(make_sampler: Any) -> None:
    sampler = make_sampler(startup_trials=2)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-enqueue"))
    study.optimize(bowl, n_trials=3)
    study.enqueue_trial({"x": 1.5, "lr": 1e-3, "n": 7, "activation": "relu"})
    study.optimize(bowl, n_trials=1)

    enqueued = study.trials[3]
    assert enqueued.value == pytest.approx(0.0)
    hypertune_trial = recorded(sampler)[3]
    assert hypertune_trial.state == "COMPLETED"
    assert_same_params(enqueued, hypertune_trial)
    # The suggestion Optuna did not run is given back, not counted as a result.
    failed = sampler.hypertune_study.trials("FAILED")
    assert len(failed) == 1 and "ran other values" in failed[0].failure_reason


def test_multi_objective_study_maps_to_hypertune_objectives(make_sampler: Any) -> None:
    def objective(trial: Any) -> tuple[float, float]:
        x = trial.suggest_float("x", 0.0, 1.0)
        y = trial.suggest_float("y", 0.0, 1.0)
        return x * x + y, (1 - x) ** 2 + y  # the front: y = 0

    sampler = make_sampler(startup_trials=3)
    study = optuna.create_study(
        sampler=sampler, study_name=unique_name("optuna-mo"), directions=["minimize", "minimize"]
    )
    study.optimize(objective, n_trials=12)

    hypertune_study = sampler.hypertune_study.refresh()
    assert hypertune_study.objectives == ["value_0", "value_1"]
    by_number = recorded(sampler)
    for optuna_trial in study.trials:
        metrics = by_number[optuna_trial.number].metrics
        assert [metrics["value_0"], metrics["value_1"]] == pytest.approx(optuna_trial.values)
    # Both sides agree on the Pareto front.
    front = {int(t.attributes[hypertune.optuna.TRIAL_NUMBER_ATTRIBUTE])
             for t in hypertune_study.optimal_trials()}
    assert front == {t.number for t in study.best_trials}


def test_a_second_process_continues_the_hypertune_study(make_sampler: Any, tmp_path: Any) -> None:
    # Optuna on its SQLite storage, as several processes share a study.
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    name = unique_name("optuna-continue")
    study = optuna.create_study(
        sampler=make_sampler(startup_trials=2), study_name=name, storage=storage
    )
    study.optimize(bowl, n_trials=4)
    # A new process: a new sampler on the stored Optuna study.
    second = make_sampler(startup_trials=2)
    again = optuna.load_study(study_name=name, storage=storage, sampler=second)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left out or recorded twice
        again.optimize(bowl, n_trials=3)
    by_number = recorded(second)
    assert sorted(by_number) == list(range(7))
    for optuna_trial in again.trials:
        assert_same_params(optuna_trial, by_number[optuna_trial.number])
    assert second.hypertune_study.refresh().trial_counts == {"COMPLETED": 7}


def test_parallel_jobs_each_get_a_trial_of_their_own(make_sampler: Any) -> None:
    def objective(trial: Any) -> float:
        value = bowl(trial)
        if trial.number % 5 == 4:
            raise optuna.TrialPruned()
        return value

    sampler = make_sampler(startup_trials=4)
    study = optuna.create_study(sampler=sampler, study_name=unique_name("optuna-jobs"))
    study.optimize(objective, n_trials=24, n_jobs=4)

    by_number = recorded(sampler)
    assert sorted(by_number) == list(range(24))
    for optuna_trial in study.trials:
        hypertune_trial = by_number[optuna_trial.number]
        assert_same_params(optuna_trial, hypertune_trial)
        expected = "COMPLETED" if optuna_trial.state == TrialState.COMPLETE else "STOPPED"
        assert hypertune_trial.state == expected
    assert not sampler.hypertune_study.trials(["ACTIVE", "REQUESTED"])


def test_a_study_name_hypertune_refuses_is_named(make_sampler: Any) -> None:
    study = optuna.create_study(sampler=make_sampler(startup_trials=1), study_name="my study")
    with pytest.raises(hypertune.InvalidArgumentError, match="pass study_name="):
        study.optimize(bowl, n_trials=2)


def test_a_bad_algorithm_is_refused_by_name() -> None:
    with pytest.raises(hypertune.InvalidArgumentError, match="algorithm"):
        hypertune.optuna.Sampler(server="127.0.0.1:1", algorithm="CMA")
    with pytest.raises(hypertune.InvalidArgumentError, match="startup_trials"):
        hypertune.optuna.Sampler(server="127.0.0.1:1", startup_trials=0)
