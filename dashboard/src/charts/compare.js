// The comparison of studies: each study's best so far by trial number, a
// step line per study (the study list's compare view, beside their EDFs).

import {Frame, allPositive, extent, finite, legend, makeAxis, makeScale,
        nearest, note, tipHtml} from './common.js';

// A study's best-so-far series: [{row, best}] for each COMPLETED row with a
// finite objective, in trial order, `best` the best objective (by
// data.better) up to and including it.
export function bestSoFarSeries(data) {
  const points = [];
  let best = null;
  for (const row of data.sorted()) {
    if (row.state !== 'COMPLETED' || !finite(row.objective)) continue;
    if (best === null || data.better(row.objective, best)) {
      best = row.objective;
    }
    points.push({row, best});
  }
  return points;
}

// Best so far by trial number for each study {name, color, data}.
export function drawCompareHistory(box, studies, opts) {
  const series = studies.map((s) => ({...s, points: bestSoFarSeries(s.data)}));
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
