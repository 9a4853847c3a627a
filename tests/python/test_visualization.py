"""hypertune.visualization against a real hypertuned (started with its
HTTP API, for the server's importances): small studies run with
suggest/report/complete, then each plot's figure is checked for what it
draws: its axes, the number of points and lines, the axis labels, log
axes for LOG parameters, categorical ticks, and the Pareto front's points
being the study's optimal trials. Headless: matplotlib's Agg backend."""

from __future__ import annotations

import io
import math
import os
import random
import subprocess
import sys
from typing import Iterator

import pytest

matplotlib = pytest.importorskip("matplotlib", reason="needs matplotlib (python3-matplotlib)")
matplotlib.use("Agg")

import hypertune  # noqa: E402
from hypertune import visualization  # noqa: E402
from helpers import ROOT, unique_name  # noqa: E402
from hypertuned_process import Hypertuned, free_port  # noqa: E402

TRIALS = 12
STEPS = 3
OPTIMIZERS = ["sgd", "adam", "rmsprop"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hypertuned]:
    """The module's hypertuned, with its HTTP API on a loopback port (this
    replaces conftest's fixture of the same name)."""
    port = free_port()
    with Hypertuned(str(tmp_path_factory.mktemp("hypertuned")),
                    ["--http", f"127.0.0.1:{port}"]) as running:
        running.http = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield running


@pytest.fixture(scope="module")
def module_client(server: Hypertuned) -> Iterator[hypertune.Client]:
    with hypertune.Client(server.address) as connected:
        yield connected


def loss_of(params: dict) -> float:
    # lr matters most (the loss grows with its log, over [0, 4]), the
    # optimizer a little, the rest not at all.
    return math.log10(params["lr"]) + 4.0 + OPTIMIZERS.index(params["optimizer"]) * 0.1


@pytest.fixture(scope="module")
def tuned(module_client: hypertune.Client) -> hypertune.Study:
    """A study with a LOG, a CATEGORICAL, an INTEGER and a conditional
    parameter (momentum, only for sgd): TRIALS trials with STEPS
    measurements each, of which the last is marked INFEASIBLE (excluded
    from the plots) and the rest COMPLETED."""
    study = module_client.create_study({
        "name": unique_name("plots"),
        "spec": {
            "parameters": [
                {"name": "lr", "double_spec": {"min": 1e-4, "max": 1.0, "scale": "LOG"}},
                {"name": "optimizer", "categorical_spec": {"values": OPTIMIZERS}},
                {"name": "layers", "integer_spec": {"min": 1, "max": 4}},
                {"name": "momentum", "double_spec": {"min": 0.0, "max": 0.99},
                 "parent": "optimizer", "parent_categories": ["sgd"]},
            ],
            "metrics": [{"name": "loss", "goal": "MINIMIZE"}],
            "algorithm": "RANDOM",
            "seed": 11,
        },
    })
    for number in range(TRIALS):
        trial = study.suggest()[0]
        loss = loss_of(trial.params)
        for step in range(1, STEPS + 1):
            trial.report(step, loss=loss + 1.0 / step)
        if number == TRIALS - 1:
            trial.infeasible("out of memory")
        else:
            trial.complete(loss=loss)
    return study


def points(ax, gid: str = "trials") -> int:
    """The number of points in ``ax``'s scatter with that gid."""
    found = [c for c in ax.collections if c.get_gid() == gid]
    return sum(len(c.get_offsets()) for c in found)


def visible_axes(fig) -> list:
    return [ax for ax in fig.axes if ax.get_visible()]


def test_history_plots_each_completed_trial_and_the_best_so_far(tuned):
    fig = visualization.plot_optimization_history(tuned)
    assert isinstance(fig, matplotlib.figure.Figure)
    ax, = fig.axes
    completed = tuned.trials("COMPLETED")
    assert points(ax) == len(completed) == TRIALS - 1  # the INFEASIBLE one left out
    best, = [line for line in ax.lines if line.get_label() == "best so far"]
    bests = list(best.get_ydata())
    assert bests == sorted(bests, reverse=True)  # minimized: never rises
    assert bests[-1] == pytest.approx(tuned.best().value)
    assert ax.get_xlabel() == "trial" and ax.get_ylabel() == "loss"
    fig.savefig(io.BytesIO(), format="png")  # renders headless


def test_intermediate_values_draw_one_curve_per_trial_not_infeasible_ones(tuned):
    fig = visualization.plot_intermediate_values(tuned)
    ax, = fig.axes
    assert len(ax.lines) == TRIALS - 1
    for line in ax.lines:
        assert list(line.get_xdata()) == list(range(1, STEPS + 1))
    assert ax.get_xlabel() == "step" and ax.get_ylabel() == "loss"


