"""Plots of a study for notebooks: each function takes a
:class:`hypertune.Study` and returns a matplotlib ``Figure``.

    from hypertune import visualization
    fig = visualization.plot_optimization_history(study)
    fig.savefig("history.png")               # or leave it last in a notebook cell

matplotlib (Debian: python3-matplotlib) is imported only when a plot is
made, so ``import hypertune`` does not need it. The figures are built with
matplotlib's object API (``matplotlib.figure.Figure``), never pyplot's
global state: they work headless (the Agg backend) and do not pile up in
pyplot's list of open figures.

What is plotted:

* Final values come from COMPLETED trials only; FAILED, INFEASIBLE,
  STOPPED (early-stopped), and unfinished trials are left out, and so is a
  trial without a finite value of the metric plotted. Learning curves
  (:func:`plot_intermediate_values`) also show running and early-stopped
  trials, never FAILED or INFEASIBLE ones.
* A COMPLETED trial that misses the study's constraints (``feasible`` is
  False) is drawn in grey and never counts as the best.
* A conditional parameter absent from a trial leaves that trial out of the
  panels of that parameter (a gap in the parallel-coordinate line).
* A CATEGORICAL parameter gets a categorical axis (one tick per category,
  in the spec's order); a LOG-scaled one a logarithmic axis.
* A study with nothing to plot raises ``ValueError`` saying so (rather than
  returning an empty figure that looks like a bug).
* Several objectives: the single-metric plots need ``target=`` (a metric
  name); :func:`plot_pareto_front` plots them together.

The scatter of trials in each panel carries the gid ``"trials"`` (the
Pareto front's optimal ones ``"pareto"``, infeasible ones ``"infeasible"``),
so that code and tests can find the points among contour fills.
"""

from __future__ import annotations

import json
import math
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

from hypertune._proto import pb

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from hypertune.study import Study
    from hypertune.trial import Trial

# Below this many points a pair of parameters is drawn as a scatter only:
# a triangulation of fewer points interpolates next to nothing.
_MIN_INTERPOLATED_POINTS = 4
# Learning curves get a legend only up to this many trials.
_MAX_LEGEND_TRIALS = 10
# The numeric bins of the Python importance: at most this many.
_MAX_IMPORTANCE_BINS = 10

__all__ = [
    "plot_contour",
    "plot_intermediate_values",
    "plot_optimization_history",
    "plot_parallel_coordinate",
    "plot_param_importances",
    "plot_pareto_front",
    "plot_slice",
    "python_importances",
]


def _figure(width: float = 6.4, height: float = 4.8) -> Figure:
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise ImportError(
            "hypertune.visualization needs matplotlib (apt-get install python3-matplotlib)"
        ) from None
    return Figure(figsize=(width, height), layout="constrained")


@dataclass(frozen=True)
class _Param:
    """How a parameter is drawn: its name, its categories (CATEGORICAL:
    drawn at positions 0..K-1), and whether its axis is logarithmic."""

    name: str
    categories: tuple[str, ...] = ()
    log: bool = False

    @property
    def categorical(self) -> bool:
        return bool(self.categories)

    def position(self, value: Any) -> float:
        """Where ``value`` goes on this parameter's axis (data coordinates)."""
        if self.categorical:
            return float(self.categories.index(value))
        return float(value)

    def linear(self, value: Any) -> float:
        """``value`` where the axis is linear: log10 for a LOG parameter,
        the category's index for a CATEGORICAL one."""
        position = self.position(value)
        return math.log10(position) if self.log else position

    def dress(self, ax: Axes, axis: str) -> None:
        """Labels ``ax``'s ``axis`` ("x" or "y") for this parameter: the
        name, log scale or one tick per category."""
        getattr(ax, f"set_{axis}label")(self.name)
        if self.log:
            getattr(ax, f"set_{axis}scale")("log")
        if self.categorical:
            getattr(ax, f"set_{axis}ticks")(range(len(self.categories)))
            getattr(ax, f"set_{axis}ticklabels")(self.categories)


def _param(spec: pb.ParameterSpec) -> _Param:
    kind = spec.WhichOneof("kind")
    if kind == "categorical_spec":
        return _Param(spec.name, categories=tuple(spec.categorical_spec.values))
    if kind == "double_spec":
        return _Param(spec.name, log=spec.double_spec.scale == pb.LOG)
    if kind == "integer_spec":
        return _Param(spec.name, log=spec.integer_spec.scale == pb.LOG)
    return _Param(spec.name)


