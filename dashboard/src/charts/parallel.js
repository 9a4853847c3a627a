// Parallel coordinates: an axis per parameter, per constraint and for the
// objective, a line per COMPLETED trial; brushing an axis filters the
// lines and, through onBrush, the trial table.

import {formatNumber} from '../format.js';
import {isFeasible} from '../model.js';
import {Frame, MISSED_COLOR, allPositive, completedRows, d3, extent,
        makeAxis, makeScale, note, objectiveColors, paramScale, position,
        trialTip} from './common.js';

// The colour buckets of the lines: `values` ranked (ascending) and cut into
// `buckets` groups of equal size, so that each bucket is one stroke.
// bucketOf[i]: value i's bucket; middle[b]: the index of the value at the
// middle of bucket b, whose colour the bucket takes. REQUIRES: values
// non-empty.
export function rankBuckets(values, buckets) {
  const n = values.length;
  const ranked = values.map((_, i) => i)
      .sort((a, b) => values[a] - values[b]);
  const bucketOf = new Uint8Array(n);
  ranked.forEach((i, rank) => {
    bucketOf[i] = Math.min(buckets - 1, Math.floor(rank * buckets / n));
  });
  const middle = [];
  for (let b = 0; b < buckets; ++b) {
    middle.push(ranked[Math.min(n - 1, Math.floor((b + 0.5) * n / buckets))]);
  }
  return {bucketOf, middle};
}

// Whether value v passes `brush` ({lo, hi}, inclusive, or {categories});
// no brush passes everything, an absent value (null) no brush.
export function insideBrush(brush, v) {
  if (!brush) return true;
  if (v === null) return false;
  if (brush.categories) return brush.categories.includes(v);
  return v >= brush.lo && v <= brush.hi;
}

