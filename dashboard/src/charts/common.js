// What the study's plots share, on d3: scales (linear, log, point for
// categories), axes with d3-axis (ticks between the ends, integer ticks
// where the data are integers), colour, the legend, tooltips, and a Frame:
// a canvas for the marks (one pass, so ten thousand trials draw in
// milliseconds) under an SVG for the axes, labels, brushes and the hover
// mark, with a tooltip. Hover and click go through a chart's
// pick(x, y) -> {id, x, y, html} (the nearest trial under the pointer); a
// click opens that trial's page. Also the marks and helpers several charts
// draw with: points by colour, crosses, a trial's tooltip, a parameter's
// scale, the empty-chart note.
//
// Each chart (charts/NAME.js) writes what it drew into data-* attributes
// of its box (data-points, ...), which the browser test reads.

import {el} from '../dom.js';
import {formatNumber} from '../format.js';
import {boundText} from '../model.js';

// globalThis, which is the window in the page: node's tests import this
// module for its pure functions, where there is neither window nor d3.
export const d3 = globalThis.d3;

export const MARGIN = {top: 16, right: 24, bottom: 40, left: 64};

// Finite values of `values` (and positive ones when `log`): [min, max], or
// null when there are none. A single value is widened to a small range.
export function extent(values, log = false) {
  let lo = Infinity;
  let hi = -Infinity;
  for (const v of values) {
    if (v === null || !Number.isFinite(v) || (log && v <= 0)) continue;
    if (v < lo) lo = v;
    if (v > hi) hi = v;
  }
  if (lo > hi) return null;
  if (lo === hi) {
    if (log) return [lo / 2, hi * 2];
    const pad = lo === 0 ? 1 : Math.abs(lo) * 0.1;
    return [lo - pad, hi + pad];
  }
  return [lo, hi];
}

// Whether every finite value is positive (so a log axis can show them).
export function allPositive(values) {
  let any = false;
  for (const v of values) {
    if (v === null || !Number.isFinite(v)) continue;
    if (v <= 0) return false;
    any = true;
  }
  return any;
}

// A scale for values of one kind: 'categorical' (categories), log or
// linear, with a little padding and nice ends for numbers.
export function makeScale({categories = null, domain = null, log = false,
                           range, integer = false}) {
  if (categories) {
    return d3.scalePoint().domain(categories).range(range).padding(0.5);
  }
  const d = domain || [0, 1];
  if (log) {
    return d3.scaleLog().domain([d[0] / 1.15, d[1] * 1.15]).range(range);
  }
  const pad = (d[1] - d[0]) * 0.04;
  const scale = d3.scaleLinear().domain([d[0] - pad, d[1] + pad]).range(range);
  return integer ? scale : scale.nice();
}

// d3's axis for `scale` with ticks between the ends; integer-only ticks
// when `integer` (trial numbers, steps), all categories for a point scale.
export function makeAxis(orient, scale, {integer = false, count = 6} = {}) {
  const axis = orient === 'bottom' ? d3.axisBottom(scale)
               : orient === 'left' ? d3.axisLeft(scale)
               : orient === 'right' ? d3.axisRight(scale) : d3.axisTop(scale);
  if (scale.bandwidth) return axis;  // point scale: every category
  if (integer) {
    const [a, b] = scale.domain();
    const ticks = scale.base
        ? logIntegerTicks(Math.min(a, b), Math.max(a, b), count)
        : scale.ticks(count).filter(Number.isInteger);
    if (ticks.length === 0) ticks.push(Math.round((a + b) / 2));
    return axis.tickValues(ticks).tickFormat(d3.format('d'));
  }
  if (scale.base) {  // log: label the powers of ten, tick the rest
    return axis.ticks(count, (v) => {
      const exponent = Math.log10(v);
      return Math.abs(exponent - Math.round(exponent)) < 1e-9
          ? formatNumber(v) : '';
    });
  }
  return axis.ticks(count).tickFormat(formatNumber);
}