def _params(study: Study, names: Optional[Sequence[str]]) -> list[_Param]:
    """The parameters to plot: ``names`` (checked against the spec), else
    all of them in the spec's order."""
    known = {p.name: _param(p) for p in study.spec.parameters}
    if names is None:
        return list(known.values())
    if isinstance(names, str):
        names = [names]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(
            "params: unknown parameter " + ", ".join(repr(n) for n in unknown)
            + f" of study {study.name!r}; its parameters are " + ", ".join(known)
        )
    return [known[n] for n in names]


def _target(study: Study, target: Optional[str]) -> str:
    """The metric to plot: ``target``, else the study's only objective."""
    if target is not None:
        metrics = [m.name for m in study.spec.metrics]
        if target not in metrics:
            raise ValueError(
                f"target: study {study.name!r} has no metric {target!r}; its metrics are "
                + ", ".join(metrics)
            )
        return target
    objectives = study.objectives
    if len(objectives) != 1:
        raise ValueError(
            f"target: study {study.name!r} has several objectives ("
            + ", ".join(objectives)
            + "); name the one to plot, e.g. target=" + repr(objectives[0])
        )
    return objectives[0]


def _maximized(study: Study, metric: str) -> bool:
    for spec in study.spec.metrics:
        if spec.name == metric:
            return spec.goal == pb.MetricSpec.MAXIMIZE
    return False


def _value(trial: Trial, metric: str) -> Optional[float]:
    value = trial.metrics.get(metric)
    return value if value is not None and math.isfinite(value) else None


def _completed(study: Study, metric: str) -> list[tuple[Trial, float]]:
    """The COMPLETED trials with a finite value of ``metric``, by id, with
    that value; ValueError when there are none."""
    found = [(t, v) for t in study.trials("COMPLETED") if (v := _value(t, metric)) is not None]
    if not found:
        raise ValueError(
            f"study {study.name!r} has no COMPLETED trial with a value of {metric!r} to plot"
        )
    return found


def _infeasible(trial: Trial) -> bool:
    return trial.feasible is False


# ----- History -----


def plot_optimization_history(study: Study, *, target: Optional[str] = None) -> Figure:
    """Each COMPLETED trial's value of ``target`` (default: the study's
    objective; required with several objectives) by trial id, and the best
    value so far (the goal's direction; feasible trials only) as a step
    line."""
    metric = _target(study, target)
    maximize = _maximized(study, metric)
    trials = _completed(study, metric)
    fig = _figure()
    ax = fig.add_subplot()
    feasible = [(t, v) for t, v in trials if not _infeasible(t)]
    infeasible = [(t, v) for t, v in trials if _infeasible(t)]
    points = ax.scatter([t.id for t, _ in feasible], [v for _, v in feasible],
                        s=18, color="tab:blue", label=metric, zorder=3)
    points.set_gid("trials")
    if infeasible:
        grey = ax.scatter([t.id for t, _ in infeasible], [v for _, v in infeasible],
                          s=18, color="0.6", marker="x", label="infeasible", zorder=3)
        grey.set_gid("infeasible")
    if feasible:
        best, ids, bests = None, [], []
        for trial, value in feasible:
            if best is None or (value > best if maximize else value < best):
                best = value
            ids.append(trial.id)
            bests.append(best)
        ax.step(ids, bests, where="post", color="tab:red", label="best so far")
    ax.set_xlabel("trial")
    ax.set_ylabel(metric)
    ax.set_title(f"Optimization history of {study.name}")
    ax.legend()
    return fig