// An axis per parameter, one per constraint (its bound marked, the side
// outside it shaded) and one for the objective; a line per COMPLETED
// trial, coloured by its objective, grey when it misses a constraint.
// Brushing an axis (drag along it)
// keeps the lines inside every brushed range: `brushes` (axis name ->
// {lo, hi} or {categories}) holds them across redraws, and onBrush(ids or
// null) is told the trials that pass.
export function drawParallel(box, data, opts, brushes, onBrush) {
  const rows = completedRows(data);
  const axes = data.params.map((p) => ({name: p.name, param: p}));
  for (const c of data.constraints) {
    axes.push({name: c.name, param: null, constraint: c});
  }
  axes.push({name: data.objective.name, param: null});
  box.setAttribute('data-axes', axes.length);
  box.setAttribute('data-lines', rows.length);
  if (rows.length === 0) {
    box.setAttribute('data-selected', 0);
    note(box, 'parallel-empty', 'No completed trial yet.');
    return;
  }
  const frame = new Frame(box, {width: opts.width, height: 380,
                                margin: {top: 36, right: 70, bottom: 24,
                                         left: 70}});
  const [x0, x1] = frame.xRange();
  const step = axes.length > 1 ? (x1 - x0) / (axes.length - 1) : 0;
  const values = rows.map((r) => r.objective);
  const logObjective = opts.logObjective && allPositive(values);
  axes.forEach((axis, a) => {
    axis.x = x0 + a * step;
    if (axis.param) {
      const s = paramScale(axis.param, rows, opts, frame.yRange());
      axis.scale = s.scale;
      axis.log = s.log;
      axis.value = (row) => row.params[axis.param.index];
    } else if (axis.constraint) {
      const c = axis.constraint;
      axis.log = false;
      axis.value = (row) => row.metrics[c.index] ?? null;
      const bounds = [c.lower, c.upper].filter((b) => b !== null);
      axis.scale = makeScale({
        domain: extent([...rows.map(axis.value), ...bounds]) || [0, 1],
        range: frame.yRange()});
    } else {
      axis.log = logObjective;
      axis.scale = makeScale({domain: extent(values, logObjective) || [0, 1],
                              log: logObjective, range: frame.yRange()});
      axis.value = (row) => row.objective;
    }
  });
  // Each row's y on each axis (NaN where it has no value there).
  const n = rows.length;
  const m = axes.length;
  const ys = new Float32Array(n * m);
  let skipped = 0;
  rows.forEach((row, i) => {
    axes.forEach((axis, a) => {
      const p = position(axis.scale, axis.value(row));
      ys[i * m + a] = p === null ? NaN : p;
      skipped += p === null;
    });
  });
  box.setAttribute('data-skipped', skipped);
  const colorOf = objectiveColors(values, data.objective.minimize,
                                  logObjective);
  // 32 colour buckets by objective rank: one stroke per bucket.
  const buckets = 32;
  const {bucketOf, middle} = rankBuckets(values, buckets);
  const bucketColor = middle.map((i) => colorOf(values[i]));
  const missed = new Uint8Array(n);
  let missedCount = 0;
  if (data.constraints.length) {
    rows.forEach((row, i) => {
      missed[i] = isFeasible(row, data.metricSpecs) ? 0 : 1;
      missedCount += missed[i];
    });
  }
  box.setAttribute('data-constraint-axes', data.constraints.length);
  box.setAttribute('data-missed-constraint', missedCount);
  const selected = new Uint8Array(n);
  let selectedCount = n;

  const inside = (axis, row) => insideBrush(brushes[axis.name],
                                           axis.value(row));
  const select = () => {
    selectedCount = 0;
    const active = axes.filter((axis) => brushes[axis.name]);
    for (let i = 0; i < n; ++i) {
      let ok = 1;
      for (const axis of active) {
        if (!inside(axis, rows[i])) {
          ok = 0;
          break;
        }
      }
      selected[i] = ok;
      selectedCount += ok;
    }
    box.setAttribute('data-selected', selectedCount);
    box.setAttribute('data-brushed-axes', active.map((a) => a.name).join(','));
    return active.length;
  };
  // An axis where the trial has no value (an inactive conditional
  // parameter) is skipped: the line joins its neighbours across it.
  const polyline = (ctx, i) => {
    let pen = false;
    for (let a = 0; a < m; ++a) {
      const y = ys[i * m + a];
      if (Number.isNaN(y)) continue;
      if (pen) ctx.lineTo(axes[a].x, y);
      else ctx.moveTo(axes[a].x, y);
      pen = true;
    }
  };
  const ctx = frame.ctx;
  const draw = () => {
    const brushed = select() > 0;
    ctx.clearRect(0, 0, frame.width, frame.height);
    ctx.lineWidth = 1;
    if (brushed) {
      ctx.strokeStyle = 'rgba(150,150,150,0.12)';
      ctx.beginPath();
      for (let i = 0; i < n; ++i) if (!selected[i]) polyline(ctx, i);
      ctx.stroke();
    }
    ctx.globalAlpha = n > 3000 ? 0.3 : n > 500 ? 0.5 : 0.8;
    if (missedCount) {
      ctx.strokeStyle = MISSED_COLOR;
      ctx.setLineDash([4, 3]);
      ctx.beginPath();
      for (let i = 0; i < n; ++i) if (missed[i] && selected[i]) polyline(ctx, i);
      ctx.stroke();
      ctx.setLineDash([]);
    }
    for (let b = 0; b < buckets; ++b) {
      ctx.strokeStyle = bucketColor[b];
      ctx.beginPath();
      for (let i = 0; i < n; ++i) {
        if (bucketOf[i] === b && selected[i] && !missed[i]) polyline(ctx, i);
      }
      ctx.stroke();
    }
    ctx.globalAlpha = 1;
  };
  draw();

  // The axes, their names, and a brush on each.
  let frameRequest = null;
  let brushWork = 0;
  axes.forEach((axis) => {
    const g = frame.svg.append('g').attr('class', 'axis')
        .attr('data-axis', axis.name)
        .attr('transform', `translate(${axis.x},0)`)
        .call(makeAxis('left', axis.scale, {
          count: 6, integer: axis.param && axis.param.kind === 'integer'}));
    g.append('text').attr('class', 'axis-name').attr('y', 20)
        .text(axis.name + (axis.log ? ' (log)' : ''));
    if (axis.constraint) markBounds(g, axis.scale, axis.constraint);
    const brush = d3.brushY()
        .extent([[-12, frame.margin.top - 2],
                 [12, frame.margin.top + frame.inner.height + 2]])
        .on('start brush end', (event) => {
          if (!event.sourceEvent) return;  // moved by code, below
          const begin = performance.now();
          if (event.type === 'start') brushWork = 0;
          brushes[axis.name] = brushOf(axis, event.selection);
          if (!brushes[axis.name]) delete brushes[axis.name];
          // While dragging, the lines and the table follow once a frame;
          // the release draws at once.
          if (event.type === 'end') {
            if (frameRequest !== null) cancelAnimationFrame(frameRequest);
            frameRequest = null;
            draw();
            onBrush(idsOf(), 'end');
            // For benchmarks: the time the gesture's handlers took (lines
            // and table redrawn), without the waits between events.
            brushWork += performance.now() - begin;
            box.setAttribute('data-brush-ms', Math.round(brushWork));
          } else if (frameRequest === null) {
            frameRequest = requestAnimationFrame(() => {
              const start = performance.now();
              frameRequest = null;
              draw();
              onBrush(idsOf(), 'brush');
              brushWork += performance.now() - start;
            });
          }
          if (event.type !== 'end') brushWork += performance.now() - begin;
        });
    const handle = g.append('g').attr('class', 'brush')
        .attr('data-axis', axis.name).call(brush);
    const saved = brushes[axis.name];
    if (saved) {
      const extentPx = pixelsOf(axis, saved);
      if (extentPx) handle.call(brush.move, extentPx);
      else delete brushes[axis.name];
    }
  });
  draw();

  function idsOf() {
    if (selectedCount === n) return null;
    const ids = new Set();
    for (let i = 0; i < n; ++i) if (selected[i]) ids.add(rows[i].id);
    return ids;
  }

  frame.interact((mx, my) => {
    if (m < 2 || mx < axes[0].x || mx > axes[m - 1].x) return null;
    const a = Math.min(m - 2, Math.floor((mx - axes[0].x) / step));
    const f = (mx - axes[a].x) / step;
    let best = -1;
    let bestD = 6;
    for (let i = 0; i < n; ++i) {
      if (!selected[i]) continue;
      const ya = ys[i * m + a];
      const yb = ys[i * m + a + 1];
      if (Number.isNaN(ya) || Number.isNaN(yb)) continue;  // a skipped axis
      const d = Math.abs(ya + (yb - ya) * f - my);
      if (d < bestD) {
        bestD = d;
        best = i;
      }
    }
    if (best < 0) return null;
    const yAt = ys[best * m + a] + (ys[best * m + a + 1] - ys[best * m + a]) * f;
    return {id: rows[best].id, x: mx, y: yAt, index: best,
            html: trialTip(data, rows[best])};
  }, (id) => opts.open(id), (g, hit) => {
    const points = [];
    for (let a = 0; a < m; ++a) {
      const y = ys[hit.index * m + a];
      if (!Number.isNaN(y)) points.push([axes[a].x, y]);
    }
    g.append('path').attr('class', 'hover-line')
        .attr('d', d3.line()(points));
  });
  return {ids: idsOf()};
}

