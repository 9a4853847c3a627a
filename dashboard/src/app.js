// hypertune dashboard: the study list, and for one study its optimization
// history, parallel coordinates, parameter importance, intermediate curves
// and a sortable, paginated trial table, kept live from the server's event
// stream. Charts use uPlot where the build installed it (npm); without it
// the page shows tables and text only.
//
// The location's fragment carries the view: #study=NAME&page=N&live=0. A
// `token=` in it is moved to sessionStorage and removed from the address at
// once; every API call sends it as `Authorization: Bearer`. Each rendered
// chart writes what it drew into data-* attributes (data-points, ...), which
// the browser test reads.
'use strict';

const TOKEN_KEY = 'hypertune-token';
const PAGE_SIZE = 50;
// Live updates redraw at most this often, or less often for big studies
// (four times the last drawing's duration), so drawing never hogs the tab.
const RENDER_EVERY_MS = 1000;

const state = {
  study: null,     // the Study message
  trials: new Map(),  // id -> Trial message
  cursor: '0',     // the last change sequence seen
  sortKey: 'id',
  sortAsc: true,
  page: 1,
  renderTimer: null,
  lastRenderMs: 0,
  plots: [],       // uPlot instances drawn, destroyed before a redraw
  stream: null,    // AbortController of the live stream
};

// ----- Location, token, API -----

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ''));
}

function setHash(params) {
  const text = params.toString();
  history.replaceState(null, '', text ? '#' + text : location.pathname);
}

function takeTokenFromHash() {
  const params = hashParams();
  if (params.has('token')) {
    sessionStorage.setItem(TOKEN_KEY, params.get('token'));
    params.delete('token');
    setHash(params);
  }
}

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, options = {}) {
  const headers = {};
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers['Authorization'] = 'Bearer ' + token;
  const response = await fetch(path, {headers, signal: options.signal});
  if (!response.ok) {
    let message = response.statusText;
    try {
      message = (await response.json()).error.message;
    } catch (e) { /* not our JSON error */ }
    throw new ApiError(response.status, message);
  }
  return options.raw ? response : response.json();
}

// ----- Small DOM helpers -----

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === 'onclick') node.onclick = value;
    else if (key === 'text') node.textContent = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child !== null && child !== undefined) {
      node.append(child instanceof Node ? child : String(child));
    }
  }
  return node;
}

function main() {
  return document.getElementById('main');
}

function showError(error) {
  if (error instanceof ApiError && error.status === 401) return askToken();
  main().replaceChildren(el('p', {class: 'error', id: 'error'},
                            String(error.message || error)));
}

function askToken() {
  const input = el('input', {type: 'password', id: 'token-input',
                             placeholder: 'bearer token'});
  const form = el('form', {id: 'token-form'},
                  el('p', {}, 'This server needs a token.'), input,
                  el('button', {type: 'submit'}, 'Sign in'));
  form.onsubmit = (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, input.value.trim());
    route();
  };
  main().replaceChildren(form);
}

function formatNumber(value) {
  if (value === undefined || value === null || Number.isNaN(value)) return '';
  if (!Number.isFinite(value)) return String(value);
  if (Number.isInteger(value)) return String(value);
  return Math.abs(value) >= 1e4 || Math.abs(value) < 1e-3
      ? value.toExponential(4) : value.toPrecision(5);
}

function formatTime(ms) {
  return ms ? new Date(Number(ms)).toISOString().replace('T', ' ').slice(0, 19)
            : '';
}

// ----- Study messages (protobuf JSON mapping) -----

function objectiveOf(study) {
  const metrics = (study.spec && study.spec.metrics) || [];
  const metric = metrics[0] || {name: '', goal: 'MAXIMIZE'};
  return {name: metric.name, minimize: metric.goal === 'MINIMIZE'};
}

function parameterValue(value) {
  if (!value) return undefined;
  if ('double_value' in value) return Number(value.double_value);
  if ('int_value' in value) return Number(value.int_value);
  if ('string_value' in value) return value.string_value;
  return 0;  // proto3 omits a zero double.
}

function parametersOf(trial) {
  const out = {};
  for (const p of trial.parameters || []) out[p.name] = parameterValue(p);
  return out;
}

