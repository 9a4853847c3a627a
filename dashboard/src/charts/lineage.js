// Population-based training: the population's lineage and a parameter's
// schedule. Lineage: a row per member, its line spanning the steps it
// reported, and an arrow from the donor's row at the checkpoint's step to
// the member's row at the step it exploited. Schedule: the chosen
// parameter of each member by step, a step line that moves at each exploit.

import {STATE_COLORS} from '../model.js';
import {Frame, d3, extent, makeAxis, makeScale, nearest, note,
        tipHtml} from './common.js';

const LINK_COLOR = '#e67e22';

// The members of a PBT population among `rows` (those with exploits, and
// those that donated to them; with `allMembers`, every row: a PBT study
// whose members have not exploited yet), by id, and the exploits as links
// {from: donor id, to: member id, fromStep: the checkpoint's step, toStep:
// the exploit's step, exploit}. The steps span from 0 to the last step any
// member or link reached.
export function lineageOf(rows, allMembers = false) {
  const byId = new Map(rows.map((r) => [r.id, r]));
  const members = new Set();
  const links = [];
  for (const row of rows) {
    if (allMembers) members.add(row.id);
    for (const exploit of row.exploits || []) {
      members.add(row.id);
      if (byId.has(exploit.donor)) members.add(exploit.donor);
      links.push({from: exploit.donor, to: row.id,
                  fromStep: exploit.checkpoint_step, toStep: exploit.step,
                  exploit});
    }
  }
  const ids = [...members].sort((a, b) => a - b);
  let maxStep = 0;
  for (const id of ids) {
    const steps = byId.get(id).steps;
    if (steps.length) maxStep = Math.max(maxStep, steps[steps.length - 1]);
  }
  for (const link of links) maxStep = Math.max(maxStep, link.toStep);
  return {ids, links, maxStep};
}

// `row`'s value of parameter `index` by step: [[from step, value], ...],
// the initial value from step 0, then each exploit's from its step. A
// member that never exploited holds its parameters throughout.
export function scheduleOf(row, index) {
  const exploits = row.exploits || [];
  if (!exploits.length) return [[0, row.params[index]]];
  const out = [[0, exploits[0].params_before[index]]];
  for (const e of exploits) out.push([e.step, e.params[index]]);
  return out;
}

// The population of `data` (a StudyData): lineageOf its rows (every row
// of a PBT study a member), with the rows by id.
function population(data) {
  const rows = data.sorted();
  const pbt = (data.study.spec || {}).algorithm === 'PBT';
  return {...lineageOf(rows, pbt), byId: new Map(rows.map((r) => [r.id, r]))};
}

// The lineage of the members of `data` (a StudyData).
export function drawLineage(box, data, opts) {
  const {ids, links, maxStep, byId} = population(data);
  box.setAttribute('data-members', ids.length);
  box.setAttribute('data-links', links.length);
  if (!ids.length) {
    note(box, 'lineage-empty', 'No member has reported yet.');
    return;
  }
  const frame = new Frame(box, {width: Math.min(opts.width, 900),
                                height: Math.min(80 + 18 * ids.length, 600)});
  const x = d3.scaleLinear().domain([0, Math.max(1, maxStep)])
      .range(frame.xRange());
  const y = d3.scalePoint().domain(ids).range(frame.yRange()).padding(0.5);
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'step');
  frame.axisLeft(d3.axisLeft(y).tickFormat((id) => `trial ${id}`)
      .tickValues(ids.length > 30 ? ids.filter((_, i) => i % Math.ceil(
          ids.length / 30) === 0) : ids), null);
  const ctx = frame.ctx;
  ctx.lineWidth = 3;
  for (const id of ids) {
    const row = byId.get(id);
    const last = row.steps.length ? row.steps[row.steps.length - 1] : 0;
    ctx.strokeStyle = STATE_COLORS[row.state] || '#999';
    ctx.beginPath();
    ctx.moveTo(x(0), y(id));
    ctx.lineTo(x(last), y(id));
    ctx.stroke();
  }
  const hx = [];
  const hy = [];
  ctx.strokeStyle = LINK_COLOR;
  ctx.fillStyle = LINK_COLOR;
  ctx.lineWidth = 1.5;
  for (const link of links) {
    if (y(link.from) === undefined) continue;  // a donor no longer listed
    const [x0, y0, x1, y1] = [x(link.fromStep), y(link.from), x(link.toStep),
                              y(link.to)];
    ctx.beginPath();
    ctx.moveTo(x0, y0);
    ctx.lineTo(x1, y1);
    ctx.stroke();
    ctx.beginPath();
    ctx.arc(x1, y1, 3.5, 0, 2 * Math.PI);
    ctx.fill();
    hx.push(x1);
    hy.push(y1);
  }
  const fx = Float32Array.from(hx);
  const fy = Float32Array.from(hy);
  const drawn = links.filter((l) => y(l.from) !== undefined);
  frame.interact((mx, my) => {
    const best = nearest(fx, fy, drawn.length, mx, my);
    if (best >= 0) {
      const {from, to, exploit} = drawn[best];
      return {id: to, x: fx[best], y: fy[best], html: tipHtml(
          `trial ${to} took trial ${from}'s checkpoint`, [
            ['at step', exploit.step],
            ['checkpoint step', exploit.checkpoint_step],
            ['its value / the donor\'s', `${exploit.value} / ` +
                                         `${exploit.donor_value}`],
            ...data.params.map((p) => [p.name, `${exploit.params_before[
                p.index]} → ${exploit.params[p.index]}`])])};
    }
    // Otherwise the member whose row is under the pointer.
    const id = ids.find((i) => Math.abs(y(i) - my) < 6);
    if (id === undefined) return null;
    const row = byId.get(id);
    return {id, x: mx, y: y(id), html: tipHtml(
        `trial ${id} (${row.state.toLowerCase()})`, [
          [data.objective.name, row.objective],
          ['exploits', (row.exploits || []).length]])};
  }, (id) => opts.open(id));
}