def test_parallel_coordinate_breaks_lines_where_a_parameter_is_absent(tuned):
    fig = visualization.plot_parallel_coordinate(tuned)
    ax = fig.axes[0]
    assert len(fig.axes) == 2  # the plot and its colour bar
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "loss", "lr", "optimizer", "layers", "momentum"]
    trial_lines = [line for line in ax.lines if (line.get_gid() or "").startswith("trial ")]
    assert len(trial_lines) == TRIALS - 1
    completed = {t.id: t for t in tuned.trials("COMPLETED")}
    for line in trial_lines:
        trial = completed[int(line.get_gid().split()[1])]
        momentum = line.get_ydata()[4]
        assert math.isnan(momentum) == ("momentum" not in trial.params)
    labels = {text.get_text().strip() for text in ax.texts}
    assert set(OPTIMIZERS) & labels  # the categorical axis names its categories


def test_contour_grid_has_one_panel_per_pair_with_log_and_categorical_axes(tuned):
    fig = visualization.plot_contour(tuned, ["lr", "layers", "optimizer"])
    panels = [ax for ax in visible_axes(fig) if ax.get_label() != "<colorbar>"]
    assert len(panels) == 3  # (lr, layers), (lr, optimizer), (layers, optimizer)
    by_labels = {(ax.get_xlabel(), ax.get_ylabel()): ax for ax in panels}
    assert set(by_labels) == {("lr", "layers"), ("lr", "optimizer"), ("layers", "optimizer")}
    lr_layers = by_labels[("lr", "layers")]
    assert lr_layers.get_xscale() == "log" and lr_layers.get_yscale() == "linear"
    assert points(lr_layers) == TRIALS - 1
    # Two numeric parameters and enough trials: interpolated contours too.
    assert any(c.get_gid() != "trials" for c in lr_layers.collections)
    lr_optimizer = by_labels[("lr", "optimizer")]
    assert [t.get_text() for t in lr_optimizer.get_yticklabels()] == OPTIMIZERS
    assert all(c.get_gid() == "trials" for c in lr_optimizer.collections)  # scatter only


def test_contour_leaves_out_trials_without_a_conditional_parameter(tuned):
    fig = visualization.plot_contour(tuned, ["lr", "momentum"], kind="scatter")
    ax = fig.axes[0]
    with_momentum = [t for t in tuned.trials("COMPLETED") if "momentum" in t.params]
    assert points(ax) == len(with_momentum)
    assert ax.get_xscale() == "log"
    with pytest.raises(ValueError, match="categorical"):
        visualization.plot_contour(tuned, ["lr", "optimizer"], kind="interpolate")


def test_slice_has_a_panel_per_parameter(tuned):
    fig = visualization.plot_slice(tuned)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert [ax.get_xlabel() for ax in panels] == ["lr", "optimizer", "layers", "momentum"]
    assert panels[0].get_xscale() == "log"
    assert panels[0].get_ylabel() == "loss"
    assert [points(ax) for ax in panels[:3]] == [TRIALS - 1] * 3
    assert points(panels[3]) == sum("momentum" in t.params for t in tuned.trials("COMPLETED"))
    assert [t.get_text() for t in panels[1].get_xticklabels()] == OPTIMIZERS


def test_importances_computed_in_python_rank_the_parameter_that_matters(tuned):
    importances = visualization.python_importances(tuned)
    assert set(importances) == {"lr", "optimizer", "layers", "momentum"}
    assert all(0.0 <= v <= 1.0 for v in importances.values())
    assert max(importances, key=importances.get) == "lr"
    fig = visualization.plot_param_importances(tuned)
    ax, = fig.axes
    bars = {t.get_text(): bar.get_width()
            for t, bar in zip(ax.get_yticklabels(), ax.patches)}
    assert bars == pytest.approx(importances)
    assert "Python" in ax.get_title()


def test_importances_from_the_server_are_its_fanova(server, tuned):
    fig = visualization.plot_param_importances(tuned, http=server.http)
    ax, = fig.axes
    bars = {t.get_text(): bar.get_width() for t, bar in zip(ax.get_yticklabels(), ax.patches)}
    assert set(bars) == {"lr", "optimizer", "layers", "momentum"}
    assert max(bars, key=bars.get) == "lr"
    assert "fANOVA" in ax.get_title()
    with pytest.raises(ValueError, match="no metric"):
        visualization.plot_param_importances(tuned, target="accuracy", http=server.http)


def test_a_study_without_completed_trials_is_a_value_error(module_client):
    study = module_client.create_study({
        "name": unique_name("empty"),
        "spec": {"parameters": [{"name": "x", "double_spec": {"min": 0, "max": 1}},
                                {"name": "y", "double_spec": {"min": 0, "max": 1}}],
                 "metrics": [{"name": "loss", "goal": "MINIMIZE"}], "algorithm": "RANDOM"},
    })
    study.suggest()[0].infeasible("diverged")
    for plot in (visualization.plot_optimization_history, visualization.plot_parallel_coordinate,
                 visualization.plot_contour, visualization.plot_slice,
                 visualization.plot_param_importances):
        with pytest.raises(ValueError, match="no COMPLETED trial"):
            plot(study)
    with pytest.raises(ValueError, match="no intermediate measurements"):
        visualization.plot_intermediate_values(study)