// The ticks of a log-scaled integer axis over [lo, hi]: at most `maxCount`
// distinct integers, about evenly spread in log space. Powers of ten when
// the range holds three or more, else powers of two when it holds three or
// more, each thinned to every k-th exponent; else every integer when there
// are few enough; else `maxCount` log-spaced values, rounded, repeats
// dropped. (A log scale's own ticks, 1 to 9 per decade, all integers,
// labelled every one on a short range and drew them over each other.)
export function logIntegerTicks(lo, hi, maxCount = 6) {
  const a = Math.max(1, Math.ceil(lo));
  const b = Math.floor(hi);
  const count = Math.max(1, Math.floor(maxCount));
  if (!Number.isFinite(a) || !Number.isFinite(b) || b < a) return [];
  for (const base of [10, 2]) {
    const powers = [];  // [exponent, power] within [a, b]
    for (let e = 0, p = 1; p <= b; ++e, p *= base) {
      if (p >= a) powers.push([e, p]);
    }
    if (powers.length >= 3) {
      const every = Math.ceil(powers.length / count);
      return powers.filter(([e]) => e % every === 0).map(([, p]) => p);
    }
  }
  if (b - a + 1 <= count) {
    return Array.from({length: b - a + 1}, (_, i) => a + i);
  }
  const ticks = [];
  for (let k = 0; k < count; ++k) {
    const t = count === 1 ? 0.5 : k / (count - 1);
    const v = Math.min(b, Math.max(a, Math.round(a * (b / a) ** t)));
    if (ticks[ticks.length - 1] !== v) ticks.push(v);
  }
  return ticks;
}

// Where a value lands on `scale`, or null (absent, non-finite, <= 0 on log).
export function position(scale, value) {
  if (value === null || value === undefined) return null;
  if (scale.bandwidth) {
    const p = scale(value);
    return p === undefined ? null : p;
  }
  if (!Number.isFinite(value) || (scale.base && value <= 0)) return null;
  return scale(value);
}

// A chart's box: canvas below, SVG above, tooltip on top.
export class Frame {
  constructor(box, {width, height, margin = MARGIN}) {
    this.box = box;
    this.width = width;
    this.height = height;
    this.margin = margin;
    this.inner = {width: width - margin.left - margin.right,
                  height: height - margin.top - margin.bottom};
    box.classList.add('frame');
    box.style.width = width + 'px';
    box.style.height = height + 'px';
    const ratio = window.devicePixelRatio || 1;
    this.canvas = el('canvas', {class: 'marks', width: width * ratio,
                                height: height * ratio});
    this.canvas.style.width = width + 'px';
    this.canvas.style.height = height + 'px';
    this.ctx = this.canvas.getContext('2d');
    this.ctx.scale(ratio, ratio);
    this.svgNode = document.createElementNS('http://www.w3.org/2000/svg',
                                            'svg');
    this.svgNode.setAttribute('width', width);
    this.svgNode.setAttribute('height', height);
    this.svg = d3.select(this.svgNode);
    // Pointer events land on this rectangle over the plotting area.
    this.surface = this.svg.append('rect')
        .attr('class', 'surface')
        .attr('x', margin.left).attr('y', margin.top)
        .attr('width', this.inner.width).attr('height', this.inner.height);
    this.plot = this.svg.append('g');
    this.marker = this.svg.append('g').attr('class', 'hover')
        .style('pointer-events', 'none');
    this.tip = el('div', {class: 'tooltip', hidden: true});
    box.replaceChildren(this.canvas, this.svgNode, this.tip);
  }

  // The plotting area's pixel ranges.
  xRange() {
    return [this.margin.left, this.margin.left + this.inner.width];
  }

  yRange() {
    return [this.margin.top + this.inner.height, this.margin.top];
  }

  axisBottom(axis, label) {
    const g = this.svg.append('g').attr('class', 'axis')
        .attr('transform',
              `translate(0,${this.margin.top + this.inner.height})`)
        .call(axis);
    if (label) {
      g.append('text').attr('class', 'axis-label')
          .attr('x', this.margin.left + this.inner.width / 2).attr('y', 34)
          .text(label);
    }
    return g;
  }

  axisLeft(axis, label) {
    const g = this.svg.append('g').attr('class', 'axis')
        .attr('transform', `translate(${this.margin.left},0)`).call(axis);
    if (label) {
      g.append('text').attr('class', 'axis-label')
          .attr('transform', 'rotate(-90)')
          .attr('x', -(this.margin.top + this.inner.height / 2))
          .attr('y', -this.margin.left + 14).text(label);
    }
    return g;
  }