// The trial's objective value: the final measurement's, or for a stopped
// trial its last measurement's; undefined when it has none.
function objectiveValue(trial, name) {
  const done = trial.state === 'COMPLETED' || trial.state === 'STOPPED';
  if (!done) return undefined;
  const final = trial.final_measurement && trial.final_measurement.metrics;
  if (final && name in final) return Number(final[name]);
  const ms = trial.measurements || [];
  for (let i = ms.length - 1; i >= 0; --i) {
    if (ms[i].metrics && name in ms[i].metrics) {
      return Number(ms[i].metrics[name]);
    }
  }
  return undefined;
}

// ----- Views -----

async function route() {
  stopStream();
  state.plots.forEach((plot) => plot.destroy());
  state.plots = [];
  takeTokenFromHash();
  const params = hashParams();
  const name = params.get('study');
  document.getElementById('crumb').textContent = name ? '/ ' + name : '';
  try {
    if (name) await showStudy(name, params);
    else await showStudies();
  } catch (error) {
    showError(error);
  }
}

async function showStudies() {
  const response = await api('/api/studies');
  const studies = response.studies || [];
  const rows = studies.map((s) => {
    const counts = s.trial_counts || {};
    const total = Object.values(counts).reduce((a, b) => a + Number(b), 0);
    const link = el('a', {href: '#study=' + encodeURIComponent(s.name)},
                    s.name);
    return el('tr', {}, el('td', {}, link), el('td', {}, s.state || ''),
              el('td', {}, (s.spec && s.spec.algorithm) || 'default'),
              el('td', {}, objectiveOf(s).name +
                               (objectiveOf(s).minimize ? ' ↓' : ' ↑')),
              el('td', {class: 'num'}, total),
              el('td', {class: 'num'}, Number(counts.COMPLETED || 0)),
              el('td', {}, formatTime(s.create_time_ms)));
  });
  const table = el('table', {id: 'studies', 'data-rows': studies.length},
                   el('thead', {}, el('tr', {}, ...['study', 'state',
                      'algorithm', 'objective', 'trials', 'completed',
                      'created'].map((h) => el('th', {}, h)))),
                   el('tbody', {}, ...rows));
  main().replaceChildren(el('h1', {}, 'Studies'),
                         studies.length ? table : el('p', {}, 'No studies.'));
}

async function showStudy(name, params) {
  main().replaceChildren(el('p', {}, 'Loading ' + name + '…'));
  state.study = await api('/api/studies/' + encodeURIComponent(name));
  state.trials = new Map();
  state.cursor = '0';
  state.page = Math.max(1, Number(params.get('page') || 1));
  const loadStart = performance.now();
  // The change feed from the start holds every trial once, at its latest
  // state; its last sequence is where the live stream resumes.
  for (;;) {
    const page = await api('/api/studies/' + encodeURIComponent(name) +
                           '/changes?limit=1000&after=' + state.cursor);
    for (const event of page.events) {
      state.trials.set(Number(event.trial.id), event.trial);
    }
    state.cursor = page.last_sequence;
    if (!page.more) break;
  }
  const renderStart = performance.now();
  renderStudy();
  // For people and benchmarks: how long the data took, and the drawing.
  document.body.setAttribute('data-load-ms',
                             Math.round(renderStart - loadStart));
  document.body.setAttribute('data-render-ms',
                             Math.round(performance.now() - renderStart));
  if (params.get('live') !== '0') startStream(name);
}

function scheduleRender() {
  if (state.renderTimer !== null) return;
  state.renderTimer = setTimeout(() => {
    state.renderTimer = null;
    renderStudy();
  }, Math.max(RENDER_EVERY_MS, 4 * state.lastRenderMs));
}

function renderStudy() {
  const start = performance.now();
  drawStudy();
  state.lastRenderMs = performance.now() - start;
}