def plot_intermediate_values(study: Study, *, target: Optional[str] = None) -> Figure:
    """The learning curves: each trial's intermediate measurements of
    ``target`` (default: the objective) by step, one line per trial, for
    trials in any state but FAILED and INFEASIBLE. ValueError when no trial
    reported that metric."""
    metric = _target(study, target)
    curves = []
    for trial in study.trials():
        if trial.state in ("FAILED", "INFEASIBLE"):
            continue
        points = [(m.step, m.metrics[metric]) for m in trial.measurements
                  if metric in m.metrics and math.isfinite(m.metrics[metric])]
        if points:
            curves.append((trial, points))
    if not curves:
        raise ValueError(
            f"study {study.name!r} has no intermediate measurements of {metric!r} to plot"
        )
    fig = _figure()
    ax = fig.add_subplot()
    for trial, points in curves:
        ax.plot([s for s, _ in points], [v for _, v in points], marker=".",
                label=f"trial {trial.id} ({trial.state.lower()})")
    ax.set_xlabel("step")
    ax.set_ylabel(metric)
    ax.set_title(f"Intermediate values of {study.name}")
    if len(curves) <= _MAX_LEGEND_TRIALS:
        ax.legend(fontsize="small")
    return fig


# ----- Parameters against the value -----


def _colour_norm(values: Sequence[float]) -> Any:
    from matplotlib.colors import Normalize

    low, high = min(values), max(values)
    return Normalize(low, high if high > low else low + 1.0)


def _colour_map(study: Study, metric: str) -> str:
    # Dark is good: the eye goes to the best trials.
    return "viridis" if _maximized(study, metric) else "viridis_r"


def plot_parallel_coordinate(
    study: Study, *, params: Optional[Sequence[str]] = None, target: Optional[str] = None
) -> Figure:
    """One vertical axis for ``target`` (default: the objective) and one per
    parameter (default: all), each scaled to its range over the plotted
    trials (log for LOG parameters, categories evenly spaced); each
    COMPLETED trial is a line across them coloured by its value, broken
    where a conditional parameter is absent."""
    from matplotlib import cm, colormaps

    metric = _target(study, target)
    trials = _completed(study, metric)
    chosen = _params(study, params)
    columns = [[v for _, v in trials]]
    for param in chosen:
        columns.append([param.linear(t.params[param.name]) if param.name in t.params else None
                        for t, _ in trials])

    def scale(column: list[Optional[float]]) -> tuple[float, float]:
        present = [x for x in column if x is not None]
        if not present:
            return 0.0, 1.0
        low, high = min(present), max(present)
        return low, (high if high > low else low + 1.0)

    ranges = [scale(c) for c in columns]
    norm = _colour_norm(columns[0])
    colours = colormaps[_colour_map(study, metric)]
    fig = _figure(max(6.4, 1.6 * len(columns)), 4.8)
    ax = fig.add_subplot()
    xs = list(range(len(columns)))
    for row, (trial, value) in enumerate(trials):
        ys = []
        for column, (low, high) in zip(columns, ranges):
            x = column[row]
            ys.append(math.nan if x is None else (x - low) / (high - low))
        line, = ax.plot(xs, ys, color=colours(norm(value)), alpha=0.8, linewidth=1.2)
        line.set_gid(f"trial {trial.id}")
    ax.vlines(xs, 0.0, 1.0, colors="0.3", linewidth=0.8)
    # Each axis's own range, written beside it: the y axis itself is [0, 1].
    names = [metric] + [p.name for p in chosen]
    for x, (low, high), param in zip(xs, ranges, [None, *chosen]):
        if param is not None and param.categorical:
            for index, category in enumerate(param.categories):
                if low <= index <= high:
                    ax.text(x, (index - low) / (high - low), f" {category}", fontsize="small",
                            va="center")
            continue
        shown = (lambda y: 10.0 ** y) if param is not None and param.log else (lambda y: y)
        ax.text(x, 0.0, f" {shown(low):.3g}", fontsize="small", va="top")
        ax.text(x, 1.0, f" {shown(high):.3g}", fontsize="small", va="bottom")
    ax.set_xticks(xs)
    ax.set_xticklabels(names)
    ax.set_yticks([])
    ax.set_xlim(-0.2, len(columns) - 0.6)
    ax.set_title(f"Parallel coordinates of {study.name}")
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=colours), ax=ax, label=metric)
    return fig


def _scatter(ax: Axes, xs: list, ys: list, values: list, study: Study, metric: str,
             norm: Any, gid: str = "trials") -> Any:
    points = ax.scatter(xs, ys, c=values, cmap=_colour_map(study, metric), norm=norm,
                        s=22, edgecolors="0.2", linewidths=0.4, zorder=3)
    points.set_gid(gid)
    return points


