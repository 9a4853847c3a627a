// The study's plots, each drawn into a box by a function of the study's
// data and the view's options ({logObjective, logParams, width, open(id)}):
// optimization history, slices, contour, parallel coordinates (brushable),
// intermediate values (with ASHA's rungs), the empirical distribution
// (EDF), parameter importance, and the comparison of studies. Each writes
// what it drew into data-* attributes of its box (data-points, ...), which
// the browser test reads, and answers hover (the trial and its values) and
// click (the trial's page) through plot.js.

import {STATE_COLORS, boundText, el, formatNumber, isFeasible,
        outsideBounds} from './model.js';
import {Frame, allPositive, d3, extent, legend, makeAxis, makeScale,
        nearest, objectiveColors, position, tipHtml} from './plot.js';

const FINISHED = new Set(['COMPLETED', 'STOPPED']);

function finite(v) {
  return v !== null && Number.isFinite(v);
}

// The rows of COMPLETED trials with a finite objective: what slices,
// contours, parallel coordinates and the EDF show.
export function completedRows(data) {
  const out = [];
  for (const row of data.sorted()) {
    if (row.state === 'COMPLETED' && finite(row.objective)) out.push(row);
  }
  return out;
}

function paramPairs(data, row) {
  return data.params.map((p) => [p.name, row.params[p.index]]);
}

function trialTip(data, row, extra = []) {
  return tipHtml(`trial ${row.id} (${row.state.toLowerCase()})`, [
    [data.objective.name, row.objective],
    ...data.constraints.map((m) => [`${m.name} (${boundText(m)})`,
                                    row.metrics[m.index]]),
    ...extra, ...paramPairs(data, row),
    ...(row.reason ? [['reason', row.reason]] : [])]);
}

function note(box, id, text) {
  box.replaceChildren(el('p', {class: 'note', id}, text));
}

// Points drawn as one path per colour.
function drawPoints(ctx, xs, ys, colors, n, radius, {hollow = false} = {}) {
  const groups = new Map();
  for (let i = 0; i < n; ++i) {
    if (!groups.has(colors[i])) groups.set(colors[i], []);
    groups.get(colors[i]).push(i);
  }
  for (const [color, members] of groups) {
    ctx.beginPath();
    for (const i of members) {
      ctx.moveTo(xs[i] + radius, ys[i]);
      ctx.arc(xs[i], ys[i], radius, 0, 2 * Math.PI);
    }
    if (hollow) {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.stroke();
    } else {
      ctx.fillStyle = color;
      ctx.fill();
    }
  }
}

// Crosses (x), one stroke.
function drawCrosses(ctx, xs, ys, color, size = 3) {
  ctx.strokeStyle = color;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (let i = 0; i < xs.length; ++i) {
    ctx.moveTo(xs[i] - size, ys[i] - size);
    ctx.lineTo(xs[i] + size, ys[i] + size);
    ctx.moveTo(xs[i] + size, ys[i] - size);
    ctx.lineTo(xs[i] - size, ys[i] + size);
  }
  ctx.stroke();
}

// Trials that miss a constraint.
const MISSED_COLOR = '#888';

// ----- Optimization history -----

// Each finished trial's objective by trial number, the best so far (over
// feasible trials), stopped trials hollow, completed trials that miss a
// constraint as grey crosses, infinite values clipped to the edge
// (triangles), INFEASIBLE trials as crosses on a strip below.
export function drawHistory(box, data, opts) {
  const rows = data.sorted();
  const points = [];
  const infeasible = [];
  for (const row of rows) {
    if (FINISHED.has(row.state) && row.objective !== null) {
      points.push(row);  // NaN and +-inf too, clipped to an edge below
    } else if (row.state === 'INFEASIBLE') {
      infeasible.push(row);
    }
  }
  box.setAttribute('data-points', points.length);
  box.setAttribute('data-infeasible', infeasible.length);
  if (points.length === 0) {
    box.setAttribute('data-clipped', 0);
    if (infeasible.length > 0 && infeasible.length === rows.length) {
      const reasons = new Map();
      for (const row of infeasible) {
        const r = row.reason || 'no reason given';
        reasons.set(r, (reasons.get(r) || 0) + 1);
      }
      const top = [...reasons.entries()].sort((a, b) => b[1] - a[1])
          .slice(0, 3).map(([r, n]) => `${n}× “${r}”`).join(', ');
      note(box, 'history-empty',
           `All ${rows.length} trials are INFEASIBLE, so there is no ` +
           `objective value to plot. The optimizer steers away from their ` +
           `parameters. Most common reasons: ${top}.`);
    } else {
      note(box, 'history-empty', infeasible.length
          ? `No finished trial has an objective yet ` +
            `(${infeasible.length} infeasible).`
          : 'No finished trial yet.');
    }
    return;
  }
  const values = points.map((r) => r.objective);
  const log = opts.logObjective && allPositive(values);
  const frame = new Frame(box, {width: opts.width, height: 320});
  // No finite value at all (every one +-inf or NaN): an axis around 0, the
  // points on its edges.
  const maxId = rows[rows.length - 1].id;
  const x = makeScale({domain: [1, Math.max(1, maxId)], range: frame.xRange(),
                       integer: true});
  x.domain([0.5, Math.max(1, maxId) + 0.5]);
  const [bottom, top] = frame.yRange();
  const strip = infeasible.length ? 16 : 0;
  const y = makeScale({domain: extent(values, log) || [0, 1], log,
                       range: [bottom - strip - 6, top + 8]});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'trial');
  frame.axisLeft(makeAxis('left', y),
                 data.objective.name + (log ? ' (log)' : ''));
  const ctx = frame.ctx;

  const missesConstraint = (row) => data.constraints.length > 0 &&
      row.state === 'COMPLETED' && !isFeasible(row, data.metricSpecs);
  // Best so far over feasible COMPLETED trials: a step line.
  let best = null;
  const bestPath = [];
  for (const row of points) {
    if (row.state !== 'COMPLETED' || !Number.isFinite(row.objective) ||
        missesConstraint(row)) {
      continue;
    }
    if (best === null || data.better(row.objective, best)) {
      best = row.objective;
      bestPath.push([row.id, best]);
    }
  }
  if (bestPath.length) {
    ctx.beginPath();
    ctx.strokeStyle = '#d9480f';
    ctx.lineWidth = 2;
    bestPath.forEach(([id, v], i) => {
      const px = x(id);
      const py = y(v);
      if (i === 0) ctx.moveTo(px, py);
      else ctx.lineTo(px, py);
      const next = i + 1 < bestPath.length ? bestPath[i + 1][0] : maxId;
      ctx.lineTo(x(next), py);
    });
    ctx.stroke();
  }
  box.setAttribute('data-best-steps', bestPath.length);

  const n = points.length + infeasible.length;
  const xs = new Float32Array(n);
  const ys = new Float32Array(n);
  const colors = [];
  const order = [];
  let clipped = 0;
  let nans = 0;
  const [yLow, yHigh] = y.range();
  const filled = [];
  const hollow = [];
  const missed = [];
  const clippedAt = [];
  points.forEach((row) => {
    const i = order.length;
    order.push(row);
    xs[i] = x(row.id);
    const v = row.objective;
    if (!Number.isFinite(v) || (log && v <= 0)) {
      ++clipped;
      // +inf (or a value a log axis cannot show) at the edge it lies past;
      // NaN, which lies nowhere, at the top edge with a ring.
      if (Number.isNaN(v)) ++nans;
      ys[i] = v > 0 || Number.isNaN(v) ? yHigh - 4 : yLow + 4;
      clippedAt.push(i);
    } else {
      ys[i] = y(v);
      (row.state === 'STOPPED' ? hollow
       : missesConstraint(row) ? missed : filled).push(i);
    }
    colors.push(STATE_COLORS[row.state]);
  });
  box.setAttribute('data-clipped', clipped);
  box.setAttribute('data-nan', nans);
  box.setAttribute('data-missed-constraint', missed.length);
  const pick = (list) => {
    const lx = new Float32Array(list.length);
    const ly = new Float32Array(list.length);
    const lc = [];
    list.forEach((i, k) => {
      lx[k] = xs[i];
      ly[k] = ys[i];
      lc.push(colors[i]);
    });
    return [lx, ly, lc];
  };
  const radius = points.length > 3000 ? 2 : 3;
  drawPoints(ctx, ...pick(filled), filled.length, radius);
  drawPoints(ctx, ...pick(hollow), hollow.length, radius + 0.5,
             {hollow: true});
  drawCrosses(ctx, missed.map((i) => xs[i]), missed.map((i) => ys[i]),
              MISSED_COLOR);
  ctx.fillStyle = '#c23030';
  ctx.strokeStyle = '#c23030';
  ctx.lineWidth = 1.5;
  for (const i of clippedAt) {
    if (Number.isNaN(order[i].objective)) {
      ctx.beginPath();
      ctx.arc(xs[i], ys[i], 4, 0, 2 * Math.PI);
      ctx.stroke();
      continue;
    }
    const up = order[i].objective > 0;
    ctx.beginPath();
    ctx.moveTo(xs[i], ys[i] + (up ? -5 : 5));
    ctx.lineTo(xs[i] + 4, ys[i] + (up ? 3 : -3));
    ctx.lineTo(xs[i] - 4, ys[i] + (up ? 3 : -3));
    ctx.fill();
  }
  if (infeasible.length) {
    const yStrip = bottom - strip / 2;
    frame.svg.append('text').attr('class', 'strip-label')
        .attr('x', frame.margin.left - 6).attr('y', yStrip + 4)
        .attr('text-anchor', 'end').text('infeasible');
    ctx.strokeStyle = STATE_COLORS.INFEASIBLE;
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    infeasible.forEach((row) => {
      const i = order.length;
      order.push(row);
      xs[i] = x(row.id);
      ys[i] = yStrip;
      ctx.moveTo(xs[i] - 3, yStrip - 3);
      ctx.lineTo(xs[i] + 3, yStrip + 3);
      ctx.moveTo(xs[i] + 3, yStrip - 3);
      ctx.lineTo(xs[i] - 3, yStrip + 3);
    });
    ctx.stroke();
  }
  const items = [{label: 'completed', color: STATE_COLORS.COMPLETED}];
  if (hollow.length) items.push({label: 'stopped', color: STATE_COLORS.STOPPED});
  if (missed.length) {
    items.push({label: 'misses a constraint', color: MISSED_COLOR,
                shape: 'cross'});
  }
  items.push({label: 'best so far', color: '#d9480f', shape: 'line'});
  if (clipped > nans) {
    items.push({label: '±inf, clipped to the edge', color: '#c23030',
                shape: 'triangle'});
  }
  if (nans) {
    items.push({label: 'NaN, at the top edge', color: '#c23030',
                shape: 'ring'});
  }
  if (infeasible.length) {
    items.push({label: 'infeasible', color: STATE_COLORS.INFEASIBLE,
                shape: 'cross'});
  }
  legend(frame.svg, frame.margin.left + 8, 10, items);
  // For tests and tools: each drawn trial and where (SVG pixels).
  box.points = () => order.map((row, i) => ({id: row.id, x: xs[i],
                                             y: ys[i]}));
  frame.interact((mx, my) => {
    const i = nearest(xs, ys, order.length, mx, my, 10);
    if (i < 0) return null;
    const row = order[i];
    const off = row.state !== 'INFEASIBLE' &&
        (!Number.isFinite(row.objective) || (log && row.objective <= 0));
    return {id: row.id, x: xs[i], y: ys[i], html: trialTip(data, row, off
        ? [['plotted at the edge, its value is', row.objective]] : [])};
  }, (id) => opts.open(id));
}