function drawStudy() {
  // uPlot listens on the window: let go of the previous drawing's charts.
  state.plots.forEach((plot) => plot.destroy());
  state.plots = [];
  const study = state.study;
  const objective = objectiveOf(study);
  const trials = [...state.trials.values()].sort(
      (a, b) => Number(a.id) - Number(b.id));
  const counts = {};
  for (const t of trials) counts[t.state] = (counts[t.state] || 0) + 1;
  const summary = el('p', {id: 'summary', 'data-trials': trials.length},
      `${study.state || ''} · ${trials.length} trials (` +
      Object.entries(counts).map(([k, v]) => `${v} ${k.toLowerCase()}`)
          .join(', ') + `) · objective ${objective.name} ` +
      (objective.minimize ? '(minimize)' : '(maximize)') + ' · ',
      el('a', {href: '#', id: 'csv', onclick: downloadCsv}, 'CSV'));
  const best = bestTrial(trials, objective);
  const bestText = el('p', {id: 'best'}, best
      ? `Best: trial ${best.id}, ${objective.name} = ` +
        formatNumber(objectiveValue(best, objective.name)) + ' with ' +
        Object.entries(parametersOf(best))
            .map(([k, v]) => `${k}=${typeof v === 'number' ?
                                      formatNumber(v) : v}`).join(', ')
      : 'No completed trial yet.');
  const sections = [el('h1', {}, study.name), summary, bestText];
  if (window.uPlot) {
    sections.push(
        section('Optimization history', historyChart(trials, objective)),
        section('Parallel coordinates', parallelChart(trials, objective)),
        section('Parameter importance', importanceChart(trials, objective)),
        section('Intermediate values', curvesChart(trials, objective)));
  } else {
    sections.push(el('p', {id: 'no-charts', class: 'note'},
        'Charts are not part of this build (npm was absent when hypertuned ' +
        'was built): tables and text only.'));
  }
  sections.push(section('Trials', trialTable(trials, objective)));
  main().replaceChildren(...sections);
  if (window.uPlot) drawDeferred.forEach((draw) => draw());
  drawDeferred.length = 0;
}

function section(title, body) {
  return el('section', {}, el('h2', {}, title), body);
}

function bestTrial(trials, objective) {
  let best = null;
  let bestValue = 0;
  for (const t of trials) {
    const v = objectiveValue(t, objective.name);
    if (v === undefined || Number.isNaN(v)) continue;
    if (best === null || (objective.minimize ? v < bestValue : v > bestValue)) {
      best = t;
      bestValue = v;
    }
  }
  return best;
}

// Charts that need their container in the document draw after it is.
const drawDeferred = [];

function chartWidth() {
  return Math.max(400, Math.min(1100, main().clientWidth - 20));
}

// Each trial's objective and the best so far, by trial id.
function historyChart(trials, objective) {
  const xs = [];
  const ys = [];
  const best = [];
  let bestValue;
  for (const t of trials) {
    const v = objectiveValue(t, objective.name);
    if (v === undefined || !Number.isFinite(v)) continue;
    if (bestValue === undefined ||
        (objective.minimize ? v < bestValue : v > bestValue)) {
      bestValue = v;
    }
    xs.push(Number(t.id));
    ys.push(v);
    best.push(bestValue);
  }
  const box = el('div', {id: 'history', class: 'chart',
                         'data-points': xs.length});
  drawDeferred.push(() => {
    state.plots.push(new uPlot({
      width: chartWidth(), height: 300,
      scales: {x: {time: false}},
      axes: [{label: 'trial'}, {label: objective.name}],
      series: [
        {label: 'trial'},
        {label: objective.name, stroke: '#3b6ea5', paths: () => null,
         points: {show: true, size: 5, fill: '#3b6ea5'}},
        {label: 'best so far', stroke: '#d9822b', width: 2,
         paths: uPlot.paths.stepped({align: 1}), points: {show: false}},
      ],
    }, [xs, ys, best], box));
  });
  return box;
}