// The schedule of parameter `param` (one of data.params)
// for each member, as step lines over the steps.
export function drawSchedule(box, data, param, opts) {
  const {ids, maxStep, byId} = population(data);
  const schedules = ids.map((id) => [id, scheduleOf(byId.get(id),
                                                    param.index)]);
  const values = schedules.flatMap(([, s]) => s.map(([, v]) => v));
  box.setAttribute('data-schedules', schedules.length);
  box.setAttribute('data-param', param.name);
  if (!schedules.length) {
    note(box, 'schedule-empty', 'No member has reported yet.');
    return;
  }
  const categorical = param.kind === 'categorical';
  const log = !categorical && opts.logParams && param.log &&
      values.every((v) => v > 0);
  const frame = new Frame(box, {width: Math.min(opts.width, 900),
                                height: 280});
  const x = d3.scaleLinear().domain([0, Math.max(1, maxStep)])
      .range(frame.xRange());
  const y = categorical
      ? makeScale({categories: param.categories, range: frame.yRange()})
      : makeScale({domain: extent(values, log) || [0, 1], log,
                   range: frame.yRange()});
  frame.axisBottom(makeAxis('bottom', x, {integer: true}), 'step');
  frame.axisLeft(categorical ? d3.axisLeft(y) : makeAxis('left', y),
                 param.name + (log ? ' (log)' : ''));
  const ctx = frame.ctx;
  const color = d3.scaleOrdinal(d3.schemeTableau10);
  const hx = [];
  const hy = [];
  const hits = [];
  for (const [id, schedule] of schedules) {
    const row = byId.get(id);
    const end = Math.max(row.steps.length ? row.steps[row.steps.length - 1]
                                          : 0,
                         schedule[schedule.length - 1][0]);
    ctx.strokeStyle = color(id);
    ctx.lineWidth = 2;
    ctx.beginPath();
    schedule.forEach(([step, v], k) => {
      if (v === null || y(v) === undefined) return;
      const next = k + 1 < schedule.length ? schedule[k + 1][0] : end;
      if (k === 0) ctx.moveTo(x(step), y(v));
      else ctx.lineTo(x(step), y(v));
      ctx.lineTo(x(next), y(v));
      hx.push(x(step));
      hy.push(y(v));
      hits.push({id, step, value: v});
    });
    ctx.stroke();
  }
  box.setAttribute('data-points', hits.length);
  const fx = Float32Array.from(hx);
  const fy = Float32Array.from(hy);
  frame.interact((mx, my) => {
    const best = nearest(fx, fy, hits.length, mx, my);
    if (best < 0) return null;
    const {id, step, value} = hits[best];
    return {id, x: fx[best], y: fy[best], html: tipHtml(`trial ${id}`, [
      ['from step', step], [param.name, value]])};
  }, (id) => opts.open(id));
}