// ----- Constraints -----

// One panel per constraint under the history: the constrained metric of
// each finished trial by trial number, its bounds as dashed lines, the
// region outside them shaded, the trials outside them as red crosses.
export function drawConstraints(box, data, opts) {
  const rows = data.sorted();
  const maxId = rows.length ? rows[rows.length - 1].id : 1;
  const panels = data.constraints.map(
      (m) => el('div', {class: 'constraint', 'data-metric': m.name}));
  box.replaceChildren(...panels);
  box.setAttribute('data-constraints', panels.length);
  data.constraints.forEach((m, k) => {
    drawConstraintPanel(panels[k], data, opts, m, rows, maxId);
  });
}

function drawConstraintPanel(panel, data, opts, m, rows, maxId) {
  const points = rows.filter(
      (r) => FINISHED.has(r.state) && finite(r.metrics[m.index] ?? null));
  const outside = points.filter((r) => outsideBounds(m, r.metrics[m.index]));
  panel.setAttribute('data-points', points.length);
  panel.setAttribute('data-violations', outside.length);
  if (points.length === 0) {
    panel.replaceChildren(el('p', {class: 'note'},
        `${m.name} (${boundText(m)}): no finished trial reported it yet.`));
    panel.setAttribute('data-bounds', 0);
    return;
  }
  const bounds = [m.lower, m.upper].filter((b) => b !== null);
  const frame = new Frame(panel, {width: opts.width, height: 180});
  const x = makeScale({domain: [1, Math.max(1, maxId)], range: frame.xRange(),
                       integer: true});
  x.domain([0.5, Math.max(1, maxId) + 0.5]);
  const y = makeScale({
    domain: extent([...points.map((r) => r.metrics[m.index]), ...bounds]),
    range: frame.yRange()});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'trial');
  frame.axisLeft(makeAxis('left', y), `${m.name} ${boundText(m)}`);
  const ctx = frame.ctx;
  const [left, right] = frame.xRange();
  const [bottom, top] = frame.yRange();
  // Outside the bounds: shaded, under the points.
  ctx.fillStyle = 'rgba(194, 48, 48, 0.08)';
  if (m.upper !== null) ctx.fillRect(left, top, right - left, y(m.upper) - top);
  if (m.lower !== null) {
    ctx.fillRect(left, y(m.lower), right - left, bottom - y(m.lower));
  }
  for (const b of bounds) {
    frame.plot.append('line').attr('class', 'bound').attr('data-bound', b)
        .attr('x1', left).attr('x2', right).attr('y1', y(b)).attr('y2', y(b));
  }
  panel.setAttribute('data-bounds', bounds.length);
  const xs = Float32Array.from(points, (r) => x(r.id));
  const ys = Float32Array.from(points, (r) => y(r.metrics[m.index]));
  const inIdx = [];
  const outIdx = [];
  points.forEach((r, i) => {
    (outsideBounds(m, r.metrics[m.index]) ? outIdx : inIdx).push(i);
  });
  drawPoints(ctx, Float32Array.from(inIdx, (i) => xs[i]),
             Float32Array.from(inIdx, (i) => ys[i]),
             inIdx.map((i) => STATE_COLORS[points[i].state]), inIdx.length,
             points.length > 3000 ? 2 : 3);
  drawCrosses(ctx, outIdx.map((i) => xs[i]), outIdx.map((i) => ys[i]),
              '#c23030');
  const items = [{label: 'within', color: STATE_COLORS.COMPLETED}];
  if (outIdx.length) {
    items.push({label: `outside (${outIdx.length})`, color: '#c23030',
                shape: 'cross'});
  }
  items.push({label: 'bound', color: '#c23030', shape: 'line'});
  legend(frame.svg, frame.margin.left + 8, 10, items);
  frame.interact((mx, my) => {
    const i = nearest(xs, ys, points.length, mx, my, 10);
    if (i < 0) return null;
    const row = points[i];
    return {id: row.id, x: xs[i], y: ys[i], html: trialTip(data, row, [
      ['within the bounds',
       outsideBounds(m, row.metrics[m.index]) ? 'no' : 'yes']])};
  }, (id) => opts.open(id));
}

