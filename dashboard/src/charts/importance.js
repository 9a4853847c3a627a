// Parameter importance: the server's fANOVA importances as horizontal
// bars, each with its spread over the forest's trees as a whisker; from
// too few trials, greyed and said to be unreliable.

import {el} from '../dom.js';
import {d3, note} from './common.js';

// Importances from fewer completed trials than this are shown as
// unreliable: a forest over a handful of points splits on whatever
// parameter it meets first ("lr 100%" from 2 trials).
export const RELIABLE_IMPORTANCE_TRIALS = 10;

// The parameters of an importance answer (GET .../importance) as numbers,
// most important first: [{name, importance, stddev, trials}] (`trials`:
// those the parameter's share was measured over, the answer's when the
// parameter does not say).
export function importanceRows(answer) {
  return (answer.parameters || []).map((p) => ({
    name: p.name, importance: Number(p.importance), stddev: Number(p.stddev),
    trials: Number(p.trials ?? answer.trials ?? 0),
  })).sort((a, b) => b.importance - a.importance);
}

// Whether an importance over `trials` trials means anything.
export function reliable(trials) {
  return trials >= RELIABLE_IMPORTANCE_TRIALS;
}

// The warning an answer needs, or '' when every share is measured over
// enough trials.
export function reliabilityWarning(answer, rows) {
  const trials = Number(answer.trials || 0);
  if (!reliable(trials)) {
    return `Unreliable: only ${trials} completed ` +
        `${trials === 1 ? 'trial' : 'trials'}; importance needs at least ` +
        `${RELIABLE_IMPORTANCE_TRIALS} to mean much. The bars below are ` +
        'greyed: read them as noise.';
  }
  const few = rows.filter((p) => !reliable(p.trials));
  if (few.length === 0) return '';
  return `Unreliable for ${few.map((p) => `${p.name} (${p.trials} ` +
      `${p.trials === 1 ? 'trial' : 'trials'})`).join(', ')}: measured ` +
      `over fewer than ${RELIABLE_IMPORTANCE_TRIALS} trials where ` +
      `${few.length > 1 ? 'they are' : 'it is'} active; greyed.`;
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
  const warning = reliabilityWarning(answer, params);
  box.setAttribute('data-reliable', warning ? '0' : '1');
  const rowHeight = 24;
  const width = 620;
  const left = 150;
  const height = params.length * rowHeight + 40;
  const svg = d3.create('svg').attr('width', width).attr('height', height);
  const x = d3.scaleLinear().domain([0, 1]).range([left, width - 60]);
  params.forEach((p, i) => {
    const g = svg.append('g')
        .attr('class', reliable(p.trials) && reliable(Number(answer.trials))
            ? 'bar-row' : 'bar-row unreliable')
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
  box.replaceChildren(
      ...(warning ? [el('p', {class: 'warning', id: 'importance-unreliable'},
                        warning)] : []),
      svg.node(), el('p', {class: 'note'},
      `fANOVA on a random forest (${answer.trees} trees) over ` +
      `${answer.trials} completed trials: the share of ` +
      `${answer.objective || 'the objective'}'s ` +
      `variance each parameter explains alone; the other ` +
      `${(100 * interactionShare(params)).toFixed(0)}% comes from ` +
      'interactions. Stopped, failed and infeasible trials are left out.'));
}
