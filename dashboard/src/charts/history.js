// The optimization history: each finished trial's objective by trial
// number, the best so far, stopped trials hollow, trials that miss a
// constraint crossed, non-finite values clipped to the plot's edge and
// marked, INFEASIBLE trials crossed on a strip below; a study whose trials
// are all INFEASIBLE gets a note saying so and why.

import {STATE_COLORS, isFeasible} from '../model.js';
import {FINISHED, Frame, MISSED_COLOR, allPositive, drawCrosses, drawPoints,
        extent, legend, makeAxis, makeScale, nearest, note,
        trialTip} from './common.js';

// The steps of the best-so-far line over `rows` (in trial order): [id,
// best] at each row that `counts` and whose objective is better (by
// better(a, b)) than every counted one before it.
export function bestSoFarSteps(rows, better, counts) {
  let best = null;
  const steps = [];
  for (const row of rows) {
    if (!counts(row)) continue;
    if (best === null || better(row.objective, best)) {
      best = row.objective;
      steps.push([row.id, best]);
    }
  }
  return steps;
}

// The `limit` most common reasons of `rows` ('no reason given' for none):
// [reason, count], most common first, ties in order of first appearance.
export function commonReasons(rows, limit = 3) {
  const reasons = new Map();
  for (const row of rows) {
    const r = row.reason || 'no reason given';
    reasons.set(r, (reasons.get(r) || 0) + 1);
  }
  return [...reasons.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
}

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
      const top = commonReasons(infeasible, 3)
          .map(([r, n]) => `${n}× “${r}”`).join(', ');
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
  const bestPath = bestSoFarSteps(
      points, (a, b) => data.better(a, b),
      (row) => row.state === 'COMPLETED' && Number.isFinite(row.objective) &&
               !missesConstraint(row));
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
