// Parameter importance: the server's fANOVA importances as horizontal
// bars, each with its spread over the forest's trees as a whisker.

import {el} from '../dom.js';
import {d3, note} from './common.js';

// The parameters of an importance answer (GET .../importance) as numbers,
// most important first: [{name, importance, stddev}].
export function importanceRows(answer) {
  return (answer.parameters || []).map((p) => ({
    name: p.name, importance: Number(p.importance), stddev: Number(p.stddev),
  })).sort((a, b) => b.importance - a.importance);
}

// The share of the variance no parameter explains alone (the
// interactions'): 1 less the importances' sum, never below 0.
export function interactionShare(params) {
  const explained = params.reduce((a, p) => a + p.importance, 0);
  return Math.max(0, 1 - explained);
}

// Horizontal bars of the server's fANOVA importances, with their spread
// over the forest's trees; onPick(name) when a bar is clicked.
export function drawImportance(box, answer, onPick) {
  const params = importanceRows(answer);
  box.setAttribute('data-params', params.length);
  box.setAttribute('data-trials', answer.trials);
  box.setAttribute('data-metric', answer.objective || '');
  if (params.length === 0) {
    note(box, 'importance-empty', answer.message ||
         'No importance yet.');
    return;
  }
  const rowHeight = 24;
  const width = 620;
  const left = 150;
  const height = params.length * rowHeight + 40;
  const svg = d3.create('svg').attr('width', width).attr('height', height);
  const x = d3.scaleLinear().domain([0, 1]).range([left, width - 60]);
  params.forEach((p, i) => {
    const g = svg.append('g').attr('class', 'bar-row')
        .attr('data-param', p.name)
        .attr('data-importance', p.importance.toFixed(4))
        .attr('transform', `translate(0,${i * rowHeight + 6})`)
        .style('cursor', 'pointer').on('click', () => onPick(p.name));
    g.append('title').text(
        `${p.name}: ${(100 * p.importance).toFixed(1)}% of the variance ` +
        `(± ${(100 * p.stddev).toFixed(1)} over the trees); click for its ` +
        'contour');
    g.append('text').attr('x', left - 8).attr('y', 15)
        .attr('text-anchor', 'end').text(p.name);
    g.append('rect').attr('class', 'bar').attr('x', left).attr('y', 4)
        .attr('height', 14)
        .attr('width', Math.max(1, x(p.importance) - left));
    const lo = x(Math.max(0, p.importance - p.stddev));
    const hi = x(Math.min(1, p.importance + p.stddev));
    g.append('line').attr('class', 'whisker').attr('x1', lo).attr('x2', hi)
        .attr('y1', 11).attr('y2', 11);
    g.append('text').attr('x', x(p.importance) + 6).attr('y', 15)
        .text((100 * p.importance).toFixed(1) + '%');
  });
  svg.append('g').attr('class', 'axis')
      .attr('transform', `translate(0,${params.length * rowHeight + 8})`)
      .call(d3.axisBottom(x).ticks(5).tickFormat(d3.format('.0%')));
  box.replaceChildren(svg.node(), el('p', {class: 'note'},
      `fANOVA on a random forest (${answer.trees} trees) over ` +
      `${answer.trials} completed trials: the share of ` +
      `${answer.objective || 'the objective'}'s ` +
      `variance each parameter explains alone; the other ` +
      `${(100 * interactionShare(params)).toFixed(0)}% comes from ` +
      'interactions. Stopped, failed and infeasible trials are left out.'));
}