// ----- Slices -----

function paramScale(p, rows, opts, range) {
  if (p.kind === 'categorical') {
    return {scale: makeScale({categories: p.categories, range}), log: false};
  }
  const values = rows.map((r) => r.params[p.index]);
  const log = p.log && opts.logParams && allPositive(values);
  const domain = p.min !== null && p.max !== null && p.max > p.min
      ? [p.min, p.max] : (extent(values, log) || [0, 1]);
  return {scale: makeScale({domain, log, range,
                            integer: p.kind === 'integer'}),
          log};
}

// A small deterministic jitter so that points on one category spread out.
function jitter(id) {
  const h = Math.sin(id * 12.9898) * 43758.5453;
  return (h - Math.floor(h)) - 0.5;
}

// An objective (opts.metric, a metricsOf entry; the first objective by
// default) against each parameter, one panel each, coloured by trial
// number, over the COMPLETED trials with a finite value of it.
export function drawSlices(box, data, opts) {
  const metric = opts.metric || data.objective;
  const valueOf = (row) => row.metrics[metric.index] ?? null;
  const rows = data.sorted().filter(
      (row) => row.state === 'COMPLETED' && finite(valueOf(row)));
  box.replaceChildren();
  box.setAttribute('data-metric', metric.name);
  box.setAttribute('data-panels', data.params.length);
  box.setAttribute('data-points', rows.length);
  if (rows.length === 0) {
    note(box, 'slice-empty', 'No completed trial yet.');
    return;
  }
  const values = rows.map(valueOf);
  const log = opts.logObjective && allPositive(values);
  const columns = Math.max(1, Math.min(data.params.length,
                                       Math.floor(opts.width / 330)));
  const width = Math.floor(opts.width / columns) - 8;
  const maxId = data.sorted()[data.sorted().length - 1].id;
  const color = d3.scaleSequential(d3.interpolateViridis).domain([1, maxId]);
  for (const p of data.params) {
    const panel = el('div', {class: 'panel', 'data-param': p.name});
    box.append(panel);
    const frame = new Frame(panel, {width, height: 240,
                                    margin: {top: 10, right: 12, bottom: 40,
                                             left: 56}});
    const {scale: x, log: xLog} = paramScale(p, rows, opts, frame.xRange());
    const y = makeScale({domain: extent(values, log) || [0, 1], log,
                         range: [frame.yRange()[0] - 4, frame.yRange()[1] + 4]});
    frame.axisBottom(makeAxis('bottom', x, {count: 4,
                                            integer: p.kind === 'integer'}),
                     p.name + (xLog ? ' (log)' : ''));
    frame.axisLeft(makeAxis('left', y, {count: 5}),
                   metric.name + (log ? ' (log)' : ''));
    const xs = new Float32Array(rows.length);
    const ys = new Float32Array(rows.length);
    const colors = [];
    const drawn = [];
    const band = x.bandwidth ? x.step() * 0.5 : 0;
    for (const row of rows) {
      const px = position(x, row.params[p.index]);
      const py = position(y, valueOf(row));
      if (px === null || py === null) continue;
      const i = drawn.length;
      xs[i] = px + (band ? jitter(row.id) * band : 0);
      ys[i] = py;
      colors.push(color(row.id));
      drawn.push(row);
    }
    panel.setAttribute('data-points', drawn.length);
    drawPoints(frame.ctx, xs, ys, colors, drawn.length,
               drawn.length > 3000 ? 1.5 : 2.5);
    frame.interact((mx, my) => {
      const i = nearest(xs, ys, drawn.length, mx, my, 8);
      if (i < 0) return null;
      const extra = metric.name === data.objective.name ? []
          : [[metric.name, valueOf(drawn[i])]];
      return {id: drawn[i].id, x: xs[i], y: ys[i],
              html: trialTip(data, drawn[i], extra)};
    }, (id) => opts.open(id));
  }
}

// ----- Contour -----

// The contour's thresholds over grid values in [lo, hi]: about `count`
// nice values (1, 2 or 5 times a power of ten apart), the first at or
// below lo. A band is the region at or above its threshold, so the lowest
// band covers the whole plot and holds the minimum (ticks within [lo, hi]
// left the region below the first one, the best when minimizing, white).
export function contourThresholds(lo, hi, count = 12) {
  if (!Number.isFinite(lo) || !Number.isFinite(hi) || hi < lo) return [];
  if (hi === lo) return [lo];
  const raw = (hi - lo) / Math.max(1, count);
  const power = 10 ** Math.floor(Math.log10(raw));
  const ratio = raw / power;
  // The multiple nearest to `ratio` in log space.
  const step = power * (ratio >= Math.sqrt(50) ? 10
                        : ratio >= Math.sqrt(10) ? 5
                        : ratio >= Math.sqrt(2) ? 2 : 1);
  // k / (1 / step) keeps decimal steps exact (0.1 * 3 is not 0.3).
  const inverse = step < 1 ? Math.round(1 / step) : 0;
  const at = (k) => (inverse ? k / inverse : k * step);
  let k = Math.floor(inverse ? lo * inverse : lo / step);
  while (at(k) > lo) --k;
  const thresholds = [];
  for (; at(k) <= hi; ++k) thresholds.push(at(k));
  return thresholds;
}

