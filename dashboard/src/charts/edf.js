// The empirical distribution (EDF) of the objective: for each series of
// trials, the share whose objective is at most x, as a step line; one
// series on the study page, one per study in the comparison.

import {Frame, allPositive, d3, extent, legend, makeAxis, makeScale, nearest,
        note, position, tipHtml} from './common.js';

// The steps of the EDF of `rows` (those `shown` by the axis), by objective
// ascending: each row with the share of rows below it (below) and at or
// below it (fraction), i / n and (i + 1) / n for the i-th of n.
export function edfSteps(rows, shown) {
  const sorted = rows.filter(shown).sort((a, b) => a.objective - b.objective);
  return sorted.map((row, i) => ({row, below: i / sorted.length,
                                  fraction: (i + 1) / sorted.length}));
}

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
    const steps = edfSteps(s.rows, (r) => position(x, r.objective) !== null);
    ctx.strokeStyle = s.color;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(frame.xRange()[0], y(0));
    for (const {row, below, fraction} of steps) {
      const px = x(row.objective);
      ctx.lineTo(px, y(below));
      ctx.lineTo(px, y(fraction));
      xs.push(px);
      ys.push(y(fraction));
      hits.push({series: s, row, fraction});
    }
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