  // Hover and click through pick(mx, my) -> {id, x, y, html} or null.
  // onClick(id, hit) opens a trial; `hoverMark` draws more than the ring.
  interact(pick, onClick, hoverMark = null) {
    let current = null;
    const node = this.svgNode;
    const show = (event) => {
      const [mx, my] = d3.pointer(event, node);
      const hit = pick(mx, my);
      current = hit;
      this.marker.selectAll('*').remove();
      if (!hit) {
        this.tip.hidden = true;
        node.style.cursor = '';
        return;
      }
      node.style.cursor = 'pointer';
      if (hoverMark) hoverMark(this.marker, hit);
      this.marker.append('circle').attr('cx', hit.x).attr('cy', hit.y)
          .attr('r', 6);
      this.tip.innerHTML = hit.html;
      this.tip.hidden = false;
      const left = Math.min(hit.x + 12, this.width - 220);
      this.tip.style.left = Math.max(0, left) + 'px';
      this.tip.style.top = Math.max(0, hit.y - 10) + 'px';
      this.box.setAttribute('data-hover', hit.id);
    };
    this.surface.on('mousemove', show);
    this.surface.on('mouseleave', () => {
      current = null;
      this.marker.selectAll('*').remove();
      this.tip.hidden = true;
      this.box.removeAttribute('data-hover');
    });
    this.surface.on('click', (event) => {
      show(event);
      if (current) onClick(current.id, current);
    });
  }
}

// The nearest of `n` points (pixel coordinates xs, ys) to (mx, my) within
// `radius` pixels: its index, or -1. A linear scan: ten thousand points
// take a fraction of a millisecond.
export function nearest(xs, ys, n, mx, my, radius = 10) {
  let best = -1;
  let bestD = radius * radius;
  for (let i = 0; i < n; ++i) {
    const dx = xs[i] - mx;
    const dy = ys[i] - my;
    const d = dx * dx + dy * dy;
    if (d <= bestD) {
      bestD = d;
      best = i;
    }
  }
  return best;
}

// The colour of an objective value: viridis, bright for the better end.
export function objectiveColors(values, minimize, log = false) {
  const e = extent(values, log) || [0, 1];
  const t = log ? (v) => Math.log10(v) : (v) => v;
  const scale = d3.scaleSequential(d3.interpolateViridis)
      .domain(minimize ? [t(e[1]), t(e[0])] : [t(e[0]), t(e[1])]);
  return (v) => (v === null || !Number.isFinite(v) || (log && v <= 0)
                     ? '#bbb' : scale(t(v)));
}

