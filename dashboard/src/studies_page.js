// The study list (search, trial counts by state, best value, a box per
// study to compare) and the comparison of two or more studies: their best
// so far by trial number and their objectives' distributions (EDF).

import * as api from './api.js';
import {completedRows} from './charts/common.js';
import {drawCompareHistory} from './charts/compare.js';
import {drawEdf} from './charts/edf.js';
import {el} from './dom.js';
import {formatNumber, formatTime} from './format.js';
import {STATES, STATE_COLORS, StudyData, metricsOf, num,
        objectiveOf} from './model.js';

const COLORS = ['#3b6ea5', '#d9480f', '#2e8b57', '#8e44ad', '#c23030',
                '#b8860b', '#17a2b8', '#6b6b6b'];

// The best value of a study from its /best answer (the first optimal
// trial's objective), or null.
function bestOf(study, answer) {
  const trial = (answer.trials || [])[0];
  if (!trial) return null;
  const objective = objectiveOf(study).name;
  const metrics = (trial.final_measurement && trial.final_measurement.metrics) ||
                  {};
  let value = objective in metrics ? num(metrics[objective]) : null;
  if (value === null) {
    const ms = trial.measurements || [];
    for (let i = ms.length - 1; i >= 0 && value === null; --i) {
      if (ms[i].metrics && objective in ms[i].metrics) {
        value = num(ms[i].metrics[objective]);
      }
    }
  }
  return {id: Number(trial.id), value};
}

export async function showStudies(app) {
  const response = await api.get('/api/studies');
  const studies = response.studies || [];
  const chosen = new Set();
  const search = el('input', {id: 'study-search', type: 'search',
                              placeholder: 'search studies…'});
  const compare = el('button', {id: 'compare', disabled: true,
                                onclick: () => {
                                  location.hash = 'compare=' + [...chosen]
                                      .map(encodeURIComponent).join(',');
                                }}, 'Compare selected');
  const rows = studies.map((s) => {
    const counts = s.trial_counts || {};
    const total = Object.values(counts).reduce((a, b) => a + Number(b), 0);
    const objective = objectiveOf(s);
    const box = el('input', {type: 'checkbox', class: 'pick',
                             'data-study': s.name, onchange: (event) => {
                               if (event.target.checked) chosen.add(s.name);
                               else chosen.delete(s.name);
                               compare.disabled = chosen.size < 2;
                               compare.textContent = chosen.size >= 2
                                   ? `Compare ${chosen.size} studies`
                                   : 'Compare selected';
                             }});
    const best = el('td', {class: 'num best', 'data-best': ''}, '…');
    const row = el('tr', {'data-study': s.name},
        el('td', {}, box),
        el('td', {}, el('a', {href: '#study=' + encodeURIComponent(s.name)},
                        s.name)),
        el('td', {}, el('span', {class: 'badge state-' + (s.state || '')},
                        s.state || '')),
        el('td', {}, `${objective.name} ${objective.minimize ? '↓' : '↑'}`),
        best,
        el('td', {class: 'num'}, total),
        el('td', {class: 'counts'}, ...STATES.filter((st) => counts[st]).map(
            (st) => el('span', {class: 'count', 'data-state': st,
                                style: `color:${STATE_COLORS[st]}`,
                                title: st.toLowerCase()},
                       `${counts[st]} ${st.toLowerCase()} `))),
        el('td', {}, (s.spec && s.spec.algorithm) || 'default'),
        el('td', {}, s.owner || ''),
        el('td', {}, formatTime(s.create_time_ms)));
    row.searchText = [s.name, s.state, objective.name,
                      (s.spec && s.spec.algorithm) || '', s.owner || '']
        .join(' ').toLowerCase();
    return {study: s, row, best};
  });
  const tbody = el('tbody', {}, ...rows.map((r) => r.row));
  const table = el('table', {id: 'studies', class: 'trials',
                             'data-rows': studies.length,
                             'data-shown': studies.length},
      el('thead', {}, el('tr', {}, ...['', 'study', 'state', 'objective',
          'best', 'trials', 'by state', 'algorithm', 'owner', 'created']
          .map((h) => el('th', {}, h)))), tbody);
  search.oninput = () => {
    const needle = search.value.trim().toLowerCase();
    let shown = 0;
    for (const r of rows) {
      const visible = !needle || r.row.searchText.includes(needle);
      r.row.hidden = !visible;
      shown += visible;
    }
    table.setAttribute('data-shown', shown);
  };
  app.main.replaceChildren(
      el('h1', {}, 'Studies'),
      studies.length
          ? el('div', {}, el('div', {class: 'filters'}, search, ' ', compare),
               table)
          : el('p', {}, 'No studies.'));
  // Best values, a few at a time.
  let next = 0;
  const worker = async () => {
    while (next < rows.length) {
      const r = rows[next++];
      try {
        const answer = await api.get(api.studyPath(r.study.name, '/best'));
        // Several objectives: the optimal trials are a Pareto front.
        if (metricsOf(r.study).filter((m) => m.role === 'OBJECTIVE')
                .length >= 2) {
          const n = (answer.trials || []).length;
          r.best.textContent = `front of ${n}`;
          r.best.setAttribute('data-front', n);
          continue;
        }
        const best = bestOf(r.study, answer);
        r.best.textContent = best && best.value !== null
            ? formatNumber(best.value) : '—';
        if (best) {
          r.best.setAttribute('data-best', best.value);
          r.best.title = `trial ${best.id}`;
        }
      } catch (e) {
        r.best.textContent = '?';
        r.best.title = e.message;
      }
    }
  };
  await Promise.all([worker(), worker(), worker(), worker()]);
  table.setAttribute('data-best-loaded', '1');
}

