// The intermediate values (learning curves): every trial's objective by
// step, coloured by how the trial ended (paused trials apart), a cross
// where a stopped trial stopped, a dot on each value with no drawn
// neighbour (a single measurement draws no line), and the rungs of ASHA or
// HYPERBAND as dashed lines.

import {STATE_COLORS} from '../model.js';
import {Frame, allPositive, d3, extent, legend, makeAxis, makeScale, note,
        paramPairs, position, tipHtml} from './common.js';

// The colour group of a trial in state `state`: 'STOPPED' (stopping too),
// 'COMPLETED', 'ACTIVE', 'PAUSED' or 'OTHER'. Paused trials are a group of
// their own: ASHA pauses most trials at a rung, and drawn as running they
// looked like work in progress.
export function curveGroup(state) {
  return state === 'STOPPED' || state === 'STOPPING' ? 'STOPPED'
      : state === 'COMPLETED' ? 'COMPLETED'
      : state === 'ACTIVE' ? 'ACTIVE'
      : state === 'PAUSED' ? 'PAUSED' : 'OTHER';
}

// The groups in drawing order (later on top) with their colours and
// legend labels.
export const CURVE_GROUPS = [
  {group: 'OTHER', color: '#999', label: null},
  {group: 'COMPLETED', color: STATE_COLORS.COMPLETED, label: 'completed'},
  {group: 'ACTIVE', color: STATE_COLORS.ACTIVE, label: 'running'},
  {group: 'PAUSED', color: STATE_COLORS.PAUSED, label: 'paused'},
  {group: 'STOPPED', color: '#c23030',
   label: 'stopped (\u00d7 where it stopped)'},
];

// The indices of the values of one curve (`ys`, NaN where a value is not
// drawn) that no line passes through: drawn values whose neighbours on
// both sides are absent or not drawn. A trial with one measurement (what
// ASHA's first rung leaves a paused trial) is all such a value; without a
// mark of its own it was invisible.
export function isolatedPoints(ys) {
  const out = [];
  for (let k = 0; k < ys.length; ++k) {
    if (Number.isNaN(ys[k])) continue;
    const before = k > 0 && !Number.isNaN(ys[k - 1]);
    const after = k + 1 < ys.length && !Number.isNaN(ys[k + 1]);
    if (!before && !after) out.push(k);
  }
  return out;
}

// The legend's items: each group that has a curve, in drawing order.
export function curveLegend(groups) {
  return CURVE_GROUPS.filter((g) => g.label && groups.has(g.group))
      .map((g) => ({label: g.label, color: g.color, shape: 'line'}));
}

// The curve passing nearest to the pointer (mx, my), each curve c its
// pixels px[c], py[c] (x increasing, NaN y where a value is not drawn)
// and taken as straight between its points: {index, y} (its y at mx), or
// null when no curve within 4 px of mx along x passes within 8 px.
export function nearestCurve(px, py, mx, my) {
  let best = -1;
  let bestD = 8;
  let bestY = 0;
  for (let c = 0; c < px.length; ++c) {
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
  return best < 0 ? null : {index: best, y: bestY};
}

// Every trial's objective by step; stopped trials red with a cross where
// they stopped, running ones green; ASHA's rungs as dashed lines.
export function drawCurves(box, data, opts, rungs) {
  const curves = [];
  let stopped = 0;
  let paused = 0;
  let points = 0;
  for (const row of data.sorted()) {
    if (row.steps.length === 0) continue;
    curves.push(row);
    points += row.steps.length;
    if (row.state === 'STOPPED' || row.state === 'STOPPING') ++stopped;
    if (row.state === 'PAUSED') ++paused;
  }
  box.setAttribute('data-curves', curves.length);
  box.setAttribute('data-stopped', stopped);
  box.setAttribute('data-paused', paused);
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
  const groupOf = (row) => curveGroup(row.state);
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
  const alpha = curves.length > 2000 ? 0.25 : curves.length > 300 ? 0.45
                                                                  : 0.8;
  const present = new Set();
  let markers = 0;
  for (const {group, color} of CURVE_GROUPS) {
    ctx.globalAlpha = alpha;
    ctx.strokeStyle = color;
    ctx.lineWidth = 1;
    ctx.beginPath();
    const dots = [];
    curves.forEach((row, c) => {
      if (groupOf(row) !== group) return;
      present.add(group);
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
      for (const k of isolatedPoints(py[c])) dots.push([px[c][k], py[c][k]]);
    });
    ctx.stroke();
    // A value no line passes through gets a dot, opaque so that it shows.
    ctx.globalAlpha = 1;
    ctx.fillStyle = color;
    ctx.beginPath();
    for (const [dx, dy] of dots) {
      ctx.moveTo(dx + 3, dy);
      ctx.arc(dx, dy, 3, 0, 2 * Math.PI);
    }
    ctx.fill();
    markers += dots.length;
  }
  box.setAttribute('data-markers', markers);
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
  const items = curveLegend(present);
  box.setAttribute('data-legend', items.map((i) => i.label).join('|'));
  legend(frame.svg, frame.margin.left + 8, 10, items);

  // Hover: the curve passing nearest to the pointer, interpolated at its x.
  frame.interact((mx, my) => {
    const hit = nearestCurve(px, py, mx, my);
    if (!hit) return null;
    const {index: best, y: bestY} = hit;
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