// Tooltip HTML: a title line and name/value rows (escaped).
export function tipHtml(title, pairs) {
  const escape = (s) => String(s).replace(/[&<>"]/g, (c) => ({
    '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]));
  return `<b>${escape(title)}</b>` + pairs.map(([k, v]) =>
      `<br>${escape(k)}: ${escape(typeof v === 'number' ? formatNumber(v)
                                                         : (v ?? ''))}`)
      .join('');
}

// A legend of coloured marks, drawn in the SVG at (x, y). A 'line' item
// with a `dash` ([on, off, ...] pixels) is dashed.
export function legend(svg, x, y, items) {
  const g = svg.append('g').attr('class', 'legend')
      .attr('transform', `translate(${x},${y})`);
  let offset = 0;
  for (const {label, color, shape = 'circle', dash = null} of items) {
    const item = g.append('g').attr('transform', `translate(${offset},0)`);
    if (shape === 'line') {
      const line = item.append('line').attr('x1', 0).attr('x2', 14)
          .attr('y1', 0).attr('y2', 0).attr('stroke', color)
          .attr('stroke-width', 2);
      if (dash) line.attr('stroke-dasharray', dash.join(' '));
    } else if (shape === 'cross') {
      item.append('path').attr('d', 'M3,-4L11,4M11,-4L3,4')
          .attr('stroke', color).attr('stroke-width', 2);
    } else if (shape === 'ring') {
      item.append('circle').attr('cx', 7).attr('r', 4).attr('fill', 'none')
          .attr('stroke', color).attr('stroke-width', 1.5);
    } else if (shape === 'triangle') {
      item.append('path').attr('d', 'M7,-5L12,4L2,4Z').attr('fill', color);
    } else {
      item.append('circle').attr('cx', 7).attr('r', 4).attr('fill', color);
    }
    item.append('text').attr('x', 18).attr('y', 4).text(label);
    // Estimated, not measured: measuring would force a layout per item.
    offset += 30 + 6.6 * label.length;
  }
  return g;
}

// ----- Shared by the charts -----

// The states whose trials have a result.
export const FINISHED = new Set(['COMPLETED', 'STOPPED']);

// Whether v is a number, finite.
export function finite(v) {
  return v !== null && Number.isFinite(v);
}

// The rows of COMPLETED trials with a finite objective: what slices,
// contours, parallel coordinates and the EDF show.
export function completedRows(data) {
  const out = [];
  for (const row of data.sorted()) {
    if (row.state === 'COMPLETED' && finite(row.objective)) out.push(row);
  }
  return out;
}

// [name, value] of each parameter of `row`, for a tooltip.
export function paramPairs(data, row) {
  return data.params.map((p) => [p.name, row.params[p.index]]);
}

// A trial's tooltip: its objective, constraints, `extra` pairs, parameters
// and reason.
export function trialTip(data, row, extra = []) {
  return tipHtml(`trial ${row.id} (${row.state.toLowerCase()})`, [
    [data.objective.name, row.objective],
    ...data.constraints.map((m) => [`${m.name} (${boundText(m)})`,
                                    row.metrics[m.index]]),
    ...extra, ...paramPairs(data, row),
    ...(row.reason ? [['reason', row.reason]] : [])]);
}

// An empty chart: `box` holds only a note saying why.
export function note(box, id, text) {
  box.replaceChildren(el('p', {class: 'note', id}, text));
}

// Points drawn as one path per colour.
export function drawPoints(ctx, xs, ys, colors, n, radius,
                           {hollow = false} = {}) {
  const groups = new Map();
  for (let i = 0; i < n; ++i) {
    if (!groups.has(colors[i])) groups.set(colors[i], []);
    groups.get(colors[i]).push(i);
  }
  for (const [color, members] of groups) {
    ctx.beginPath();
    for (const i of members) {
      ctx.moveTo(xs[i] + radius, ys[i]);
      ctx.arc(xs[i], ys[i], radius, 0, 2 * Math.PI);
    }
    if (hollow) {
      ctx.strokeStyle = color;
      ctx.lineWidth = 1.5;
      ctx.stroke();
    } else {
      ctx.fillStyle = color;
      ctx.fill();
    }
  }
}

// Crosses (x), one stroke.
export function drawCrosses(ctx, xs, ys, color, size = 3) {
  ctx.strokeStyle = color;
  ctx.lineWidth = 1.5;
  ctx.beginPath();
  for (let i = 0; i < xs.length; ++i) {
    ctx.moveTo(xs[i] - size, ys[i] - size);
    ctx.lineTo(xs[i] + size, ys[i] + size);
    ctx.moveTo(xs[i] + size, ys[i] - size);
    ctx.lineTo(xs[i] - size, ys[i] + size);
  }
  ctx.stroke();
}

// Trials that miss a constraint.
export const MISSED_COLOR = '#888';

// Parameter p's scale over `range`: its categories, or its spec's range
// (the values' extent when the spec has none), on a log axis when the
// parameter is log-scaled, opts.logParams asks and every value is positive.
// {scale, log}.
export function paramScale(p, rows, opts, range) {
  if (p.kind === 'categorical') {
    return {scale: makeScale({categories: p.categories, range}), log: false};
  }
  const values = rows.map((r) => r.params[p.index]);
  const log = p.log && opts.logParams && allPositive(values);
  const domain = p.min !== null && p.max !== null && p.max > p.min
      ? [p.min, p.max] : (extent(values, log) || [0, 1]);
  return {scale: makeScale({domain, log, range,
                            integer: p.kind === 'integer'}),
          log};
}

// A small deterministic jitter so that points on one category spread out.
// In [-0.5, 0.5), the same for the same id.
export function jitter(id) {
  const h = Math.sin(id * 12.9898) * 43758.5453;
  return (h - Math.floor(h)) - 0.5;
}