def _contour_panel(ax: Axes, x: _Param, y: _Param, trials: list[tuple[Trial, float]],
                   study: Study, metric: str, norm: Any, kind: str) -> None:
    pairs = [(t.params[x.name], t.params[y.name], v) for t, v in trials
             if x.name in t.params and y.name in t.params]
    xs = [x.position(a) for a, _, _ in pairs]
    ys = [y.position(b) for _, b, _ in pairs]
    values = [v for _, _, v in pairs]
    numeric = not x.categorical and not y.categorical
    if kind == "interpolate" and not numeric:
        raise ValueError(
            f"kind: interpolating needs numeric parameters; {x.name!r} or {y.name!r} is "
            'categorical (use kind="scatter" or "auto")'
        )
    if kind != "scatter" and numeric and len(pairs) >= _MIN_INTERPOLATED_POINTS:
        from matplotlib.tri import Triangulation

        try:
            # Triangulated where the axes are linear (log space for LOG
            # parameters), so that the triangles look sane on the plot.
            flat = Triangulation([x.linear(a) for a, _, _ in pairs],
                                 [y.linear(b) for _, b, _ in pairs])
            ax.tricontourf(Triangulation(xs, ys, flat.triangles), values, levels=12,
                           cmap=_colour_map(study, metric), norm=norm, alpha=0.75)
        except (RuntimeError, ValueError):
            if kind == "interpolate":
                raise ValueError(
                    f"kind: cannot interpolate {x.name!r} x {y.name!r}: the points are "
                    "collinear or repeated"
                ) from None
    _scatter(ax, xs, ys, values, study, metric, norm)
    x.dress(ax, "x")
    y.dress(ax, "y")


def plot_contour(
    study: Study,
    params: Optional[Sequence[str]] = None,
    *,
    target: Optional[str] = None,
    kind: str = "auto",
) -> Figure:
    """``target`` (default: the objective) over pairs of ``params``
    (default: all, at least two): one panel for two parameters, else the
    lower triangle of a grid, one panel per pair.

    ``kind``: ``"scatter"`` draws the trials coloured by value;
    ``"interpolate"`` fills the contours of a linear interpolation between
    them (matplotlib's triangulation) under the scatter, and refuses a
    categorical parameter; ``"auto"`` (default) interpolates pairs of
    numeric parameters with at least 4 trials and scatters the rest. LOG
    parameters get log axes (interpolated in log space), CATEGORICAL ones
    categorical axes; a trial lacking a conditional parameter is left out of
    its panels."""
    if kind not in ("auto", "scatter", "interpolate"):
        raise ValueError(f'kind: expected "auto", "scatter" or "interpolate", got {kind!r}')
    metric = _target(study, target)
    chosen = _params(study, params)
    if len(chosen) < 2:
        raise ValueError(f"params: a contour plot needs two parameters, got {len(chosen)}")
    trials = _completed(study, metric)
    norm = _colour_norm([v for _, v in trials])
    size = len(chosen) - 1
    fig = _figure(max(6.4, 3.2 * size), max(4.8, 3.0 * size))
    grid = fig.subplots(size, size, squeeze=False)
    for row in range(size):
        for col in range(size):
            ax = grid[row][col]
            if col > row:
                ax.set_visible(False)
                continue
            _contour_panel(ax, chosen[col], chosen[row + 1], trials, study, metric, norm, kind)
    from matplotlib import cm

    visible = [ax for line in grid for ax in line if ax.get_visible()]
    fig.colorbar(cm.ScalarMappable(norm=norm, cmap=_colour_map(study, metric)), ax=visible,
                 label=metric)
    fig.suptitle(f"Contour of {study.name}")
    return fig


