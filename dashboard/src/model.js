// A study as the page holds it: the Study message, and one row per trial
// in the compact form the server's `changes?view=compact` feed sends
// (service/http/dashboard_view.h); trials from the live event stream (full
// Trial messages) are turned into the same rows by rowFromTrial, by the
// same rules. Metric roles, feasibility and the Pareto front are worked
// out here; fetching is api.js's, writing values for people format.js's.

import * as api from './api.js';
import {formatNumber} from './format.js';

export const STATES = ['REQUESTED', 'ACTIVE', 'STOPPING', 'PAUSED',
                       'COMPLETED', 'STOPPED', 'INFEASIBLE', 'FAILED'];

export const STATE_COLORS = {
  REQUESTED: '#9aa5b1', ACTIVE: '#2e8b57', STOPPING: '#e67e22',
  PAUSED: '#8e44ad', COMPLETED: '#3b6ea5', STOPPED: '#d9822b',
  INFEASIBLE: '#c23030', FAILED: '#6b6b6b',
};

// A proto JSON number: a number, or "Infinity" / "-Infinity" / "NaN".
export function num(value) {
  if (value === null || value === undefined) return null;
  return typeof value === 'number' ? value : Number(value);
}

// A proto JSON int64: a string (as this server writes them) or a number;
// 0 when absent.
export function int64(value) {
  return value === null || value === undefined ? 0 : Number(value);
}

// ----- The study -----

// Each metric's role, goal and bounds. The role is the server's
// (Study.metric_roles, resolved by common/study_metrics.h); a server that
// predates metric_roles is read by the same rule: without any role set,
// the first metric is the objective and the rest are recorded, else a
// metric that sets none is recorded. A constraint's bounds come as
// lower_bound / upper_bound (the proto's names, as this server writes
// JSON) or lowerBound / upperBound (protobuf's JSON names); absent means
// unbounded.
export function metricsOf(study) {
  const specs = (study.spec && study.spec.metrics) || [];
  const published = study.metric_roles || study.metricRoles;
  const roleOf = (m) => (m.role && m.role !== 'ROLE_UNSPECIFIED' ? m.role
                                                                 : null);
  const anyRole = specs.some((m) => roleOf(m));
  const resolved = (m, index) => {
    if (published && published.length === specs.length) {
      return published[index];
    }
    return anyRole ? (roleOf(m) || 'RECORDED')
                   : (index === 0 ? 'OBJECTIVE' : 'RECORDED');
  };
  const bound = (m, snake, camel) => {
    const v = m[snake] ?? m[camel] ??
        (m.constraint && (m.constraint[snake] ?? m.constraint[camel]));
    return v === undefined || v === null ? null : num(v);
  };
  const out = specs.map((m, index) => ({
    name: m.name, index, minimize: m.goal === 'MINIMIZE',
    role: resolved(m, index),
    lower: bound(m, 'lower_bound', 'lowerBound'),
    upper: bound(m, 'upper_bound', 'upperBound'),
  }));
  return out;
}

// The first objective: {name, index (among the metrics), minimize}.
export function objectiveOf(study) {
  const metric = metricsOf(study).find((m) => m.role === 'OBJECTIVE');
  return metric ? {name: metric.name, index: metric.index,
                   minimize: metric.minimize}
                : {name: '', index: 0, minimize: false};
}

// Whether a row meets every constraint of `metrics` (metricsOf): each
// constraint's value present, not NaN and within its bounds; and not
// marked infeasible by the server (`feasible: false`). Without
// constraints, only the server's mark counts.
export function isFeasible(row, metrics) {
  if (row.feasible === false) return false;
  for (const m of metrics) {
    if (m.role !== 'CONSTRAINT') continue;
    const v = row.metrics[m.index];
    if (v === null || v === undefined || Number.isNaN(v)) return false;
    if (outsideBounds(m, v)) return false;
  }
  return true;
}