// The objective over two parameters: the COMPLETED trials' mean per cell
// of a grid (in each parameter's scale: log space for a log axis), cells
// without trials filled by Laplace interpolation (each the mean of its
// neighbours, iterated, as Plotly's contour fills gaps), then d3-contour's
// filled isobands, with the trials on top.
export function drawContour(box, data, opts, xName, yName) {
  const rows = completedRows(data);
  const px = data.params.find((p) => p.name === xName);
  const py = data.params.find((p) => p.name === yName);
  box.setAttribute('data-x', xName || '');
  box.setAttribute('data-y', yName || '');
  if (!px || !py || px === py) {
    box.setAttribute('data-points', 0);
    note(box, 'contour-empty', data.params.length < 2
        ? 'A contour needs two parameters; this study has one.'
        : 'Choose two different parameters.');
    return;
  }
  const used = rows.filter((r) => r.params[px.index] !== null &&
                                  r.params[py.index] !== null);
  box.setAttribute('data-points', used.length);
  if (used.length < 3) {
    box.setAttribute('data-levels', 0);
    note(box, 'contour-empty',
         'A contour needs at least 3 completed trials with both parameters.');
    return;
  }
  const values = used.map((r) => r.objective);
  const logZ = opts.logObjective && allPositive(values);
  const frame = new Frame(box, {width: Math.min(opts.width, 760),
                                height: 460,
                                margin: {top: 12, right: 90, bottom: 44,
                                         left: 70}});
  const xs = paramScale(px, used, opts, frame.xRange());
  const ys = paramScale(py, used, opts, frame.yRange());
  frame.axisBottom(makeAxis('bottom', xs.scale,
                            {integer: px.kind === 'integer'}),
                   px.name + (xs.log ? ' (log)' : ''));
  frame.axisLeft(makeAxis('left', ys.scale, {integer: py.kind === 'integer'}),
                 py.name + (ys.log ? ' (log)' : ''));

  // Grid coordinates along one axis: category index cells, or 40 cells over
  // the axis' domain in its scale.
  const gridAxis = (p, s) => {
    if (p.kind === 'categorical') {
      const index = new Map(p.categories.map((c, i) => [c, i]));
      const step = s.scale.step();
      const first = s.scale(p.categories[0]);
      return {n: p.categories.length, cell: (v) => index.get(v),
              pixel: (g) => first + (g - 0.5) * step};
    }
    const n = 40;
    const t = s.log ? Math.log10 : (v) => v;
    const [d0, d1] = s.scale.domain().map(t);
    const inverse = s.log ? (u) => 10 ** u : (u) => u;
    return {
      n,
      cell: (v) => Math.max(0, Math.min(n - 1, Math.floor(
          (t(v) - d0) / (d1 - d0) * n))),
      pixel: (g) => s.scale(inverse(d0 + (g / n) * (d1 - d0))),
    };
  };
  const gx = gridAxis(px, xs);
  const gy = gridAxis(py, ys);
  const z = logZ ? (v) => Math.log10(v) : (v) => v;
  const sum = new Float64Array(gx.n * gy.n);
  const count = new Uint32Array(gx.n * gy.n);
  for (const row of used) {
    const i = gx.cell(row.params[px.index]);
    const j = gy.cell(row.params[py.index]);
    if (i === undefined || j === undefined) continue;
    sum[j * gx.n + i] += z(row.objective);
    count[j * gx.n + i] += 1;
  }
  const grid = new Float64Array(gx.n * gy.n);
  let known = 0;
  let mean = 0;
  for (let k = 0; k < grid.length; ++k) {
    if (count[k]) {
      grid[k] = sum[k] / count[k];
      mean += grid[k];
      ++known;
    }
  }
  mean /= known;
  for (let k = 0; k < grid.length; ++k) if (!count[k]) grid[k] = mean;
  // Gauss-Seidel sweeps of the empty cells towards their neighbours' mean.
  for (let sweep = 0; sweep < 300; ++sweep) {
    let change = 0;
    for (let j = 0; j < gy.n; ++j) {
      for (let i = 0; i < gx.n; ++i) {
        const k = j * gx.n + i;
        if (count[k]) continue;
        let s = 0;
        let m = 0;
        if (i > 0) { s += grid[k - 1]; ++m; }
        if (i + 1 < gx.n) { s += grid[k + 1]; ++m; }
        if (j > 0) { s += grid[k - gx.n]; ++m; }
        if (j + 1 < gy.n) { s += grid[k + gx.n]; ++m; }
        const v = s / m;
        change = Math.max(change, Math.abs(v - grid[k]));
        grid[k] = v;
      }
    }
    if (change < 1e-9) break;
  }
  const [lo, hi] = d3.extent(grid);
  const thresholds = contourThresholds(lo, hi, 12);
  const bands = d3.contours().size([gx.n, gy.n]).thresholds(thresholds)(grid);
  box.setAttribute('data-levels', bands.length);
  const color = d3.scaleSequential(d3.interpolateViridis)
      .domain(data.objective.minimize ? [hi, lo] : [lo, hi]);
  const ctx = frame.ctx;
  const path = d3.geoPath(d3.geoTransform({
    point(a, b) {
      this.stream.point(gx.pixel(a), gy.pixel(b));
    },
  }), ctx);
  ctx.save();
  ctx.beginPath();
  ctx.rect(frame.margin.left, frame.margin.top, frame.inner.width,
           frame.inner.height);
  ctx.clip();
  for (const band of bands) {
    ctx.beginPath();
    path(band);
    ctx.fillStyle = color(band.value);
    ctx.fill();
    ctx.strokeStyle = 'rgba(255,255,255,0.5)';
    ctx.lineWidth = 0.6;
    ctx.stroke();
  }
  ctx.restore();
  // The trials.
  const tx = new Float32Array(used.length);
  const ty = new Float32Array(used.length);
  used.forEach((row, i) => {
    const cx = position(xs.scale, row.params[px.index]);
    const cy = position(ys.scale, row.params[py.index]);
    const bx = xs.scale.bandwidth ? xs.scale.step() * 0.5 : 0;
    const by = ys.scale.bandwidth ? ys.scale.step() * 0.5 : 0;
    tx[i] = cx + (bx ? jitter(row.id) * bx : 0);
    ty[i] = cy + (by ? jitter(row.id + 7) * by : 0);
  });
  ctx.fillStyle = 'rgba(20,20,20,0.75)';
  ctx.beginPath();
  const r = used.length > 3000 ? 1.2 : 2;
  for (let i = 0; i < used.length; ++i) {
    ctx.moveTo(tx[i] + r, ty[i]);
    ctx.arc(tx[i], ty[i], r, 0, 2 * Math.PI);
  }
  ctx.fill();
  // The colour bar.
  const bar = frame.svg.append('g').attr('transform',
      `translate(${frame.width - frame.margin.right + 16},0)`);
  const barScale = d3.scaleLinear().domain([lo, hi])
      .range([frame.margin.top + frame.inner.height, frame.margin.top]);
  for (let k = 0; k < 40; ++k) {
    const v0 = lo + (hi - lo) * k / 40;
    const v1 = lo + (hi - lo) * (k + 1) / 40;
    bar.append('rect').attr('x', 0).attr('width', 12)
        .attr('y', barScale(v1)).attr('height', barScale(v0) - barScale(v1) + 0.5)
        .attr('fill', color((v0 + v1) / 2));
  }
  bar.append('g').attr('class', 'axis').attr('transform', 'translate(12,0)')
      .call(d3.axisRight(barScale).ticks(5).tickFormat(
          logZ ? (v) => formatNumber(10 ** v) : formatNumber));
  frame.interact((mx, my) => {
    const i = nearest(tx, ty, used.length, mx, my, 8);
    if (i < 0) return null;
    return {id: used[i].id, x: tx[i], y: ty[i], html: trialTip(data, used[i])};
  }, (id) => opts.open(id));
}

// ----- Parallel coordinates -----

