// The intermediate values (learning curves): every trial's objective by
// step, coloured by how the trial ended, a cross where a stopped trial
// stopped, and the rungs of ASHA or HYPERBAND as dashed lines.

import {STATE_COLORS} from '../model.js';
import {Frame, allPositive, d3, extent, legend, makeAxis, makeScale, note,
        paramPairs, position, tipHtml} from './common.js';

// The colour group of a trial in state `state`: 'STOPPED' (stopping too),
// 'COMPLETED', 'ACTIVE' (paused too) or 'OTHER'.
export function curveGroup(state) {
  return state === 'STOPPED' || state === 'STOPPING' ? 'STOPPED'
      : state === 'COMPLETED' ? 'COMPLETED'
      : state === 'ACTIVE' || state === 'PAUSED' ? 'ACTIVE' : 'OTHER';
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
  const groupOf = (row) => curveGroup(row.state);
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