export async function showCompare(app, names) {
  app.main.replaceChildren(el('p', {}, 'Loading ' + names.join(', ') + '…'));
  const studies = await Promise.all(names.map(async (name, i) => {
    const data = new StudyData(await api.get(api.studyPath(name)));
    await data.load();
    return {name, color: COLORS[i % COLORS.length], data};
  }));
  const objectives = new Set(studies.map(
      (s) => `${s.data.objective.name} ${s.data.objective.minimize}`));
  let logObjective = false;
  const history = el('div', {id: 'compare-history', class: 'chart'});
  const edf = el('div', {id: 'compare-edf', class: 'chart'});
  const open = (id, study) => {
    location.hash = `study=${encodeURIComponent(study)}&trial=${id}`;
  };
  const draw = () => {
    if (!app.hasCharts) return;
    const opts = {logObjective, logParams: true, open,
                  width: Math.max(600, Math.min(1200,
                                                app.main.clientWidth - 40))};
    drawCompareHistory(history, studies, opts);
    drawEdf(edf, studies.map((s) => ({
      name: s.name, color: s.color, rows: completedRows(s.data)})),
            studies[0].data.objective, opts);
  };
  const summary = el('table', {id: 'compare-table', class: 'trials'},
      el('tr', {}, ...['study', 'objective', 'completed', 'best', 'best trial',
                       'trials'].map((h) => el('th', {}, h))),
      ...studies.map((s) => {
        const best = s.data.best();
        return el('tr', {'data-study': s.name},
            el('td', {}, el('span', {class: 'swatch',
                                     style: `background:${s.color}`}), ' ',
               el('a', {href: '#study=' + encodeURIComponent(s.name)},
                  s.name)),
            el('td', {}, `${s.data.objective.name} ` +
                         (s.data.objective.minimize ? '↓' : '↑')),
            el('td', {class: 'num'}, s.data.counts().COMPLETED || 0),
            el('td', {class: 'num'}, best ? formatNumber(best.objective) : '—'),
            el('td', {}, best ? el('a', {href: `#study=${encodeURIComponent(
                                             s.name)}&trial=${best.id}`},
                                   `trial ${best.id}`) : ''),
            el('td', {class: 'num'}, s.data.rows.size));
      }));
  app.main.replaceChildren(
      el('h1', {}, 'Comparing ' + names.join(', ')),
      objectives.size > 1
          ? el('p', {class: 'error', id: 'compare-warning'},
               'These studies optimize different objectives (or goals): ' +
               'their values are shown side by side as they are.')
          : '',
      summary,
      app.hasCharts
          ? el('div', {class: 'toggles'}, el('label', {}, el('input', {
              type: 'checkbox', id: 'log-objective', onchange: (event) => {
                logObjective = event.target.checked;
                draw();
              }}), ' log scale'))
          : el('p', {class: 'note', id: 'no-charts'},
               'Charts are not part of this build.'),
      el('section', {class: 'plot'}, el('h2', {}, 'Best so far'), history),
      el('section', {class: 'plot'},
         el('h2', {}, 'Empirical distribution of the objective'), edf));
  draw();
}
