// The contour: the objective over two parameters, as filled isobands of
// the COMPLETED trials' mean per grid cell (gaps filled by Laplace
// interpolation) over the search domain, the trials on top and a colour
// bar. A categorical parameter, or too few trials, gets the trials alone,
// coloured by the objective, and a line saying why (as the Python client's
// plot_contour does with kind="auto").

import {formatNumber} from '../format.js';
import {Frame, allPositive, completedRows, d3, extent, jitter, makeAxis,
        makeScale, nearest, note, position, trialTip} from './common.js';

// Fewer trials than this get no contour: a 40 by 40 grid filled from a
// few points is nearly all interpolation, and its bands looked like
// knowledge the study does not have.
export const MIN_CONTOUR_TRIALS = 10;

// What the plot of parameters px and py over n trials (that have both)
// draws: {mode: 'contour'}, or {mode: 'scatter', why} (a sentence for
// people). n = 0 draws nothing (drawContour says so).
export function contourMode(px, py, n) {
  const categorical = [px, py].filter((p) => p.kind === 'categorical');
  if (categorical.length) {
    return {mode: 'scatter', why: `${categorical.map((p) => p.name)
        .join(' and ')} ${categorical.length > 1 ? 'are' : 'is'} ` +
        'categorical: the trials alone, no interpolation between ' +
        'categories.'};
  }
  if (n < MIN_CONTOUR_TRIALS) {
    return {mode: 'scatter', why: `A contour needs at least ` +
        `${MIN_CONTOUR_TRIALS} completed trials; ${n} so far ` +
        `${n === 1 ? 'has' : 'have'} both parameters: the trials alone.`};
  }
  return {mode: 'contour', why: ''};
}

// A numeric parameter's domain on the contour: its search domain (the
// spec's [min, max]) exactly, widened only to values outside it (a spec
// changed after they were tried); the values' extent when the spec has no
// range. A log axis keeps positive ends. (The padded, rounded scale of
// the other plots drew the contour from -6 to 12 for [-5, 10].)
export function contourDomain(p, values, log = false) {
  const seen = extent(values, log);
  let lo = p.min;
  let hi = p.max;
  if (lo === null || hi === null || !(hi > lo) || (log && lo <= 0)) {
    return seen || [0, 1];
  }
  if (seen) {
    lo = Math.min(lo, seen[0]);
    hi = Math.max(hi, seen[1]);
  }
  return [lo, hi];
}

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

// The contour's grid (nx by ny cells, row-major, x fastest) from each
// cell's sum and count of values: a cell with values holds their mean; an
// empty cell starts at the mean of those and is then moved, in Gauss-Seidel
// sweeps (at most 300, until no cell changes by 1e-9), to the mean of its
// neighbours: Laplace's equation with the known cells fixed, so that the
// gaps are filled smoothly between them (as Plotly's contour does).
export function fillGrid(sum, count, nx, ny) {
  const grid = new Float64Array(nx * ny);
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
  for (let sweep = 0; sweep < 300; ++sweep) {
    let change = 0;
    for (let j = 0; j < ny; ++j) {
      for (let i = 0; i < nx; ++i) {
        const k = j * nx + i;
        if (count[k]) continue;
        let s = 0;
        let m = 0;
        if (i > 0) { s += grid[k - 1]; ++m; }
        if (i + 1 < nx) { s += grid[k + 1]; ++m; }
        if (j > 0) { s += grid[k - nx]; ++m; }
        if (j + 1 < ny) { s += grid[k + nx]; ++m; }
        const v = s / m;
        change = Math.max(change, Math.abs(v - grid[k]));
        grid[k] = v;
      }
    }
    if (change < 1e-9) break;
  }
  return grid;
}