def plot_slice(
    study: Study, params: Optional[Sequence[str]] = None, *, target: Optional[str] = None
) -> Figure:
    """One panel per parameter (default: all): ``target`` (default: the
    objective) against the parameter's value, each COMPLETED trial a point
    coloured by its id (later trials darker), on log axes for LOG and
    categorical axes for CATEGORICAL parameters."""
    from matplotlib import cm

    metric = _target(study, target)
    chosen = _params(study, params)
    trials = _completed(study, metric)
    order = _colour_norm([t.id for t, _ in trials])
    fig = _figure(max(6.4, 3.0 * len(chosen)), 4.0)
    panels = fig.subplots(1, len(chosen), squeeze=False, sharey=True)[0]
    for ax, param in zip(panels, chosen):
        present = [(t, v) for t, v in trials if param.name in t.params]
        points = ax.scatter([param.position(t.params[param.name]) for t, _ in present],
                            [v for _, v in present], c=[t.id for t, _ in present],
                            cmap="Blues", norm=order, s=22, edgecolors="0.2", linewidths=0.4)
        points.set_gid("trials")
        param.dress(ax, "x")
    panels[0].set_ylabel(metric)
    fig.colorbar(cm.ScalarMappable(norm=order, cmap="Blues"), ax=list(panels), label="trial")
    fig.suptitle(f"Slice plot of {study.name}")
    return fig


# ----- Importance -----


def python_importances(study: Study, *, target: Optional[str] = None) -> dict[str, float]:
    """Each parameter's importance computed here, without the server: the
    share of the variance of ``target`` (default: the objective) over the
    COMPLETED trials that the parameter, binned, explains.

    For parameter i, the trials holding it are grouped by its value: one
    group per category (CATEGORICAL), else up to ``min(10, sqrt(n))`` bins of
    equal count in its linear space (log space for LOG). With group means
    ``m_g``, sizes ``n_g``, ``k`` groups, overall mean ``m`` and n values::

        SSB = sum_g n_g (m_g - m)^2        SST = sum (y - m)^2
        importance_i = max(0, (SSB - (k - 1) * (SST - SSB) / (n - k)) / SST)

    Kelley's epsilon squared, the correlation ratio eta^2 = SSB / SST
    corrected for the share that k groups explain by chance (a parameter
    that does nothing scores near 0, not ~k/n). In [0, 1]; the values need
    not sum to 1 (interactions are not counted). A parameter with fewer than
    3 trials, a single group, or trials that all have the same value scores
    0. Coarser than the server's fANOVA (see :func:`plot_param_importances`)
    and blind to interactions, but needs nothing installed.
    """
    metric = _target(study, target)
    trials = _completed(study, metric)
    importances: dict[str, float] = {}
    for param in _params(study, None):
        present = [(t.params[param.name], v) for t, v in trials if param.name in t.params]
        importances[param.name] = _epsilon_squared(param, present)
    return importances


def _epsilon_squared(param: _Param, present: list[tuple[Any, float]]) -> float:
    n = len(present)
    if n < 3:
        return 0.0
    if param.categorical:
        keys = [param.categories.index(x) for x, _ in present]
    else:
        # Equal-count bins by rank; equal values share a bin.
        bins = max(2, min(_MAX_IMPORTANCE_BINS, int(math.sqrt(n))))
        ranked = sorted(range(n), key=lambda i: param.linear(present[i][0]))
        keys = [0] * n
        previous_x, previous_key = None, 0
        for rank, i in enumerate(ranked):
            x = param.linear(present[i][0])
            keys[i] = previous_key if x == previous_x else rank * bins // n
            previous_x, previous_key = x, keys[i]
    groups: dict[int, list[float]] = {}
    for key, (_, y) in zip(keys, present):
        groups.setdefault(key, []).append(y)
    k = len(groups)
    mean = sum(y for _, y in present) / n
    sst = sum((y - mean) ** 2 for _, y in present)
    if k < 2 or k >= n or sst <= 0.0:
        return 0.0
    ssb = sum(len(g) * (sum(g) / len(g) - mean) ** 2 for g in groups.values())
    within = (sst - ssb) / (n - k)
    return min(1.0, max(0.0, (ssb - (k - 1) * within) / sst))


