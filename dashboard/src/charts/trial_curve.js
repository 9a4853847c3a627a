// One trial's learning curve on its page: any metric by step. The current
// attempt's curve (the trial's result) solid in the colour of its state;
// each earlier attempt's (what a lost attempt measured past the checkpoint
// the next one resumed from, or all of it without one) dashed and grey,
// labelled "attempt 1 (lease expired)", never joined to the current one;
// the checkpoint's step as a dashed line.

import {STATE_COLORS, int64, num} from '../model.js';
import {attemptLabel} from '../format.js';
import {Frame, allPositive, extent, legend, makeAxis, makeScale, nearest,
        position, tipHtml} from './common.js';

// Earlier attempts' curves: grey, each its own dash.
export const EARLIER_COLOR = '#8a8a8a';
const DASHES = [[6, 4], [2, 3], [10, 3, 2, 3], [4, 6]];

// The dash of the k-th earlier attempt drawn (by number), in turn.
export function earlierDash(k) {
  return DASHES[k % DASHES.length];
}

// [step, value] of `metric` in each of `measurements` that has it.
function pointsOf(measurements, metric) {
  const points = [];
  for (const m of measurements || []) {
    if (m.metrics && metric in m.metrics) {
      points.push([int64(m.step), num(m.metrics[metric])]);
    }
  }
  return points;
}

// The curves of `metric` in `trial`: {current: {number, label, points},
// earlier: [{number, label, points}], checkpointStep}. `current` is
// trial.measurements alone (number 0 and label '' from a server without
// attempts); `earlier` the earlier attempts by number, those without a
// value of `metric` left out.
export function attemptCurves(trial, metric) {
  const number = Number(trial.attempt || 0);
  const earlier = (trial.earlier_attempts || [])
      .map((a) => ({number: Number(a.number || 0),
                    label: attemptLabel(Number(a.number || 0),
                                        a.end_reason || ''),
                    points: pointsOf(a.measurements, metric)}))
      .filter((c) => c.points.length > 0)
      .sort((a, b) => a.number - b.number);
  return {
    current: {number, label: number ? `${attemptLabel(number)} (current)`
                                    : '',
              points: pointsOf(trial.measurements, metric)},
    earlier, checkpointStep: int64(trial.checkpoint_step),
  };
}

// The legend: the current attempt (when it has points), then each
// earlier one (at most `max`, then how many more). Only when there are
// earlier attempts.
export function legendItems(curves, color, max = 4) {
  if (curves.earlier.length === 0) return [];
  const items = curves.current.points.length
      ? [{label: curves.current.label || 'current', color, shape: 'line'}]
      : [];
  curves.earlier.slice(0, max).forEach((c, k) => items.push(
      {label: c.label, color: EARLIER_COLOR, shape: 'line',
       dash: earlierDash(k)}));
  const more = curves.earlier.length - max;
  if (more > 0) {
    items.push({label: `+${more} earlier`, color: EARLIER_COLOR,
                shape: 'line', dash: earlierDash(max)});
  }
  return items;
}

// Draws `curves` (attemptCurves) into `box`, the current attempt's in
// `color`. opts: {metric, log (asked for; used when every value is
// positive), width, id (the trial's, for the hover)}.
export function drawTrialCurve(box, curves, color, opts) {
  const all = [curves.current, ...curves.earlier]
      .filter((c) => c.points.length > 0);
  const steps = all.flatMap((c) => c.points.map((p) => p[0]));
  const values = all.flatMap((c) => c.points.map((p) => p[1]));
  const log = opts.log && allPositive(values);
  const frame = new Frame(box, {width: opts.width, height: 280});
  const sMin = Math.min(...steps);
  const sMax = Math.max(Math.max(...steps), sMin + 1);
  const x = makeScale({domain: [sMin, sMax], range: frame.xRange(),
                       integer: true});
  const y = makeScale({domain: extent(values, log) || [0, 1], log,
                       range: [frame.yRange()[0] - 4,
                               frame.yRange()[1] + 4]});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'step');
  frame.axisLeft(makeAxis('left', y), opts.metric + (log ? ' (log)' : ''));
  const cp = curves.checkpointStep;
  if (cp > 0 && cp >= sMin && cp <= sMax) {
    frame.svg.append('line').attr('class', 'checkpoint')
        .attr('x1', x(cp)).attr('x2', x(cp))
        .attr('y1', frame.margin.top).attr('y2', frame.yRange()[0]);
    frame.svg.append('text').attr('class', 'checkpoint-label')
        .attr('x', x(cp) + 3).attr('y', frame.yRange()[0] - 6)
        .text(`checkpoint (step ${cp})`);
  }
  // Pixels of every point, the current attempt's first, and the curve
  // and index of each.
  const n = steps.length;
  const xs = new Float32Array(n);
  const ys = new Float32Array(n);
  const owner = [];
  let i = 0;
  for (const c of [curves.current, ...curves.earlier]) {
    c.points.forEach(([s, v], j) => {
      xs[i] = x(s);
      const p = position(y, v);
      ys[i] = p === null ? NaN : p;
      owner.push([c, j]);
      ++i;
    });
  }
  const ctx = frame.ctx;
  // Earlier attempts first, under the current one.
  let start = curves.current.points.length;
  curves.earlier.forEach((c, k) => {
    stroke(ctx, xs, ys, start, c.points.length, EARLIER_COLOR, 1.5,
           earlierDash(k), 2);
    start += c.points.length;
  });
  stroke(ctx, xs, ys, 0, curves.current.points.length, color, 2, [], 2.5);
  const items = legendItems(curves, color);
  if (items.length) legend(frame.svg, frame.margin.left + 8, 10, items);
  frame.interact((mx, my) => {
    const k = nearest(xs, ys, n, mx, my, 12);
    if (k < 0) return null;
    const [c, j] = owner[k];
    const [s, v] = c.points[j];
    const title = c === curves.current
        ? `step ${s}` + (c.label ? `, ${c.label}` : '')
        : `step ${s}, ${c.label}: not the trial's result`;
    return {id: opts.id, x: xs[k], y: ys[k],
            html: tipHtml(title, [[opts.metric, v]])};
  }, () => {});
}

// Points [start, start + count) as one line (broken where a value is not
// drawn) with a dot at each.
function stroke(ctx, xs, ys, start, count, color, width, dash, radius) {
  ctx.strokeStyle = color;
  ctx.fillStyle = color;
  ctx.lineWidth = width;
  ctx.setLineDash(dash);
  ctx.beginPath();
  let pen = false;
  for (let i = start; i < start + count; ++i) {
    if (Number.isNaN(ys[i])) {
      pen = false;
      continue;
    }
    if (pen) ctx.lineTo(xs[i], ys[i]);
    else ctx.moveTo(xs[i], ys[i]);
    pen = true;
  }
  ctx.stroke();
  ctx.setLineDash([]);
  ctx.beginPath();
  for (let i = start; i < start + count; ++i) {
    if (Number.isNaN(ys[i])) continue;
    ctx.moveTo(xs[i] + radius, ys[i]);
    ctx.arc(xs[i], ys[i], radius, 0, 2 * Math.PI);
  }
  ctx.fill();
}