// An axis per parameter, one per constraint (its bound marked, the side
// outside it shaded) and one for the objective; a line per COMPLETED
// trial, coloured by its objective, grey when it misses a constraint.
// Brushing an axis (drag along it)
// keeps the lines inside every brushed range: `brushes` (axis name ->
// {lo, hi} or {categories}) holds them across redraws, and onBrush(ids or
// null) is told the trials that pass.
export function drawParallel(box, data, opts, brushes, onBrush) {
  const rows = completedRows(data);
  const axes = data.params.map((p) => ({name: p.name, param: p}));
  for (const c of data.constraints) {
    axes.push({name: c.name, param: null, constraint: c});
  }
  axes.push({name: data.objective.name, param: null});
  box.setAttribute('data-axes', axes.length);
  box.setAttribute('data-lines', rows.length);
  if (rows.length === 0) {
    box.setAttribute('data-selected', 0);
    note(box, 'parallel-empty', 'No completed trial yet.');
    return;
  }
  const frame = new Frame(box, {width: opts.width, height: 380,
                                margin: {top: 36, right: 70, bottom: 24,
                                         left: 70}});
  const [x0, x1] = frame.xRange();
  const step = axes.length > 1 ? (x1 - x0) / (axes.length - 1) : 0;
  const values = rows.map((r) => r.objective);
  const logObjective = opts.logObjective && allPositive(values);
  axes.forEach((axis, a) => {
    axis.x = x0 + a * step;
    if (axis.param) {
      const s = paramScale(axis.param, rows, opts, frame.yRange());
      axis.scale = s.scale;
      axis.log = s.log;
      axis.value = (row) => row.params[axis.param.index];
    } else if (axis.constraint) {
      const c = axis.constraint;
      axis.log = false;
      axis.value = (row) => row.metrics[c.index] ?? null;
      const bounds = [c.lower, c.upper].filter((b) => b !== null);
      axis.scale = makeScale({
        domain: extent([...rows.map(axis.value), ...bounds]) || [0, 1],
        range: frame.yRange()});
    } else {
      axis.log = logObjective;
      axis.scale = makeScale({domain: extent(values, logObjective) || [0, 1],
                              log: logObjective, range: frame.yRange()});
      axis.value = (row) => row.objective;
    }
  });
  // Each row's y on each axis (NaN where it has no value there).
  const n = rows.length;
  const m = axes.length;
  const ys = new Float32Array(n * m);
  let skipped = 0;
  rows.forEach((row, i) => {
    axes.forEach((axis, a) => {
      const p = position(axis.scale, axis.value(row));
      ys[i * m + a] = p === null ? NaN : p;
      skipped += p === null;
    });
  });
  box.setAttribute('data-skipped', skipped);
  const colorOf = objectiveColors(values, data.objective.minimize,
                                  logObjective);
  // 32 colour buckets by objective rank: one stroke per bucket.
  const buckets = 32;
  const ranked = rows.map((r, i) => i).sort(
      (a, b) => rows[a].objective - rows[b].objective);
  const bucketOf = new Uint8Array(n);
  ranked.forEach((i, rank) => {
    bucketOf[i] = Math.min(buckets - 1, Math.floor(rank * buckets / n));
  });
  const bucketColor = [];
  for (let b = 0; b < buckets; ++b) {
    const i = ranked[Math.min(n - 1, Math.floor((b + 0.5) * n / buckets))];
    bucketColor.push(colorOf(rows[i].objective));
  }
  const missed = new Uint8Array(n);
  let missedCount = 0;
  if (data.constraints.length) {
    rows.forEach((row, i) => {
      missed[i] = isFeasible(row, data.metricSpecs) ? 0 : 1;
      missedCount += missed[i];
    });
  }
  box.setAttribute('data-constraint-axes', data.constraints.length);
  box.setAttribute('data-missed-constraint', missedCount);
  const selected = new Uint8Array(n);
  let selectedCount = n;

  const inside = (axis, row) => {
    const brush = brushes[axis.name];
    if (!brush) return true;
    const v = axis.value(row);
    if (v === null) return false;
    if (brush.categories) return brush.categories.includes(v);
    return v >= brush.lo && v <= brush.hi;
  };
  const select = () => {
    selectedCount = 0;
    const active = axes.filter((axis) => brushes[axis.name]);
    for (let i = 0; i < n; ++i) {
      let ok = 1;
      for (const axis of active) {
        if (!inside(axis, rows[i])) {
          ok = 0;
          break;
        }
      }
      selected[i] = ok;
      selectedCount += ok;
    }
    box.setAttribute('data-selected', selectedCount);
    box.setAttribute('data-brushed-axes', active.map((a) => a.name).join(','));
    return active.length;
  };
  // An axis where the trial has no value (an inactive conditional
  // parameter) is skipped: the line joins its neighbours across it.
  const polyline = (ctx, i) => {
    let pen = false;
    for (let a = 0; a < m; ++a) {
      const y = ys[i * m + a];
      if (Number.isNaN(y)) continue;
      if (pen) ctx.lineTo(axes[a].x, y);
      else ctx.moveTo(axes[a].x, y);
      pen = true;
    }
  };
  const ctx = frame.ctx;
  const draw = () => {
    const brushed = select() > 0;
    ctx.clearRect(0, 0, frame.width, frame.height);
    ctx.lineWidth = 1;
    if (brushed) {
      ctx.strokeStyle = 'rgba(150,150,150,0.12)';
      ctx.beginPath();
      for (let i = 0; i < n; ++i) if (!selected[i]) polyline(ctx, i);
      ctx.stroke();
    }
    ctx.globalAlpha = n > 3000 ? 0.3 : n > 500 ? 0.5 : 0.8;
    if (missedCount) {
      ctx.strokeStyle = MISSED_COLOR;
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      for (let i = 0; i < n; ++i) if (missed[i] && selected[i]) polyline(ctx, i);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    for (let b = 0; b < buckets; ++b) {
      ctx.strokeStyle = bucketColor[b];
      ctx.beginPath();
      for (let i = 0; i < n; ++i) {
        if (bucketOf[i] === b && selected[i] && !missed[i]) polyline(ctx, i);
      }
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  };
  draw();

  // The axes, their names, and a brush on each.
  let frameRequest = null;
  let brushWork = 0;
  axes.forEach((axis) => {
    const g = frame.svg.append('g').attr('class', 'axis')
        .attr('data-axis', axis.name)
        .attr('transform', `translate(${axis.x},0)`)
        .call(makeAxis('left', axis.scale, {
          count: 6, integer: axis.param && axis.param.kind === 'integer'}));
    g.append('text').attr('class', 'axis-name').attr('y', 20)
        .text(axis.name + (axis.log ? ' (log)' : ''));
    if (axis.constraint) markBounds(g, axis.scale, axis.constraint);
    const brush = d3.brushY()
        .extent([[-12, frame.margin.top - 2],
                 [12, frame.margin.top + frame.inner.height + 2]])
        .on('start brush end', (event) => {
          if (!event.sourceEvent) return;  // moved by code, below
          const begin = performance.now();
          if (event.type === 'start') brushWork = 0;
          brushes[axis.name] = brushOf(axis, event.selection);
          if (!brushes[axis.name]) delete brushes[axis.name];
          // While dragging, the lines and the table follow once a frame;
          // the release draws at once.
          if (event.type === 'end') {
            if (frameRequest !== null) cancelAnimationFrame(frameRequest);
            frameRequest = null;
            draw();
            onBrush(idsOf(), 'end');
            // For benchmarks: the time the gesture's handlers took (lines
            // and table redrawn), without the waits between events.
            brushWork += performance.now() - begin;
            box.setAttribute('data-brush-ms', Math.round(brushWork));
          } else if (frameRequest === null) {
            frameRequest = requestAnimationFrame(() => {
              const start = performance.now();
              frameRequest = null;
              draw();
              onBrush(idsOf(), 'brush');
              brushWork += performance.now() - start;
            });
          }
          if (event.type !== 'end') brushWork += performance.now() - begin;
        });
    const handle = g.append('g').attr('class', 'brush')
        .attr('data-axis', axis.name).call(brush);
    const saved = brushes[axis.name];
    if (saved) {
      const extentPx = pixelsOf(axis, saved);
      if (extentPx) handle.call(brush.move, extentPx);
      else delete brushes[axis.name];
    }
  });
  draw();

  function idsOf() {
    if (selectedCount === n) return null;
    const ids = new Set();
    for (let i = 0; i < n; ++i) if (selected[i]) ids.add(rows[i].id);
    return ids;
  }

  frame.interact((mx, my) => {
    if (m < 2 || mx < axes[0].x || mx > axes[m - 1].x) return null;
    const a = Math.min(m - 2, Math.floor((mx - axes[0].x) / step));
    const f = (mx - axes[a].x) / step;
    let best = -1;
    let bestD = 6;
    for (let i = 0; i < n; ++i) {
      if (!selected[i]) continue;
      const ya = ys[i * m + a];
      const yb = ys[i * m + a + 1];
      if (Number.isNaN(ya) || Number.isNaN(yb)) continue;  // a skipped axis
      const d = Math.abs(ya + (yb - ya) * f - my);
      if (d < bestD) {
        bestD = d;
        best = i;
      }
    }
    if (best < 0) return null;
    const yAt = ys[best * m + a] + (ys[best * m + a + 1] - ys[best * m + a]) * f;
    return {id: rows[best].id, x: mx, y: yAt, index: best,
            html: trialTip(data, rows[best])};
  }, (id) => opts.open(id), (g, hit) => {
    const points = [];
    for (let a = 0; a < m; ++a) {
      const y = ys[hit.index * m + a];
      if (!Number.isNaN(y)) points.push([axes[a].x, y]);
    }
    g.append('path').attr('class', 'hover-line')
        .attr('d', d3.line()(points));
  });
  return {ids: idsOf()};
}

// On a constraint's axis (the group `g`, at x = 0): the side outside each
// bound shaded, the bound a dashed tick labelled "≤ 10".
function markBounds(g, scale, c) {
  const [bottom, top] = scale.range();
  const mark = (bound, edge, label) => {
    const y = scale(bound);
    g.append('rect').attr('class', 'outside-bound').attr('x', -6)
        .attr('width', 12).attr('y', Math.min(y, edge))
        .attr('height', Math.abs(edge - y));
    g.append('line').attr('class', 'bound').attr('data-bound', bound)
        .attr('x1', -14).attr('x2', 14).attr('y1', y).attr('y2', y);
    g.append('text').attr('class', 'bound-label').attr('x', 16)
        .attr('y', y + 4).text(label);
  };
  if (c.upper !== null) mark(c.upper, top, `\u2264 ${formatNumber(c.upper)}`);
  if (c.lower !== null) {
    mark(c.lower, bottom, `\u2265 ${formatNumber(c.lower)}`);
  }
}

// A brush's pixel selection [y0, y1] on `axis` in data terms.
function brushOf(axis, selection) {
  if (!selection) return null;
  const [y0, y1] = selection;
  if (axis.scale.bandwidth) {
    const categories = axis.scale.domain().filter((c) => {
      const p = axis.scale(c);
      return p >= y0 && p <= y1;
    });
    return {categories};
  }
  const a = axis.scale.invert(y1);
  const b = axis.scale.invert(y0);
  return {lo: Math.min(a, b), hi: Math.max(a, b)};
}

// The pixels of a saved brush on `axis` (redrawn with other scales).
function pixelsOf(axis, brush) {
  if (brush.categories) {
    if (!axis.scale.bandwidth || brush.categories.length === 0) return null;
    const ps = brush.categories.map((c) => axis.scale(c))
        .filter((p) => p !== undefined);
    if (!ps.length) return null;
    const half = axis.scale.step() / 2;
    return [Math.min(...ps) - half / 2, Math.max(...ps) + half / 2];
  }
  if (axis.scale.bandwidth) return null;
  const [r0, r1] = axis.scale.range();
  const clamp = (p) => Math.max(Math.min(r0, r1), Math.min(Math.max(r0, r1), p));
  const lo = axis.scale.base && brush.lo <= 0 ? axis.scale.domain()[0]
                                               : brush.lo;
  const a = clamp(axis.scale(lo));
  const b = clamp(axis.scale(brush.hi));
  return [Math.min(a, b), Math.max(a, b)];
}

// ----- Intermediate values -----

// Every trial's objective by step; stopped trials red with a cross where
// they stopped, running ones green; ASHA's rungs as dashed lines.
export function drawCurves(box, data, opts, rungs) {
  const curves = [];
  let stopped = 0;
  let points = 0;
  for (const row of data.sorted()) {
    if (row.steps.length === 0) continue;
    curves.push(row);
    points += row.steps.length;
    if (row.state === 'STOPPED' || row.state === 'STOPPING') ++stopped;
  }
  box.setAttribute('data-curves', curves.length);
  box.setAttribute('data-stopped', stopped);
  box.setAttribute('data-measurements', points);
  if (curves.length === 0) {
    box.setAttribute('data-rungs', 0);
    note(box, 'curves-empty', 'No trial has reported an intermediate value.');
    return;
  }
  const all = [];
  let sMin = Infinity;
  let sMax = -Infinity;
  for (const row of curves) {
    for (let k = 0; k < row.steps.length; ++k) {
      all.push(row.values[k]);
      sMin = Math.min(sMin, row.steps[k]);
      sMax = Math.max(sMax, row.steps[k]);
    }
  }
  const log = opts.logObjective && allPositive(all);
  const frame = new Frame(box, {width: opts.width, height: 320});
  const x = makeScale({domain: [sMin, Math.max(sMax, sMin + 1)],
                       range: frame.xRange(), integer: true});
  const y = makeScale({domain: extent(all, log) || [0, 1], log,
                       range: [frame.yRange()[0] - 4, frame.yRange()[1] + 4]});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'step');
  frame.axisLeft(makeAxis('left', y),
                 data.objective.name + (log ? ' (log)' : ''));
  // Pixel coordinates per curve, NaN where the value cannot be shown.
  const px = curves.map((row) => Float32Array.from(row.steps, (s) => x(s)));
  const py = curves.map((row) => Float32Array.from(
      row.values, (v) => {
        const p = position(y, v);
        return p === null ? NaN : p;
      }));
  const groupOf = (row) => (row.state === 'STOPPED' || row.state === 'STOPPING'
      ? 'STOPPED' : row.state === 'COMPLETED' ? 'COMPLETED'
      : row.state === 'ACTIVE' || row.state === 'PAUSED' ? 'ACTIVE' : 'OTHER');
  const colors = {COMPLETED: STATE_COLORS.COMPLETED, STOPPED: '#c23030',
                  ACTIVE: STATE_COLORS.ACTIVE, OTHER: '#999'};
  const ctx = frame.ctx;
  // Rungs behind the curves.
  const shown = rungs.filter((r) => r >= sMin && r <= sMax);
  box.setAttribute('data-rungs', shown.length);
  shown.forEach((r, k) => {
    frame.svg.append('line').attr('class', 'rung')
        .attr('x1', x(r)).attr('x2', x(r))
        .attr('y1', frame.margin.top).attr('y2', frame.yRange()[0]);
    frame.svg.append('text').attr('class', 'rung-label')
        .attr('x', x(r) + 3).attr('y', frame.margin.top + 10)
        .text(`rung ${k}`);
  });
  ctx.lineWidth = 1;
  ctx.globalAlpha = curves.length > 2000 ? 0.25 : curves.length > 300 ? 0.45
                                                                      : 0.8;
  for (const group of ['OTHER', 'COMPLETED', 'ACTIVE', 'STOPPED']) {
    ctx.strokeStyle = colors[group];
    ctx.beginPath();
    curves.forEach((row, c) => {
      if (groupOf(row) !== group) return;
      let pen = false;
      for (let k = 0; k < px[c].length; ++k) {
        if (Number.isNaN(py[c][k])) {
          pen = false;
          continue;
        }
        if (pen) ctx.lineTo(px[c][k], py[c][k]);
        else ctx.moveTo(px[c][k], py[c][k]);
        pen = true;
      }
      if (px[c].length === 1 && !Number.isNaN(py[c][0])) {
        ctx.moveTo(px[c][0] - 1, py[c][0]);
        ctx.lineTo(px[c][0] + 1, py[c][0]);
      }
    });
    ctx.stroke();
  }
  ctx.globalAlpha = 1;
  ctx.strokeStyle = '#c23030';
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  curves.forEach((row, c) => {
    if (groupOf(row) !== 'STOPPED') return;
    const k = px[c].length - 1;
    if (Number.isNaN(py[c][k])) return;
    ctx.moveTo(px[c][k] - 3, py[c][k] - 3);
    ctx.lineTo(px[c][k] + 3, py[c][k] + 3);
    ctx.moveTo(px[c][k] + 3, py[c][k] - 3);
    ctx.lineTo(px[c][k] - 3, py[c][k] + 3);
  });
  ctx.stroke();
  const items = [{label: 'completed', color: colors.COMPLETED, shape: 'line'},
                 {label: 'running', color: colors.ACTIVE, shape: 'line'},
                 {label: 'stopped (× where it stopped)', color: colors.STOPPED,
                  shape: 'line'}];
  legend(frame.svg, frame.margin.left + 8, 10, items);

  // Hover: the curve passing nearest to the pointer, interpolated at its x.
  frame.interact((mx, my) => {
    let best = -1;
    let bestD = 8;
    let bestY = 0;
    for (let c = 0; c < curves.length; ++c) {
      const xsC = px[c];
      const last = xsC.length - 1;
      if (mx < xsC[0] - 4 || mx > xsC[last] + 4) continue;
      let k = 0;
      while (k < last && xsC[k + 1] < mx) ++k;
      let yAt;
      if (k === last || mx <= xsC[0]) {
        yAt = py[c][mx <= xsC[0] ? 0 : last];
      } else {
        const f = (mx - xsC[k]) / (xsC[k + 1] - xsC[k] || 1);
        yAt = py[c][k] + (py[c][k + 1] - py[c][k]) * f;
      }
      const d = Math.abs(yAt - my);
      if (d < bestD) {
        bestD = d;
        best = c;
        bestY = yAt;
      }
    }
    if (best < 0) return null;
    const row = curves[best];
    // The measurement nearest the pointer's step.
    let k = 0;
    for (let j = 1; j < px[best].length; ++j) {
      if (Math.abs(px[best][j] - mx) < Math.abs(px[best][k] - mx)) k = j;
    }
    return {id: row.id, x: mx, y: bestY, index: best,
            html: tipHtml(`trial ${row.id} (${row.state.toLowerCase()})`, [
              ['step', row.steps[k]], [data.objective.name, row.values[k]],
              ['measurements', row.steps.length],
              ...paramPairs(data, row),
              ...(row.reason ? [['reason', row.reason]] : [])])};
  }, (id) => opts.open(id), (g, hit) => {
    const c = hit.index;
    const points = [];
    for (let k = 0; k < px[c].length; ++k) {
      if (!Number.isNaN(py[c][k])) points.push([px[c][k], py[c][k]]);
    }
    g.append('path').attr('class', 'hover-line').attr('d', d3.line()(points));
  });
}

// ----- Empirical distribution -----

// For each series {name, color, rows} (COMPLETED rows with a finite
// objective), the fraction of its trials whose objective is at most x.
export function drawEdf(box, series, objective, opts) {
  const all = series.flatMap((s) => s.rows.map((r) => r.objective));
  box.setAttribute('data-series', series.length);
  box.setAttribute('data-points', all.length);
  if (all.length === 0) {
    note(box, 'edf-empty', 'No completed trial yet.');
    return;
  }
  const log = opts.logObjective && allPositive(all);
  const frame = new Frame(box, {width: Math.min(opts.width, 760),
                                height: 300});
  const x = makeScale({domain: extent(all, log) || [0, 1], log,
                       range: frame.xRange()});
  const y = d3.scaleLinear().domain([0, 1]).range(
      [frame.yRange()[0] - 4, frame.yRange()[1] + 4]);
  frame.axisBottom(makeAxis('bottom', x), objective.name + (log ? ' (log)'
                                                                : ''));
  frame.axisLeft(d3.axisLeft(y).ticks(5).tickFormat(d3.format('.0%')),
                 'share of trials ≤ x');
  const ctx = frame.ctx;
  const xs = [];
  const ys = [];
  const hits = [];
  for (const s of series) {
    const sorted = s.rows.filter((r) => position(x, r.objective) !== null)
        .sort((a, b) => a.objective - b.objective);
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(frame.xRange()[0], y(0));
    sorted.forEach((row, i) => {
      const px = x(row.objective);
      ctx.lineTo(px, y(i / sorted.length));
      ctx.lineTo(px, y((i + 1) / sorted.length));
      xs.push(px);
      ys.push(y((i + 1) / sorted.length));
      hits.push({series: s, row, fraction: (i + 1) / sorted.length});
    });
    ctx.lineTo(frame.xRange()[1], y(1));
    ctx.stroke();
  }
  if (series.length > 1) {
    legend(frame.svg, frame.margin.left + 8, 10, series.map(
        (s) => ({label: s.name, color: s.color, shape: 'line'})));
  }
  const fx = Float32Array.from(xs);
  const fy = Float32Array.from(ys);
  frame.interact((mx, my) => {
    const i = nearest(fx, fy, hits.length, mx, my, 10);
    if (i < 0) return null;
    const {series: s, row, fraction} = hits[i];
    return {id: row.id, study: s.name, x: fx[i], y: fy[i],
            html: tipHtml(`trial ${row.id}` +
                          (series.length > 1 ? ` of ${s.name}` : ''), [
              [objective.name, row.objective],
              ['share ≤ this', `${(100 * fraction).toFixed(1)}%`]])};
  }, (id, hit) => opts.open(id, hit.study));
}

// ----- Importance -----

// Horizontal bars of the server's fANOVA importances, with their spread
// over the forest's trees; onPick(name) when a bar is clicked.
export function drawImportance(box, answer, onPick) {
  const params = (answer.parameters || []).map((p) => ({
    name: p.name, importance: Number(p.importance), stddev: Number(p.stddev),
  })).sort((a, b) => b.importance - a.importance);
  box.setAttribute('data-params', params.length);
  box.setAttribute('data-trials', answer.trials);
  box.setAttribute('data-metric', answer.objective || '');
  if (params.length === 0) {
    note(box, 'importance-empty', answer.message ||
         'No importance yet.');
    return;
  }
  const rowHeight = 24;
  const width = 620;
  const left = 150;
  const height = params.length * rowHeight + 40;
  const svg = d3.create('svg').attr('width', width).attr('height', height);
  const x = d3.scaleLinear().domain([0, 1]).range([left, width - 60]);
  params.forEach((p, i) => {
    const g = svg.append('g').attr('class', 'bar-row')
        .attr('data-param', p.name)
        .attr('data-importance', p.importance.toFixed(4))
        .attr('transform', `translate(0,${i * rowHeight + 6})`)
        .style('cursor', 'pointer').on('click', () => onPick(p.name));
    g.append('title').text(
        `${p.name}: ${(100 * p.importance).toFixed(1)}% of the variance ` +
        `(± ${(100 * p.stddev).toFixed(1)} over the trees); click for its ` +
        'contour');
    g.append('text').attr('x', left - 8).attr('y', 15)
        .attr('text-anchor', 'end').text(p.name);
    g.append('rect').attr('class', 'bar').attr('x', left).attr('y', 4)
        .attr('height', 14)
        .attr('width', Math.max(1, x(p.importance) - left));
    const lo = x(Math.max(0, p.importance - p.stddev));
    const hi = x(Math.min(1, p.importance + p.stddev));
    g.append('line').attr('class', 'whisker').attr('x1', lo).attr('x2', hi)
        .attr('y1', 11).attr('y2', 11);
    g.append('text').attr('x', x(p.importance) + 6).attr('y', 15)
        .text((100 * p.importance).toFixed(1) + '%');
  });
  svg.append('g').attr('class', 'axis')
      .attr('transform', `translate(0,${params.length * rowHeight + 8})`)
      .call(d3.axisBottom(x).ticks(5).tickFormat(d3.format('.0%')));
  const explained = params.reduce((a, p) => a + p.importance, 0);
  box.replaceChildren(svg.node(), el('p', {class: 'note'},
      `fANOVA on a random forest (${answer.trees} trees) over ` +
      `${answer.trials} completed trials: the share of ` +
      `${answer.objective || 'the objective'}'s ` +
      `variance each parameter explains alone; the other ` +
      `${Math.max(0, 100 * (1 - explained)).toFixed(0)}% comes from ` +
      'interactions. Stopped, failed and infeasible trials are left out.'));
}

// ----- Comparison -----

// Best so far by trial number for each study {name, color, data}.
export function drawCompareHistory(box, studies, opts) {
  const series = studies.map((s) => {
    const points = [];
    let best = null;
    for (const row of s.data.sorted()) {
      if (row.state !== 'COMPLETED' || !finite(row.objective)) continue;
      if (best === null || s.data.better(row.objective, best)) {
        best = row.objective;
      }
      points.push({row, best});
    }
    return {...s, points};
  });
  box.setAttribute('data-series', series.length);
  box.setAttribute('data-points',
                   series.map((s) => s.points.length).join(','));
  const all = series.flatMap((s) => s.points.map((p) => p.best));
  if (all.length === 0) {
    note(box, 'compare-empty', 'None of these studies has a completed trial.');
    return;
  }
  const log = opts.logObjective && allPositive(all);
  const frame = new Frame(box, {width: opts.width, height: 340});
  const maxId = Math.max(...series.flatMap(
      (s) => s.points.map((p) => p.row.id)), 1);
  const x = makeScale({domain: [1, maxId], range: frame.xRange(),
                       integer: true});
  x.domain([0.5, maxId + 0.5]);
  const y = makeScale({domain: extent(all, log) || [0, 1], log,
                       range: [frame.yRange()[0] - 4, frame.yRange()[1] + 4]});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'trial');
  frame.axisLeft(makeAxis('left', y), 'best so far' + (log ? ' (log)' : ''));
  const ctx = frame.ctx;
  const xs = [];
  const ys = [];
  const hits = [];
  for (const s of series) {
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    let previous = null;
    for (const p of s.points) {
      const px = x(p.row.id);
      const py = y(p.best);
      if (previous === null) ctx.moveTo(px, py);
      else ctx.lineTo(px, previous);  // a step: level until it improves
      ctx.lineTo(px, py);
      previous = py;
      xs.push(px);
      ys.push(py);
      hits.push({s, p});
    }
    ctx.stroke();
  }
  legend(frame.svg, frame.margin.left + 8, 10, series.map(
      (s) => ({label: s.name, color: s.color, shape: 'line'})));
  const fx = Float32Array.from(xs);
  const fy = Float32Array.from(ys);
  frame.interact((mx, my) => {
    const i = nearest(fx, fy, hits.length, mx, my, 10);
    if (i < 0) return null;
    const {s, p} = hits[i];
    return {id: p.row.id, study: s.name, x: fx[i], y: fy[i],
            html: tipHtml(`${s.name}: trial ${p.row.id}`, [
              [s.data.objective.name, p.row.objective],
              ['best so far', p.best]])};
  }, (id, hit) => opts.open(id, hit.study));
}