@pytest.fixture(scope="module")
def multi_objective(module_client: hypertune.Client) -> hypertune.Study:
    """Three minimized objectives (error against latency, and memory): ten
    COMPLETED trials."""
    study = module_client.create_study({
        "name": unique_name("pareto"),
        "spec": {
            "parameters": [{"name": "width", "double_spec": {"min": 0.0, "max": 1.0}}],
            "metrics": [
                {"name": "error", "goal": "MINIMIZE", "role": "OBJECTIVE"},
                {"name": "latency", "goal": "MINIMIZE", "role": "OBJECTIVE"},
                {"name": "memory", "goal": "MINIMIZE", "role": "OBJECTIVE"},
            ],
            "algorithm": "RANDOM",
            "seed": 5,
        },
    })
    noise = random.Random(3)
    for _ in range(10):
        trial = study.suggest()[0]
        width = trial.params["width"]
        trial.complete(error=1.0 - width + noise.uniform(0, 0.3),
                       latency=width + noise.uniform(0, 0.3), memory=noise.uniform(0, 1))
    return study


def test_pareto_front_highlights_the_optimal_trials(multi_objective):
    optimal = multi_objective.optimal_trials()
    fig = visualization.plot_pareto_front(multi_objective, targets=["error", "latency"])
    ax, = fig.axes
    assert ax.get_xlabel() == "error" and ax.get_ylabel() == "latency"
    assert points(ax, "pareto") == len(optimal)
    assert points(ax, "pareto") + points(ax, "trials") == 10
    pareto = {tuple(p) for c in ax.collections if c.get_gid() == "pareto" for p in c.get_offsets()}
    assert pareto == {(t.metrics["error"], t.metrics["latency"]) for t in optimal}


def test_three_objectives_make_a_3d_plot(multi_objective):
    fig = visualization.plot_pareto_front(multi_objective)
    ax, = fig.axes
    assert ax.name == "3d"
    assert ax.get_zlabel() == "memory"
    assert points(ax, "pareto") == len(multi_objective.optimal_trials())
    assert points(ax, "pareto") + points(ax, "trials") == 10


def test_several_objectives_need_a_target(multi_objective):
    with pytest.raises(ValueError, match="several objectives"):
        visualization.plot_optimization_history(multi_objective)
    fig = visualization.plot_optimization_history(multi_objective, target="latency")
    assert fig.axes[0].get_ylabel() == "latency"
    with pytest.raises(ValueError, match="2 or 3"):
        visualization.plot_pareto_front(multi_objective, targets=["error"])


def child_env() -> dict:
    """The environment of a child python3 that imports this package."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))


def test_import_hypertune_does_not_import_matplotlib():
    code = "import sys, hypertune, hypertune.visualization; print('matplotlib' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=child_env(), check=True)
    assert result.stdout.strip() == "False"


def test_epsilon_squared_closed_form():
    """Two categories whose means differ and no spread within: all of the
    variance is the parameter's (SSB = SST = 4, SSW = 0: 1). Equal means: none
    of it (SSB = 0: the correction makes it negative, clipped to 0)."""
    category = visualization._Param("c", categories=("a", "b"))
    assert visualization._epsilon_squared(
        category, [("a", 1.0), ("a", 1.0), ("b", 3.0), ("b", 3.0)]) == pytest.approx(1.0)
    assert visualization._epsilon_squared(
        category, [("a", 1.0), ("a", 3.0), ("b", 1.0), ("b", 3.0)]) == 0.0
    # a: 1, 2 (mean 1.5); b: 3, 4 (mean 3.5); overall mean 2.5: SST = 5,
    # SSB = 4, SSW = 1 over n - k = 2: (4 - 1 * 0.5) / 5 = 0.7.
    assert visualization._epsilon_squared(
        category, [("a", 1.0), ("a", 2.0), ("b", 3.0), ("b", 4.0)]) == pytest.approx(0.7)


def test_plot_example_saves_every_plot(server, tmp_path):
    """examples/python/plot_study.py, run as a newcomer would, against this
    module's server (the importance from its HTTP API)."""
    out = tmp_path / "plots"
    result = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "python", "plot_study.py"),
         "--server", server.address, "--http", server.http, "--out", str(out),
         "--trials", "8"],
        capture_output=True, text=True, env=child_env(), timeout=120)
    assert result.returncode == 0, result.stderr
    names = ["history", "intermediate", "parallel", "contour", "slice", "importance", "pareto"]
    assert sorted(os.listdir(out)) == sorted(f"{name}.png" for name in names)
    for name in names:
        assert (out / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