// One polyline per finished trial across an axis per parameter and the
// objective, coloured by the objective (plain canvas: uPlot has no such
// chart).
function parallelChart(trials, objective) {
  const specs = (state.study.spec.parameters || []);
  const rows = [];
  for (const t of trials) {
    const v = objectiveValue(t, objective.name);
    if (v === undefined || !Number.isFinite(v)) continue;
    rows.push({params: parametersOf(t), value: v});
  }
  const width = chartWidth();
  const height = 320;
  const canvas = el('canvas', {id: 'parallel', class: 'chart',
                               width, height, 'data-lines': rows.length,
                               'data-axes': specs.length + 1});
  const axes = specs.map((spec) => axisOf(spec, rows));
  axes.push(numericAxis(objective.name, rows.map((r) => r.value), false));
  const ctx = canvas.getContext('2d');
  const left = 40;
  const right = width - 60;
  const top = 30;
  const bottom = height - 30;
  const xAt = (i) => left + (right - left) * (axes.length === 1 ? 0 :
                                              i / (axes.length - 1));
  const [lo, hi] = extent(rows.map((r) => r.value));
  ctx.lineWidth = 1;
  ctx.globalAlpha = rows.length > 2000 ? 0.15 : 0.5;
  for (const row of rows) {
    const f = hi > lo ? (row.value - lo) / (hi - lo) : 0.5;
    const good = objective.minimize ? 1 - f : f;
    ctx.strokeStyle = `hsl(${Math.round(240 - 200 * good)}, 70%, 45%)`;
    ctx.beginPath();
    axes.forEach((axis, i) => {
      const value = i < specs.length ? row.params[specs[i].name] : row.value;
      const y = bottom - (bottom - top) * axis.position(value);
      if (i === 0) ctx.moveTo(xAt(i), y); else ctx.lineTo(xAt(i), y);
    });
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
  ctx.strokeStyle = '#444';
  ctx.fillStyle = '#222';
  ctx.font = '12px sans-serif';
  ctx.textAlign = 'center';
  axes.forEach((axis, i) => {
    ctx.beginPath();
    ctx.moveTo(xAt(i), top);
    ctx.lineTo(xAt(i), bottom);
    ctx.stroke();
    ctx.fillText(axis.name, xAt(i), top - 12);
    ctx.fillText(axis.low, xAt(i), bottom + 16);
    ctx.fillText(axis.high, xAt(i), top - 1);
  });
  return canvas;
}

function extent(values) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  return lo <= hi ? [lo, hi] : [0, 1];
}

function numericAxis(name, values, log) {
  const t = (v) => (log && v > 0 ? Math.log10(v) : v);
  const [lo, hi] = extent(values.map(t));
  return {
    name,
    low: formatNumber(log ? 10 ** lo : lo),
    high: formatNumber(log ? 10 ** hi : hi),
    position: (v) => (v === undefined ? 0 : hi > lo ? (t(v) - lo) / (hi - lo)
                                                    : 0.5),
  };
}

function axisOf(spec, rows) {
  if (spec.categorical_spec) {
    const values = spec.categorical_spec.values || [];
    return {
      name: spec.name, low: values[0] || '', high: values[values.length - 1] || '',
      position: (v) => (values.length > 1 ? values.indexOf(v) /
                                            (values.length - 1) : 0.5),
    };
  }
  const scale = (spec.double_spec || spec.integer_spec || {}).scale;
  return numericAxis(spec.name, rows.map((r) => r.params[spec.name]),
                     scale === 'LOG');
}

// fANOVA-like importance: the share of the objective's variance explained
// by each parameter's binned means (categories, or ten quantile bins of a
// numeric parameter), normalized over the parameters.
function importanceOf(trials, objective) {
  const specs = (state.study.spec.parameters || []);
  const rows = [];
  for (const t of trials) {
    const v = objectiveValue(t, objective.name);
    if (v !== undefined && Number.isFinite(v)) {
      rows.push({params: parametersOf(t), value: v});
    }
  }
  const mean = rows.reduce((a, r) => a + r.value, 0) / (rows.length || 1);
  const total = rows.reduce((a, r) => a + (r.value - mean) ** 2, 0);
  const scores = specs.map((spec) => {
    const bins = new Map();
    if (spec.categorical_spec) {
      for (const r of rows) {
        const key = String(r.params[spec.name]);
        if (!bins.has(key)) bins.set(key, []);
        bins.get(key).push(r.value);
      }
    } else {
      const sorted = [...rows].sort(
          (a, b) => (a.params[spec.name] ?? 0) - (b.params[spec.name] ?? 0));
      sorted.forEach((r, i) => {
        const key = Math.floor((10 * i) / sorted.length);
        if (!bins.has(key)) bins.set(key, []);
        bins.get(key).push(r.value);
      });
    }
    let explained = 0;
    for (const values of bins.values()) {
      const m = values.reduce((a, b) => a + b, 0) / values.length;
      explained += values.length * (m - mean) ** 2;
    }
    return {name: spec.name, score: total > 0 ? explained / total : 0};
  });
  const sum = scores.reduce((a, s) => a + s.score, 0);
  for (const s of scores) s.share = sum > 0 ? s.score / sum : 0;
  return scores.sort((a, b) => b.share - a.share);
}

function importanceChart(trials, objective) {
  const scores = importanceOf(trials, objective);
  const box = el('div', {id: 'importance', 'data-params': scores.length});
  for (const s of scores) {
    box.append(el('div', {class: 'bar-row', 'data-param': s.name,
                          'data-share': s.share.toFixed(4)},
        el('span', {class: 'bar-label'}, s.name),
        el('span', {class: 'bar',
                    style: `width:${Math.round(400 * s.share)}px`}),
        el('span', {class: 'bar-value'}, (100 * s.share).toFixed(1) + '%')));
  }
  return box;
}

