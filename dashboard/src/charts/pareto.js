// The Pareto front (studies with two or more objectives, in place of the
// history): the first two objectives of every COMPLETED trial, one
// against the other, the front large, linked and joined by a step line.

import {STATE_COLORS, isFeasible} from '../model.js';
import {Frame, MISSED_COLOR, drawCrosses, drawPoints, extent, finite, legend,
        makeAxis, makeScale, nearest, note, trialTip} from './common.js';

// The step line through the front's points [[x, y], ...] (in order of x):
// the boundary of what they dominate. From each point to the next along x
// first when x is minimized (the next point's x is worse), along y first
// otherwise: the points with a corner between each two.
export function frontStepVertices(points, xMinimize) {
  const vertices = [];
  points.forEach(([x, y], k) => {
    if (k > 0) {
      const [bx, by] = points[k - 1];
      vertices.push(xMinimize ? [x, by] : [bx, y]);
    }
    vertices.push([x, y]);
  });
  return vertices;
}

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
    frontStepVertices(ordered.map((i) => [xs[i], ys[i]]), ox.minimize)
        .forEach(([vx, vy], k) => {
          if (k === 0) ctx.moveTo(vx, vy);
          else ctx.lineTo(vx, vy);
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