// A constraint's bounds for people: "≤ 10", "≥ 2" or "in [2, 10]".
export function boundText(m) {
  if (m.lower !== null && m.upper !== null) {
    return `in [${formatNumber(m.lower)}, ${formatNumber(m.upper)}]`;
  }
  if (m.upper !== null) return `\u2264 ${formatNumber(m.upper)}`;
  if (m.lower !== null) return `\u2265 ${formatNumber(m.lower)}`;
  return 'unbounded';
}

// Whether `value` lies outside constraint m's bounds.
export function outsideBounds(m, value) {
  return (m.lower !== null && value < m.lower) ||
         (m.upper !== null && value > m.upper);
}

// The Pareto front of `rows` over `objectives` (metricsOf entries): the
// rows no other row dominates, among COMPLETED feasible rows whose
// objectives are all finite. Row a dominates b when a is at least as good
// in every objective (by its goal) and better in one. Sorted by the first
// objective then the rest, a row can be dominated only by rows before it,
// so each is checked against the front so far: O(n log n + n * front).
export function paretoFront(rows, objectives, metrics = objectives) {
  const k = objectives.length;
  const points = [];
  for (const row of rows) {
    if (row.state !== 'COMPLETED' || !isFeasible(row, metrics)) continue;
    const v = new Float64Array(k);
    let ok = true;
    for (let j = 0; j < k; ++j) {
      const x = row.metrics[objectives[j].index];
      if (x === null || x === undefined || !Number.isFinite(x)) {
        ok = false;
        break;
      }
      v[j] = objectives[j].minimize ? x : -x;  // all minimized
    }
    if (ok) points.push({row, v});
  }
  points.sort((a, b) => {
    for (let j = 0; j < k; ++j) if (a.v[j] !== b.v[j]) return a.v[j] - b.v[j];
    return a.row.id - b.row.id;
  });
  const dominates = (a, b) => {
    let strictly = false;
    for (let j = 0; j < k; ++j) {
      if (a[j] > b[j]) return false;
      if (a[j] < b[j]) strictly = true;
    }
    return strictly;
  };
  const front = [];
  for (const p of points) {
    if (!front.some((f) => dominates(f.v, p.v))) front.push(p);
  }
  return front.map((p) => p.row);
}