// Every trial's reported objective by step; stopped trials in red with a
// cross where they stopped.
function curvesChart(trials, objective) {
  const curves = [];
  let stopped = 0;
  for (const t of trials) {
    const points = [];
    for (const m of t.measurements || []) {
      if (m.metrics && objective.name in m.metrics) {
        points.push([Number(m.step || 0), Number(m.metrics[objective.name])]);
      }
    }
    if (points.length === 0) continue;
    const isStopped = t.state === 'STOPPED' || t.state === 'STOPPING';
    if (isStopped) ++stopped;
    curves.push({points, stopped: isStopped});
  }
  const width = chartWidth();
  const height = 300;
  const canvas = el('canvas', {id: 'curves', class: 'chart', width, height,
                               'data-curves': curves.length,
                               'data-stopped': stopped});
  const xs = [];
  const ys = [];
  for (const c of curves) {
    for (const [x, y] of c.points) {
      xs.push(x);
      ys.push(y);
    }
  }
  const [x0, x1] = extent(xs);
  const [y0, y1] = extent(ys);
  const left = 60;
  const right = width - 10;
  const top = 10;
  const bottom = height - 30;
  const px = (x) => left + (right - left) * (x1 > x0 ? (x - x0) / (x1 - x0) : 0.5);
  const py = (y) => bottom - (bottom - top) * (y1 > y0 ? (y - y0) / (y1 - y0) : 0.5);
  const ctx = canvas.getContext('2d');
  ctx.globalAlpha = curves.length > 2000 ? 0.2 : 0.6;
  for (const c of curves) {
    ctx.strokeStyle = c.stopped ? '#c23030' : '#3b6ea5';
    ctx.beginPath();
    c.points.forEach(([x, y], i) => {
      if (!Number.isFinite(y)) return;
      if (i === 0) ctx.moveTo(px(x), py(y)); else ctx.lineTo(px(x), py(y));
    });
    ctx.stroke();
    if (c.stopped) {
      const [x, y] = c.points[c.points.length - 1];
      ctx.beginPath();
      ctx.moveTo(px(x) - 4, py(y) - 4);
      ctx.lineTo(px(x) + 4, py(y) + 4);
      ctx.moveTo(px(x) + 4, py(y) - 4);
      ctx.lineTo(px(x) - 4, py(y) + 4);
      ctx.stroke();
    }
  }
  ctx.globalAlpha = 1;
  ctx.fillStyle = '#222';
  ctx.font = '12px sans-serif';
  ctx.fillText('step ' + formatNumber(x0), left, height - 8);
  ctx.textAlign = 'right';
  ctx.fillText('step ' + formatNumber(x1), right, height - 8);
  ctx.fillText(formatNumber(y1), left - 4, top + 10);
  ctx.fillText(formatNumber(y0), left - 4, bottom);
  return canvas;
}

// ----- Trial table -----

