// The constraints, one panel each under the history: the constrained
// metric by trial number, each bound a dashed line, the region outside
// them shaded, the trials outside them crossed.

import {el} from '../dom.js';
import {STATE_COLORS, boundText, outsideBounds} from '../model.js';
import {FINISHED, Frame, drawCrosses, drawPoints, extent, finite, legend,
        makeAxis, makeScale, nearest, trialTip} from './common.js';

// What constraint m's panel shows of `rows`: the finished trials with a
// finite value of m (points) and those among them outside its bounds
// (outside).
export function constraintPoints(rows, m) {
  const points = rows.filter(
      (r) => FINISHED.has(r.state) && finite(r.metrics[m.index] ?? null));
  const outside = points.filter((r) => outsideBounds(m, r.metrics[m.index]));
  return {points, outside};
}

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
  const {points, outside} = constraintPoints(rows, m);
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