// On a constraint's axis (the group `g`, at x = 0): the side outside each
// bound shaded, the bound a dashed tick labelled "≤ 10".
function markBounds(g, scale, c) {
  const [bottom, top] = scale.range();
  const mark = (bound, edge, label) => {
    const y = scale(bound);
    g.append('rect').attr('class', 'outside-bound').attr('x', -6)
        .attr('width', 12).attr('y', Math.min(y, edge))
        .attr('height', Math.abs(edge - y));
    g.append('line').attr('class', 'bound').attr('data-bound', bound)
        .attr('x1', -14).attr('x2', 14).attr('y1', y).attr('y2', y);
    g.append('text').attr('class', 'bound-label').attr('x', 16)
        .attr('y', y + 4).text(label);
  };
  if (c.upper !== null) mark(c.upper, top, `\u2264 ${formatNumber(c.upper)}`);
  if (c.lower !== null) {
    mark(c.lower, bottom, `\u2265 ${formatNumber(c.lower)}`);
  }
}

// A brush's pixel selection [y0, y1] on `axis` ({scale}) in data terms:
// {lo, hi}, the categories it covers ({categories}) on a point scale, or
// null for no selection.
export function brushOf(axis, selection) {
  if (!selection) return null;
  const [y0, y1] = selection;
  if (axis.scale.bandwidth) {
    const categories = axis.scale.domain().filter((c) => {
      const p = axis.scale(c);
      return p >= y0 && p <= y1;
    });
    return {categories};
  }
  const a = axis.scale.invert(y1);
  const b = axis.scale.invert(y0);
  return {lo: Math.min(a, b), hi: Math.max(a, b)};
}

// The pixels [y0, y1] of a saved brush on `axis` (redrawn with other
// scales), clamped to the axis; null when it cannot be shown there (a
// range on a point scale, categories on a numeric one, none left).
export function pixelsOf(axis, brush) {
  if (brush.categories) {
    if (!axis.scale.bandwidth || brush.categories.length === 0) return null;
    const ps = brush.categories.map((c) => axis.scale(c))
        .filter((p) => p !== undefined);
    if (!ps.length) return null;
    const half = axis.scale.step() / 2;
    return [Math.min(...ps) - half / 2, Math.max(...ps) + half / 2];
  }
  if (axis.scale.bandwidth) return null;
  const [r0, r1] = axis.scale.range();
  const clamp = (p) => Math.max(Math.min(r0, r1), Math.min(Math.max(r0, r1), p));
  const lo = axis.scale.base && brush.lo <= 0 ? axis.scale.domain()[0]
                                               : brush.lo;
  const a = clamp(axis.scale(lo));
  const b = clamp(axis.scale(brush.hi));
  return [Math.min(a, b), Math.max(a, b)];
}