// The objective over two parameters: the COMPLETED trials' mean per cell
// of a grid over the search domain (in each parameter's scale: log space
// for a log axis), cells without trials filled by Laplace interpolation
// (each the mean of its neighbours, iterated, as Plotly's contour fills
// gaps), then d3-contour's filled isobands, with the trials on top. A
// categorical parameter or too few trials (contourMode): the trials alone,
// coloured by the objective, and why (#contour-why). The box's data-mode
// says which ('contour', 'scatter' or 'none'), data-x-domain and
// data-y-domain the numeric axes' ends.
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
  if (used.length === 0) {
    box.setAttribute('data-levels', 0);
    box.setAttribute('data-mode', 'none');
    note(box, 'contour-empty',
         'No completed trial has both parameters yet.');
    return;
  }
  const {mode, why} = contourMode(px, py, used.length);
  box.setAttribute('data-mode', mode);
  const values = used.map((r) => r.objective);
  const logZ = opts.logObjective && allPositive(values);
  const z = logZ ? (v) => Math.log10(v) : (v) => v;
  const frame = new Frame(box, {width: Math.min(opts.width, 760),
                                height: 460,
                                margin: {top: why ? 30 : 12, right: 90,
                                         bottom: 44, left: 70}});
  // Categories, else exactly the search domain (log space for a log axis).
  const axisScale = (p, range) => {
    if (p.kind === 'categorical') {
      return {scale: makeScale({categories: p.categories, range}),
              log: false};
    }
    const v = used.map((r) => r.params[p.index]);
    const log = p.log && opts.logParams && allPositive(v);
    const domain = contourDomain(p, v, log);
    return {scale: (log ? d3.scaleLog() : d3.scaleLinear())
        .domain(domain).range(range), log};
  };
  const xs = axisScale(px, frame.xRange());
  const ys = axisScale(py, frame.yRange());
  for (const [axis, s] of [['x', xs], ['y', ys]]) {
    box.setAttribute(`data-${axis}-domain`, s.scale.bandwidth ? ''
        : s.scale.domain().join(','));
  }
  frame.axisBottom(makeAxis('bottom', xs.scale,
                            {integer: px.kind === 'integer'}),
                   px.name + (xs.log ? ' (log)' : ''));
  frame.axisLeft(makeAxis('left', ys.scale, {integer: py.kind === 'integer'}),
                 py.name + (ys.log ? ' (log)' : ''));
  if (why) {
    frame.svg.append('text').attr('id', 'contour-why')
        .attr('class', 'chart-note').attr('x', frame.margin.left)
        .attr('y', 16).text(why);
  }

  let lo;
  let hi;
  if (mode === 'contour') {
    [lo, hi] = drawBands(frame, used, px, py, xs, ys, z, data, box);
  } else {
    box.setAttribute('data-levels', 0);
    [lo, hi] = d3.extent(used, (r) => z(r.objective));
  }
  const color = d3.scaleSequential(d3.interpolateViridis)
      .domain(data.objective.minimize ? [hi, lo] : [lo, hi]);
  // The trials: small and dark on the bands; without them, each in its
  // objective's colour.
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
  const ctx = frame.ctx;
  if (mode === 'contour') {
    ctx.fillStyle = 'rgba(20,20,20,0.75)';
    ctx.beginPath();
    const r = used.length > 3000 ? 1.2 : 2;
    for (let i = 0; i < used.length; ++i) {
      ctx.moveTo(tx[i] + r, ty[i]);
      ctx.arc(tx[i], ty[i], r, 0, 2 * Math.PI);
    }
    ctx.fill();
  } else {
    const r = used.length > 3000 ? 2 : 4.5;
    ctx.strokeStyle = 'rgba(20,20,20,0.6)';
    ctx.lineWidth = 0.6;
    used.forEach((row, i) => {
      ctx.beginPath();
      ctx.arc(tx[i], ty[i], r, 0, 2 * Math.PI);
      ctx.fillStyle = color(z(row.objective));
      ctx.fill();
      ctx.stroke();
    });
  }
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

// The filled isobands of the trials' objective (z of it) over two numeric
// parameters, on the frame's canvas, clipped to the plotting area;
// [lo, hi] of the grid.
function drawBands(frame, used, px, py, xs, ys, z, data, box) {
  // Grid coordinates along one axis: 40 cells over the axis' domain (the
  // search domain) in its scale.
  const gridAxis = (s) => {
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
  const gx = gridAxis(xs);
  const gy = gridAxis(ys);
  const sum = new Float64Array(gx.n * gy.n);
  const count = new Uint32Array(gx.n * gy.n);
  for (const row of used) {
    const i = gx.cell(row.params[px.index]);
    const j = gy.cell(row.params[py.index]);
    sum[j * gx.n + i] += z(row.objective);
    count[j * gx.n + i] += 1;
  }
  const grid = fillGrid(sum, count, gx.n, gy.n);
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
  return [lo, hi];
}
