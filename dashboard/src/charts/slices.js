// The slices: an objective against each parameter, one panel each, the
// points coloured by trial number (categories spread by a small jitter).

import {el} from '../dom.js';
import {Frame, allPositive, d3, drawPoints, extent, finite, jitter, makeAxis,
        makeScale, nearest, note, paramScale, position,
        trialTip} from './common.js';

// The panels' grid for `panels` parameters across `width` pixels: as many
// columns of at least 330 px as fit (at least one, at most one per
// parameter), and each panel's width, less 8 px between them.
export function sliceLayout(width, panels) {
  const columns = Math.max(1, Math.min(panels, Math.floor(width / 330)));
  return {columns, width: Math.floor(width / columns) - 8};
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
  const {width} = sliceLayout(opts.width, data.params.length);
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