// ----- Pareto front (two or more objectives) -----

// The first two objectives of every COMPLETED trial, one against the
// other: the Pareto front (feasible trials no other feasible trial beats
// in every objective, over all the study's objectives) as large orange
// points joined by a step line, other feasible trials blue, trials that
// miss a constraint as grey crosses. Non-finite values are left out and
// counted (data-unplotted).
export function drawPareto(box, data, opts) {
  const [ox, oy] = data.objectives;
  const front = data.front();
  const onFront = new Set(front.map((r) => r.id));
  const rows = [];
  let unplotted = 0;
  for (const row of data.sorted()) {
    if (row.state !== 'COMPLETED') continue;
    const a = row.metrics[ox.index];
    const b = row.metrics[oy.index];
    if (!finite(a) || !finite(b)) {
      ++unplotted;
      continue;
    }
    rows.push(row);
  }
  const infeasible = rows.filter((r) => !isFeasible(r, data.metricSpecs));
  box.setAttribute('data-points', rows.length);
  box.setAttribute('data-front', front.length);
  box.setAttribute('data-front-ids', front.map((r) => r.id).join(','));
  box.setAttribute('data-infeasible', infeasible.length);
  box.setAttribute('data-unplotted', unplotted);
  if (rows.length === 0) {
    note(box, 'pareto-empty', 'No completed trial has both objectives yet.');
    return;
  }
  const frame = new Frame(box, {width: opts.width, height: 380});
  const xs0 = rows.map((r) => r.metrics[ox.index]);
  const ys0 = rows.map((r) => r.metrics[oy.index]);
  const x = makeScale({domain: extent(xs0), range: frame.xRange()});
  const y = makeScale({domain: extent(ys0), range: frame.yRange()});
  const arrow = (m) => `${m.name} (${m.minimize ? 'minimize' : 'maximize'})`;
  frame.axisBottom(makeAxis('bottom', x), arrow(ox));
  frame.axisLeft(makeAxis('left', y), arrow(oy));
  const n = rows.length;
  const xs = new Float32Array(n);
  const ys = new Float32Array(n);
  rows.forEach((row, i) => {
    xs[i] = x(row.metrics[ox.index]);
    ys[i] = y(row.metrics[oy.index]);
  });
  const ctx = frame.ctx;
  const feasibleIdx = [];
  const infeasibleIdx = [];
  const frontIdx = [];
  rows.forEach((row, i) => {
    if (onFront.has(row.id)) frontIdx.push(i);
    else if (isFeasible(row, data.metricSpecs)) feasibleIdx.push(i);
    else infeasibleIdx.push(i);
  });
  const sub = (list) => [Float32Array.from(list, (i) => xs[i]),
                         Float32Array.from(list, (i) => ys[i]),
                         list.map(() => null)];
  const [fx, fy] = sub(feasibleIdx);
  drawPoints(ctx, fx, fy, feasibleIdx.map(() => STATE_COLORS.COMPLETED),
             feasibleIdx.length, n > 3000 ? 1.5 : 3);
  drawCrosses(ctx, infeasibleIdx.map((i) => xs[i]),
              infeasibleIdx.map((i) => ys[i]), MISSED_COLOR);
  // The front of the two plotted objectives as a step line (exact when
  // there are two objectives; with more, the front's points in order).
  const ordered = [...frontIdx].sort((a, b) => xs[a] - xs[b]);
  if (data.objectives.length === 2 && ordered.length > 1) {
    ctx.strokeStyle = '#d9480f';
    ctx.lineWidth = 1.5;
    ctx.beginPath();
    // The boundary of what the front dominates: along x first when x is
    // minimized (the next point's x is worse), along y first otherwise.
    ordered.forEach((i, k) => {
      if (k === 0) {
        ctx.moveTo(xs[i], ys[i]);
        return;
      }
      const before = ordered[k - 1];
      if (ox.minimize) ctx.lineTo(xs[i], ys[before]);
      else ctx.lineTo(xs[before], ys[i]);
      ctx.lineTo(xs[i], ys[i]);
    });
    ctx.stroke();
  }
  const [px, py] = sub(frontIdx);
  drawPoints(ctx, px, py, frontIdx.map(() => '#d9480f'), frontIdx.length, 5);
  // The front's points are links too, for keyboards (the mouse reaches
  // them through the surface's hover and click, so they take no pointer
  // events).
  const links = frame.svg.append('g').attr('class', 'front-links');
  for (const i of frontIdx) {
    links.append('a').attr('href', `#study=${encodeURIComponent(
        data.study.name)}&trial=${rows[i].id}`)
        .attr('data-id', rows[i].id)
        .append('circle').attr('cx', xs[i]).attr('cy', ys[i]).attr('r', 5)
        .attr('fill', 'transparent').style('pointer-events', 'none');
  }
  const items = [
    {label: `Pareto front (${front.length})`, color: '#d9480f'},
    {label: 'feasible', color: STATE_COLORS.COMPLETED}];
  if (infeasibleIdx.length) {
    items.push({label: 'misses a constraint', color: MISSED_COLOR,
                shape: 'cross'});
  }
  legend(frame.svg, frame.margin.left + 8, 10, items);
  frame.interact((mx, my) => {
    const i = nearest(xs, ys, n, mx, my, 10);
    if (i < 0) return null;
    const row = rows[i];
    const extra = data.objectives.slice(1).map(
        (m) => [m.name, row.metrics[m.index]]);
    extra.push(['Pareto front', onFront.has(row.id) ? 'yes' : 'no']);
    if (!isFeasible(row, data.metricSpecs)) {
      extra.push(['feasible', 'no']);
    }
    return {id: row.id, x: xs[i], y: ys[i], html: trialTip(data, row, extra)};
  }, (id) => opts.open(id));
}