function trialTable(trials, objective) {
  const specs = state.study.spec.parameters || [];
  const columns = [
    {key: 'id', label: 'id', value: (t) => Number(t.id)},
    // Warm-start trials: results brought from another study or a file.
    {key: 'state', label: 'state',
     value: (t) => (t.state || '') + (t.warm_start ? ' (warm start)' : '')},
    {key: 'objective', label: objective.name,
     value: (t) => objectiveValue(t, objective.name)},
    ...specs.map((s) => ({key: 'p:' + s.name, label: s.name,
                          value: (t) => parametersOf(t)[s.name]})),
    {key: 'steps', label: 'steps', value: (t) => (t.measurements || []).length},
    {key: 'created', label: 'created', value: (t) => Number(t.create_time_ms || 0),
     show: formatTime},
  ];
  const column = columns.find((c) => c.key === state.sortKey) || columns[0];
  const sorted = [...trials].sort((a, b) => {
    const x = column.value(a);
    const y = column.value(b);
    // Missing values last in either direction.
    if (x === undefined && y === undefined) return 0;
    if (x === undefined) return 1;
    if (y === undefined) return -1;
    const order = x < y ? -1 : x > y ? 1 : 0;
    return state.sortAsc ? order : -order;
  });
  const pages = Math.max(1, Math.ceil(sorted.length / PAGE_SIZE));
  state.page = Math.min(state.page, pages);
  const rows = sorted.slice((state.page - 1) * PAGE_SIZE,
                            state.page * PAGE_SIZE);
  const head = el('tr', {}, ...columns.map((c) => el('th', {
    class: 'sortable' + (c.key === state.sortKey ?
                         (state.sortAsc ? ' asc' : ' desc') : ''),
    'data-key': c.key,
    onclick: () => {
      state.sortAsc = c.key === state.sortKey ? !state.sortAsc : true;
      state.sortKey = c.key;
      state.page = 1;
      renderStudy();
    },
  }, c.label)));
  const body = rows.map((t) => el('tr', {'data-id': t.id,
                                         class: 'state-' + (t.state || '')},
      ...columns.map((c) => {
        const v = c.value(t);
        const text = c.show ? c.show(v) :
                     typeof v === 'number' ? formatNumber(v) : (v ?? '');
        return el('td', {class: typeof v === 'number' ? 'num' : ''}, text);
      })));
  const pager = el('div', {class: 'pager'},
      el('button', {id: 'prev', onclick: () => goToPage(state.page - 1)},
         '‹ prev'),
      el('span', {id: 'page-label'}, ` page ${state.page} of ${pages} `),
      el('button', {id: 'next', onclick: () => goToPage(state.page + 1)},
         'next ›'));
  if (state.page <= 1) pager.querySelector('#prev').disabled = true;
  if (state.page >= pages) pager.querySelector('#next').disabled = true;
  return el('div', {},
            el('table', {id: 'trials', 'data-page': state.page,
                         'data-pages': pages, 'data-rows': rows.length,
                         'data-total': sorted.length},
               el('thead', {}, head), el('tbody', {}, ...body)),
            pager);
}

function goToPage(page) {
  state.page = page;
  const params = hashParams();
  params.set('page', page);
  setHash(params);
  renderStudy();
}

async function downloadCsv(event) {
  event.preventDefault();
  const name = state.study.name;
  try {
    const response = await api('/api/studies/' + encodeURIComponent(name) +
                               '/trials.csv', {raw: true});
    const url = URL.createObjectURL(await response.blob());
    const a = el('a', {href: url, download: name + '.csv'});
    document.body.append(a);
    a.click();
    a.remove();
    URL.revokeObjectURL(url);
  } catch (error) {
    showError(error);
  }
}

// ----- Live updates: the event stream read with fetch (so that it can
// carry the token), resumed from the last sequence after a disconnect -----

function stopStream() {
  if (state.stream) state.stream.abort();
  state.stream = null;
  setLive('');
}

function setLive(text) {
  document.getElementById('live').textContent = text;
}

async function startStream(name) {
  const controller = new AbortController();
  state.stream = controller;
  while (!controller.signal.aborted) {
    try {
      const response = await api('/api/studies/' + encodeURIComponent(name) +
                                  '/events?after=' + state.cursor,
                                  {raw: true, signal: controller.signal});
      setLive('● live');
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          handleEvent(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch (error) {
      if (controller.signal.aborted) return;
      if (error instanceof ApiError && error.status !== 503) {
        setLive('not live: ' + error.message);
        return;
      }
    }
    setLive('○ reconnecting');
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function handleEvent(block) {
  let id = null;
  let type = 'message';
  let data = '';
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') id = value;
    else if (field === 'event') type = value;
    else if (field === 'data') data += (data ? '\n' : '') + value;
  }
  if (type === 'trial' && data) {
    const trial = JSON.parse(data);
    state.trials.set(Number(trial.id), trial);
    if (id !== null) state.cursor = id;
    scheduleRender();
  } else if (type === 'error' && data) {
    setLive('not live: ' + JSON.parse(data).error.message);
  }
}

// ----- Start -----

function loadCharts() {
  // The charting library is there only when the build had npm.
  return new Promise((resolve) => {
    const css = el('link', {rel: 'stylesheet', href: '/assets/uPlot.min.css'});
    const script = el('script', {src: '/assets/uPlot.iife.min.js'});
    script.onload = () => {
      document.head.append(css);
      resolve(true);
    };
    script.onerror = () => resolve(false);
    document.head.append(script);
  });
}

window.addEventListener('hashchange', route);
loadCharts().then((charts) => {
  document.body.setAttribute('data-charts', charts ? 'uplot' : 'none');
  route();
});