// The study's budget in trials (spec.max_trials, an int32: a number in
// proto JSON, a string from some writers); 0 means unlimited.
export function budgetOf(study) {
  const n = Number((study.spec || {}).max_trials || 0);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

// Whether the study as read again (`fresh`) differs from `held` in what
// the page shows of it: its state, its spec (the budget among it), its
// cost or device time. Its trial counts are left out: the trials' own
// events keep those.
export function studyChanged(held, fresh) {
  const shown = (s) => JSON.stringify([s.state || '', s.spec || {},
                                       num(s.cost) || 0,
                                       num(s.device_seconds) || 0]);
  return shown(held) !== shown(fresh);
}

// Each parameter spec as the charts need it.
export function parametersOf(study) {
  return ((study.spec && study.spec.parameters) || []).map((spec, index) => {
    const p = {name: spec.name, index, kind: 'double', log: false,
               categories: null, min: null, max: null};
    if (spec.categorical_spec) {
      p.kind = 'categorical';
      p.categories = spec.categorical_spec.values || [];
    } else if (spec.discrete_spec) {
      p.kind = 'discrete';
      const values = (spec.discrete_spec.values || []).map(Number);
      p.min = Math.min(...values);
      p.max = Math.max(...values);
    } else {
      const range = spec.double_spec || spec.integer_spec || {};
      p.kind = spec.integer_spec ? 'integer' : 'double';
      p.log = range.scale === 'LOG';
      p.min = Number(range.min || 0);
      p.max = Number(range.max || 0);
    }
    return p;
  });
}

export function metricNames(study) {
  return ((study.spec && study.spec.metrics) || []).map((m) => m.name);
}

// The rungs of an ASHA or HYPERBAND rule, in steps (min_resource * eta^k
// up to max_resource), or [] without one.
export function rungsOf(study) {
  const rule = study.spec && study.spec.early_stopping;
  if (!rule || (rule.rule !== 'ASHA' && rule.rule !== 'HYPERBAND')) return [];
  const min = Number(rule.min_resource || 1);
  const max = Number(rule.max_resource || 0);
  const eta = Number(rule.reduction_factor || 3);
  const rungs = [];
  for (let r = min; r < max && rungs.length < 64; r *= eta) rungs.push(r);
  return rungs;
}

// The early-stopping rule in words: its name, with several objectives how
// they are judged (the server writes the default out), and whether it stops
// on constraint forecasts; '' without a rule.
export function earlyStoppingText(study) {
  const rule = study.spec && study.spec.early_stopping;
  if (!rule || !rule.rule || rule.rule === 'RULE_UNSPECIFIED') return '';
  let text = rule.rule;
  if (rule.multi_objective && rule.multi_objective !== 'MULTI_OBJECTIVE_UNSPECIFIED') {
    text += ` (objectives: ${rule.multi_objective})`;
  }
  if (rule.stop_on_constraints) text += ', stops on constraint forecasts';
  return text;
}

// ----- A trial's attempts -----

// The first and last step of `measurements`, or null when there are none.
function stepRange(measurements) {
  if (!measurements.length) return null;
  return [int64(measurements[0].step),
          int64(measurements[measurements.length - 1].step)];
}

// A trial's attempts (DESIGN.md, "Attempts"), by number, the current one
// last: {number, current, waiting, client_id, measurements (their count),
// steps ([first, last] or null), end_reason, end_time_ms, device_seconds,
// cost (null when the study has no price)}. A REQUESTED trial's current
// attempt is waiting for a worker: it has none yet (client_id is still the
// last attempt's, so it is left out). The current attempt's
// device-seconds are the trial's less its earlier attempts' (what the
// server gives each attempt when it ends); its measurements are the trial's
// result, the earlier ones' never are. [] for a trial from a server without
// attempts (no `attempt`, no `earlier_attempts`).
export function attemptsOf(trial, pricePerDeviceHour = 0) {
  const earlier = trial.earlier_attempts || [];
  const number = Number(trial.attempt || 0);
  if (number === 0 && earlier.length === 0) return [];
  const price = num(pricePerDeviceHour) || 0;
  const costOf = (seconds) => (price > 0 ? seconds / 3600 * price : null);
  let earlierSeconds = 0;
  const out = earlier.map((a) => {
    const ms = a.measurements || [];
    const seconds = num(a.device_seconds) || 0;
    earlierSeconds += seconds;
    return {number: Number(a.number || 0), current: false, waiting: false,
            client_id: a.client_id || '', measurements: ms.length,
            steps: stepRange(ms), end_reason: a.end_reason || '',
            end_time_ms: int64(a.end_time_ms), device_seconds: seconds,
            cost: costOf(seconds)};
  }).sort((a, b) => a.number - b.number);
  const ms = trial.measurements || [];
  const seconds = Math.max(0, (num(trial.device_seconds) || 0) -
                                  earlierSeconds);
  const waiting = trial.state === 'REQUESTED';
  out.push({number: Math.max(number, out.length ? out.at(-1).number + 1 : 1),
            current: true, waiting,
            client_id: waiting ? '' : trial.client_id || '',
            measurements: ms.length, steps: stepRange(ms), end_reason: '',
            end_time_ms: int64(trial.end_time_ms), device_seconds: seconds,
            cost: costOf(seconds)});
  return out;
}

// ----- Rows -----

function reasonOf(trial) {
  switch (trial.state) {
    case 'INFEASIBLE': return trial.infeasible_reason || '';
    case 'STOPPING': case 'STOPPED': case 'PAUSED':
      return trial.stop_reason || '';
    case 'COMPLETED': return '';
    default: return trial.failure_reason || '';
  }
}

// Derived fields: the duration (to now while it runs) and the objective
// (the metric at `objectiveIndex`).
function finishRow(row, objectiveIndex = 0) {
  const running = row.state === 'ACTIVE' || row.state === 'STOPPING';
  row.duration = !row.start_time_ms ? null
      : row.end_time_ms ? row.end_time_ms - row.start_time_ms
      : running ? Date.now() - row.start_time_ms : null;
  row.objective = objectiveIndex < row.metrics.length
      ? row.metrics[objectiveIndex] : null;
  return row;
}

// A row from the compact feed (dashboard_view.h). An inactive (conditional)
// parameter is null. `feasible` is kept when the server sends it.
export function rowFromCompact(c, objectiveIndex = 0) {
  const curve = c.curve || [];
  const steps = new Float64Array(curve.length);
  const values = new Float64Array(curve.length);
  for (let i = 0; i < curve.length; ++i) {
    steps[i] = curve[i][0];
    values[i] = num(curve[i][1]);
  }
  return finishRow({
    id: c.id, state: c.state,
    params: c.params.map(compactParam),
    metrics: c.metrics.map(num), steps, values, reason: c.reason || '',
    create_time_ms: c.create_time_ms, start_time_ms: c.start_time_ms,
    end_time_ms: c.end_time_ms, device_seconds: num(c.device_seconds) || 0,
    cost: num(c.cost) || 0, measurements: c.measurements,
    feasible: typeof c.feasible === 'boolean' ? c.feasible : null,
    warm_start: c.warm_start === true, attempt: Number(c.attempt || 0),
    exploits: (c.exploits || []).map((e) => ({
      step: e.step, donor: e.donor, checkpoint_step: e.checkpoint_step,
      time_ms: e.time_ms, value: num(e.value), donor_value: num(e.donor_value),
      params_before: e.params_before.map(compactParam),
      params: e.params.map(compactParam)})),
  }, objectiveIndex);
}

function compactParam(v) {
  return typeof v === 'string' ? v : num(v);
}

function parameterValue(value) {
  if (!value) return null;
  if ('double_value' in value) return num(value.double_value);
  if ('int_value' in value) return Number(value.int_value);
  if ('string_value' in value) return value.string_value;
  return 0;  // proto3 omits a zero double
}

// A row from a full Trial message, by the compact feed's rules. Its curve
// and result are the current attempt's (`measurements`): earlier attempts'
// curves are never part of them.
export function rowFromTrial(trial, study) {
  const specs = parametersOf(study);
  // Parameter values in the spec's order, null where absent.
  const inOrder = (values) => {
    const byName = new Map((values || []).map(
        (p) => [p.name, parameterValue(p)]));
    return specs.map((p) => (byName.has(p.name) ? byName.get(p.name) : null));
  };
  const names = metricNames(study);
  const finished = trial.state === 'COMPLETED' || trial.state === 'STOPPED';
  const ms = trial.measurements || [];
  // The result measurement: the final one if it has metrics, else the last.
  let result = null;
  if (finished) {
    const final = trial.final_measurement;
    if (final && final.metrics && Object.keys(final.metrics).length) {
      result = final;
    } else if (ms.length) {
      result = ms[ms.length - 1];
    }
  }
  const objective = names[objectiveOf(study).index];
  const steps = [];
  const values = [];
  for (const m of ms) {
    if (m.metrics && objective in m.metrics) {
      steps.push(Number(m.step || 0));
      values.push(num(m.metrics[objective]));
    }
  }
  return finishRow({
    id: Number(trial.id), state: trial.state,
    params: inOrder(trial.parameters),
    metrics: names.map((n) => (result && result.metrics && n in result.metrics
                                   ? num(result.metrics[n]) : null)),
    steps: Float64Array.from(steps), values: Float64Array.from(values),
    reason: reasonOf(trial),
    create_time_ms: Number(trial.create_time_ms || 0),
    start_time_ms: Number(trial.start_time_ms || 0),
    end_time_ms: Number(trial.end_time_ms || 0),
    device_seconds: num(trial.device_seconds) || 0,
    cost: num(trial.cost) || 0, measurements: ms.length,
    feasible: typeof trial.feasible === 'boolean' ? trial.feasible : null,
    warm_start: trial.warm_start === true, attempt: Number(trial.attempt || 0),
    exploits: (trial.exploits || []).map((e) => ({
      step: int64(e.step), donor: int64(e.donor_trial_id),
      checkpoint_step: int64(e.checkpoint_step), time_ms: int64(e.time_ms),
      value: num(e.value ?? 0), donor_value: num(e.donor_value ?? 0),
      params_before: inOrder(e.parameters_before),
      params: inOrder(e.parameters)})),
  }, objectiveOf(study).index);
}

// One study's data: the Study message and its trials' rows, loaded from the
// compact change feed and kept current by the event stream.
export class StudyData {
  constructor(study) {
    this.study = study;
    this.objective = objectiveOf(study);
    this.params = parametersOf(study);
    this.metrics = metricNames(study);
    this.metricSpecs = metricsOf(study);
    this.objectives = this.metricSpecs.filter((m) => m.role === 'OBJECTIVE');
    this.constraints = this.metricSpecs.filter((m) => m.role === 'CONSTRAINT');
    this.rows = new Map();
    this.cursor = '0';
    this.version = 0;  // bumped on every change
    this.sortedCache = null;
  }

  setStudy(study) {
    this.study = study;
    ++this.version;
  }

  // Whether the study has two or more objectives (a Pareto front, not a
  // best value).
  multiObjective() {
    return this.objectives.length >= 2;
  }

  // The Pareto front of the COMPLETED feasible rows (multi-objective).
  front() {
    if (!this.frontCache || this.frontCache.version !== this.version) {
      this.frontCache = {version: this.version,
                         rows: paretoFront(this.sorted(), this.objectives,
                                           this.metricSpecs)};
    }
    return this.frontCache.rows;
  }

  // Every page of the compact feed after the cursor.
  // Where the time went (ms): until the answers' headers, reading and
  // parsing their bodies, and building the rows (this.loadTimes).
  async load(signal) {
    const times = {answer: 0, parse: 0, rows: 0};
    this.loadTimes = times;
    for (;;) {
      const page = await api.compactChanges(this.study.name, this.cursor,
                                            {signal, times});
      const t = performance.now();
      for (const event of page.events) {
        this.rows.set(event.trial.id,
                      rowFromCompact(event.trial, this.objective.index));
      }
      times.rows += performance.now() - t;
      this.cursor = page.last_sequence;
      ++this.version;
      this.sortedCache = null;
      if (!page.more) break;
    }
  }

  applyTrial(trial) {
    const row = rowFromTrial(trial, this.study);
    this.rows.set(row.id, row);
    ++this.version;
    this.sortedCache = null;
    return row;
  }

  // Rows by id.
  sorted() {
    if (!this.sortedCache) {
      this.sortedCache = [...this.rows.values()].sort((a, b) => a.id - b.id);
    }
    return this.sortedCache;
  }

  counts() {
    const counts = {};
    for (const row of this.rows.values()) {
      counts[row.state] = (counts[row.state] || 0) + 1;
    }
    return counts;
  }

  // Whether value a is better than b for the objective.
  better(a, b) {
    return this.objective.minimize ? a < b : a > b;
  }

  // The COMPLETED feasible row of the best finite objective, or null.
  best() {
    let best = null;
    for (const row of this.rows.values()) {
      const v = row.objective;
      if (row.state !== 'COMPLETED' || v === null || !Number.isFinite(v) ||
          !isFeasible(row, this.metricSpecs)) {
        continue;
      }
      if (best === null || this.better(v, best.objective)) best = row;
    }
    return best;
  }
}