def _server_importances(study: Study, metric: str, http: str) -> tuple[dict, dict[str, float]]:
    """The server's fANOVA answer (GET /api/studies/NAME/importance of the
    HTTP API at ``http``) and its importances by parameter name."""
    base = http if "://" in http else f"http://{http}"
    url = (base.rstrip("/") + "/api/studies/" + urllib.parse.quote(study.name, safe="")
           + "/importance?" + urllib.parse.urlencode({"metric": metric}))
    # The HTTP API takes the same bearer token as gRPC.
    headers = {key.title(): value for key, value in study.transport.metadata
               if key == "authorization"}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=30) as reply:
            answer = json.load(reply)
    except urllib.error.HTTPError as error:
        try:
            message = json.load(error)["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = error.reason
        raise ValueError(f"http: {url} answered {error.code}: {message}") from None
    except urllib.error.URLError as error:
        raise ValueError(f"http: cannot reach {url}: {error.reason}") from None
    if not answer.get("parameters"):
        raise ValueError(
            f"study {study.name!r}: the server computed no importance: "
            + answer.get("message", "no parameters in its answer")
        )
    return answer, {p["name"]: float(p["importance"]) for p in answer["parameters"]}


def plot_param_importances(
    study: Study, *, target: Optional[str] = None, http: Optional[str] = None
) -> Figure:
    """A horizontal bar per parameter: its importance for ``target``
    (default: the objective), most important on top.

    With ``http`` (the address of hypertuned's HTTP API, its ``--http``,
    e.g. ``"http://127.0.0.1:8080"``) the importances are the server's
    fANOVA over the COMPLETED trials (a random forest, Hutter et al. 2014:
    optimizer/importance.h), with their standard deviation over the trees
    as error bars; the client's token is sent. The gRPC API has no
    importance call, so without ``http`` they are computed here by
    :func:`python_importances` (a binned variance share); the title says
    which.
    """
    metric = _target(study, target)
    errors: dict[str, float] = {}
    if http is not None:
        answer, importances = _server_importances(study, metric, http)
        errors = {p["name"]: float(p.get("stddev", 0.0)) for p in answer["parameters"]}
        method = f"fANOVA by the server, {answer.get('trials', '?')} trials"
    else:
        importances = python_importances(study, target=metric)
        method = "binned variance share, computed in Python"
    ranked = sorted(importances, key=lambda name: importances[name])
    fig = _figure(6.4, max(2.5, 0.45 * len(ranked) + 1.5))
    ax = fig.add_subplot()
    ax.barh(ranked, [importances[n] for n in ranked],
            xerr=[errors[n] for n in ranked] if errors else None, color="tab:blue")
    ax.set_xlabel(f"importance for {metric}")
    ax.set_xlim(0.0, max([1.0, *(importances[n] + errors.get(n, 0.0) for n in ranked)]))
    ax.set_title(f"Parameter importance of {study.name}\n({method})", fontsize="medium")
    return fig


# ----- Several objectives -----


def plot_pareto_front(study: Study, *, targets: Optional[Sequence[str]] = None) -> Figure:
    """The COMPLETED trials in objective space, 2 or 3 metrics (default:
    the study's objectives): the optimal ones (the server's
    ``optimal_trials()``, the Pareto front) in red, the others in blue,
    infeasible ones in grey. Three metrics make a 3-D plot. The optimal
    trials are those of the study's objectives, even where ``targets``
    names other metrics."""
    names = list(targets) if targets is not None else study.objectives
    for name in names:
        _target(study, name)
    if len(names) not in (2, 3):
        raise ValueError(
            f"targets: a Pareto front plots 2 or 3 objectives, got {len(names)} ("
            + ", ".join(names) + ")"
        )
    found = [(t, [_value(t, n) for n in names]) for t in study.trials("COMPLETED")]
    found = [(t, vs) for t, vs in found if all(v is not None for v in vs)]
    if not found:
        raise ValueError(
            f"study {study.name!r} has no COMPLETED trial with values of "
            + ", ".join(names) + " to plot"
        )
    optimal = {t.id for t in study.optimal_trials()}
    fig = _figure()
    ax = fig.add_subplot(projection="3d" if len(names) == 3 else None)
    groups = (
        ("trials", "tab:blue", "trials",
         [vs for t, vs in found if t.id not in optimal and not _infeasible(t)]),
        ("infeasible", "0.6", "infeasible", [vs for t, vs in found if _infeasible(t)]),
        ("pareto", "tab:red", "Pareto front", [vs for t, vs in found if t.id in optimal]),
    )
    for gid, colour, label, rows in groups:
        if not rows:
            continue
        columns = list(zip(*rows))
        points = ax.scatter(*columns, color=colour, label=label, s=22, zorder=3)
        points.set_gid(gid)
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    if len(names) == 3:
        ax.set_zlabel(names[2])
    ax.set_title(f"Pareto front of {study.name}")
    ax.legend()
    return fig
