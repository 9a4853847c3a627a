// One trial's page: its state, attempt and reason, parameters, every metric
// of its result, its learning curve (any metric by step; earlier attempts'
// curves drawn apart, charts/trial_curve.js), timing, device time and cost
// (in all and per attempt), lease and worker, checkpoint URI and step,
// PBT's exploits (whose checkpoint it took, when, its parameters), log
// path and the log's tail (from the server's log root only), and Stop when
// the server serves writes. It shows what the study page already holds at
// once, then the full trial.

import * as api from './api.js';
import {attemptCurves, drawTrialCurve} from './charts/trial_curve.js';
import {el} from './dom.js';
import {attemptLabel, formatDeviceTime, formatDuration, formatNumber,
        formatTime, formatValue} from './format.js';
import {STATE_COLORS, attemptsOf, int64, num} from './model.js';

const STOPPABLE = new Set(['REQUESTED', 'ACTIVE', 'PAUSED']);

// The attempt beside the trial's state in the title ('' without one).
function attemptNote(number) {
  return number > 0 ? el('span', {class: 'attempt', id: 'trial-attempt',
                                  'data-attempt': number},
                         ' ' + attemptLabel(number))
                    : '';
}

// What a metric is to the study, after its name in the metrics table.
function roleNote(spec) {
  if (!spec) return '';
  if (spec.role === 'OBJECTIVE') {
    return spec.minimize ? ' (objective, ↓)' : ' (objective, ↑)';
  }
  if (spec.role === 'CONSTRAINT') {
    return ` (constraint, within [${spec.lower ?? '−∞'}, ` +
           `${spec.upper ?? '+∞'}])`;
  }
  return '';
}

export class TrialPage {
  // `data`: the study's StudyData; `app`: {main, hasCharts, open(id)}.
  constructor(data, id, app) {
    this.data = data;
    this.id = id;
    this.app = app;
    this.trial = null;
    this.metric = data.objective.name;
    this.logScale = false;
  }

  async show(server) {
    this.server = server;
    this.root = el('div', {id: 'trial-page', 'data-id': this.id,
                           'data-loaded': '0'});
    this.app.main.replaceChildren(this.root);
    this.renderFromRow();
    await this.refresh();
  }

  // Fetches the full trial (after a live change too) and its log.
  async refresh() {
    const name = this.data.study.name;
    try {
      this.trial = await api.get(api.studyPath(name, `/trials/${this.id}`));
    } catch (e) {
      this.root.replaceChildren(el('p', {class: 'error', id: 'error'},
                                   e.message));
      return;
    }
    if (!this.root.isConnected) return;
    this.render();
    this.root.setAttribute('data-loaded', '1');
    this.loadLog();
  }

  nav() {
    const name = encodeURIComponent(this.data.study.name);
    const ids = this.data.sorted().map((r) => r.id);
    const at = ids.indexOf(this.id);
    return el('p', {class: 'nav'},
        el('a', {href: `#study=${name}`, id: 'back'}, '← study'),
        at > 0 ? [' · ', el('a', {href: `#study=${name}&trial=${ids[at - 1]}`,
                                  id: 'prev-trial'}, `‹ trial ${ids[at - 1]}`)]
               : '',
        at >= 0 && at + 1 < ids.length
            ? [' · ', el('a', {href: `#study=${name}&trial=${ids[at + 1]}`,
                               id: 'next-trial'}, `trial ${ids[at + 1]} ›`)]
            : '');
  }

  // A live change of this trial (the event carries the whole trial).
  update(trial) {
    this.trial = trial;
    if (!this.root || !this.root.isConnected) return;
    this.render();
    this.root.setAttribute('data-loaded', '1');
    this.loadLog();
  }

  // What the study page's row already says, shown before the fetch ends.
  renderFromRow() {
    const row = this.data.rows.get(this.id);
    const title = el('h1', {}, `Trial ${this.id}`,
        row ? el('span', {class: 'badge', id: 'trial-state',
                          style: `background:${STATE_COLORS[row.state]}`},
                 row.state) : '',
        row ? attemptNote(row.attempt || 0) : '');
    const items = row ? [
      ['reason', row.reason],
      ...this.data.metrics.map((m, i) => [m, formatNumber(row.metrics[i])]),
      ...this.data.params.map((p) => [p.name, formatValue(row.params[p.index])]),
    ] : [];
    this.root.replaceChildren(this.nav(), title,
        el('table', {class: 'kv'}, ...items.filter(([, v]) => v !== '').map(
            ([k, v]) => el('tr', {}, el('th', {}, k), el('td', {}, v)))),
        el('p', {class: 'note'}, 'Loading the trial…'));
  }

  render() {
    const t = this.trial;
    const study = this.data.study;
    const state = t.state || '';
    const price = num((study.spec || {}).price_per_device_hour) || 0;
    const attempts = attemptsOf(t, price);
    // A trial handed over after a loss keeps the loss's reason in
    // failure_reason; the attempts table says it, and it failed nothing.
    const lostOnly = state !== 'FAILED' && attempts.length > 1;
    const reasons = [['infeasible reason', t.infeasible_reason],
                     ['stop reason', t.stop_reason],
                     ['failure reason', lostOnly ? '' : t.failure_reason]]
        .filter(([, v]) => v);
    const start = Number(t.start_time_ms || 0);
    const end = Number(t.end_time_ms || 0);
    const running = state === 'ACTIVE' || state === 'STOPPING';
    const duration = start ? (end || (running ? Date.now() : 0)) - start : null;
    const measurements = t.measurements || [];
    const final = (t.final_measurement && t.final_measurement.metrics) || {};
    const last = measurements.length
        ? measurements[measurements.length - 1].metrics || {} : {};
    const metricNames = [...new Set([...this.data.metrics,
                                     ...Object.keys(final),
                                     ...Object.keys(last)])];
    const params = new Map((t.parameters || []).map((p) => [
      p.name, 'double_value' in p ? num(p.double_value)
          : 'int_value' in p ? Number(p.int_value)
          : 'string_value' in p ? p.string_value : 0]));

    const header = el('h1', {}, `Trial ${t.id} of ${study.name} `,
        el('span', {class: 'badge', id: 'trial-state', 'data-state': state,
                    style: `background:${STATE_COLORS[state] || '#999'}`},
           state),
        attemptNote(Number(t.attempt || 0)));
    const reasonBox = el('div', {id: 'trial-reasons'}, ...reasons.map(
        ([k, v]) => el('p', {class: 'reason', 'data-kind': k},
                       el('b', {}, k + ': '), v)));
    const paramTable = el('table', {class: 'kv', id: 'trial-params'},
        ...this.data.params.map((p) => el('tr', {'data-param': p.name},
            el('th', {}, p.name + (p.log ? ' (log)' : '')),
            el('td', {class: 'num'},
               params.has(p.name) ? formatValue(params.get(p.name))
                                  : '— (inactive)'))));
    const metricTable = el('table', {class: 'kv', id: 'trial-metrics'},
        el('tr', {}, el('th', {}, 'metric'), el('th', {}, 'result'),
           el('th', {}, 'last reported')),
        ...metricNames.map((m) => el('tr', {'data-metric': m},
            el('th', {}, m + roleNote(this.data.metricSpecs.find(
                                 (spec) => spec.name === m))),
            el('td', {class: 'num'}, m in final ? formatNumber(num(final[m]))
                                                : ''),
            el('td', {class: 'num'}, m in last ? formatNumber(num(last[m]))
                                               : ''))));
    const info = [
      ['created', formatTime(t.create_time_ms)],
      ['started', formatTime(t.start_time_ms)],
      ['ended', formatTime(t.end_time_ms)],
      ['duration', formatDuration(duration) + (running && duration !== null
                                                   ? ' (running)' : '')],
      ['device time', formatDeviceTime(num(t.device_seconds)) +
                      (attempts.length > 1 ? ', every attempt' : '')],
      ['cost', price > 0 ? formatNumber(num(t.cost) || 0) : 'not priced'],
      ['worker', t.client_id || ''],
      ['lease epoch', t.lease_epoch || ''],
      ['lease expires', running ? formatTime(t.lease_expire_time_ms) : ''],
      ['retries (worker lost)', t.retry_count || 0],
      ['preemptions', t.preemption_count || 0],
      ['checkpoint URI', t.checkpoint_uri || '—'],
      ...(t.checkpoint_uri && int64(t.checkpoint_step)
              ? [['checkpoint step', int64(t.checkpoint_step)]] : []),
      ['log path', t.log_path || '— (not run by hypertune worker)'],
    ];
    const infoTable = el('table', {class: 'kv', id: 'trial-info'},
        ...info.map(([k, v]) => el('tr', {'data-key': k}, el('th', {}, k),
                                   el('td', {}, String(v)))));
    // Free-form notes (a model's path, an Optuna trial's user attributes).
    const attributes = Object.entries(t.attributes || {})
        .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const attributeSection = attributes.length
        ? el('section', {}, el('h2', {}, 'Attributes'),
             el('table', {class: 'kv', id: 'trial-attributes'},
                ...attributes.map(([k, v]) => el('tr', {'data-key': k},
                    el('th', {}, k), el('td', {}, v)))))
        : null;
    this.curveBox = el('div', {id: 'trial-curve', class: 'chart'});
    const metricSelect = el('select', {id: 'curve-metric', onchange: (e) => {
      this.metric = e.target.value;
      this.drawCurve();
    }}, ...metricNames.map((m) => el('option', {value: m,
                                                selected: m === this.metric},
                                     m)));
    const logToggle = el('label', {}, el('input', {
      type: 'checkbox', id: 'curve-log', checked: this.logScale,
      onchange: (e) => {
        this.logScale = e.target.checked;
        this.drawCurve();
      }}), ' log scale');
    // The last log shown stays until the next one arrives.
    this.logBox = this.logBox ||
        el('div', {id: 'log-box'}, el('p', {class: 'note'}, 'Loading the log…'));
    this.actionBox = el('div', {id: 'trial-actions', class: 'actions'});
    this.root.replaceChildren(
        this.nav(), header, reasonBox, this.actionBox,
        el('div', {class: 'columns'},
           el('section', {}, el('h2', {}, 'Parameters'), paramTable),
           el('section', {}, el('h2', {}, 'Metrics'), metricTable),
           el('section', {}, el('h2', {}, 'Run'), infoTable),
           ...(attributeSection ? [attributeSection] : [])),
        ...(attempts.length > 1 ? [this.attemptTable(attempts, price)] : []),
        ...((t.exploits || []).length ? [this.exploitTable(t.exploits)] : []),
        el('section', {class: 'plot'},
           el('h2', {}, 'Learning curve ', metricSelect, ' ', logToggle),
           this.curveBox, this.measurementTable(measurements, metricNames,
                                                attempts)),
        el('section', {}, el('h2', {}, 'Log'), this.logBox));
    this.renderActions();
    this.drawCurve();
  }

  // Every attempt (model.js's attemptsOf), when there was more than one:
  // who ran it, what it measured, how it ended, its device time and cost.
  attemptTable(attempts, price) {
    const state = (this.trial.state || '').toLowerCase();
    const steps = (a) => (a.steps ? `${a.steps[0]}–${a.steps[1]} ` +
                          `(${a.measurements})` : '—');
    return el('section', {},
        el('h2', {}, 'Attempts'),
        el('table', {class: 'trials', id: 'trial-attempts'},
           el('tr', {}, ...['attempt', 'worker', 'steps (measurements)',
                            'ended', 'how', 'device time', 'cost']
               .map((h) => el('th', {}, h))),
           ...attempts.map((a) => el('tr', {
             'data-attempt': a.number, 'data-current': a.current ? '1' : '0',
             class: a.current ? '' : 'earlier-attempt'},
               el('td', {class: 'num'}, a.number),
               el('td', {}, a.client_id),
               el('td', {class: 'num'}, steps(a)),
               el('td', {}, formatTime(a.end_time_ms)),
               el('td', {}, a.waiting ? 'waiting for a worker'
                   : a.current ? `current (${state}), the result`
                   : `${a.end_reason || 'lost'}, not the result`),
               el('td', {class: 'num'}, formatDeviceTime(a.device_seconds)),
               el('td', {class: 'num'}, price > 0 ? formatNumber(a.cost)
                                                  : 'not priced')))));
  }

  // PBT: each exploit, oldest first: whose checkpoint the trial took and
  // when, and how its parameters changed (its schedule).
  exploitTable(exploits) {
    const study = encodeURIComponent(this.data.study.name);
    const value = (v) => {
      if (!v) return '—';
      if ('string_value' in v) return v.string_value;
      if ('int_value' in v) return String(int64(v.int_value));
      return formatValue(num(v.double_value ?? 0));
    };
    const changes = (e) => {
      const before = new Map((e.parameters_before || []).map(
          (p) => [p.name, value(p)]));
      return (e.parameters || []).map((p) => {
        const was = before.get(p.name) ?? '—';
        const now = value(p);
        return was === now ? `${p.name} ${now}` : `${p.name} ${was} → ${now}`;
      }).join(', ');
    };
    return el('section', {},
        el('h2', {}, 'Exploits (population-based training)'),
        el('table', {class: 'trials', id: 'trial-exploits'},
           el('tr', {}, ...['#', 'at step', 'took', 'checkpoint step',
                            'checkpoint', 'its value / the donor\'s',
                            'parameters'].map((h) => el('th', {}, h))),
           ...exploits.map((e) => el('tr', {'data-donor':
                                            int64(e.donor_trial_id)},
               el('td', {class: 'num'}, e.number || 0),
               el('td', {class: 'num'}, int64(e.step)),
               el('td', {}, el('a', {href: `#study=${study}&trial=` +
                                           int64(e.donor_trial_id)},
                               `trial ${int64(e.donor_trial_id)}`)),
               el('td', {class: 'num'}, int64(e.checkpoint_step)),
               el('td', {}, e.checkpoint_uri || '—'),
               el('td', {class: 'num'}, `${formatNumber(num(e.value ?? 0))} / ` +
                                        formatNumber(num(e.donor_value ?? 0))),
               el('td', {}, changes(e))))));
  }

  measurementTable(measurements, names, attempts = []) {
    const shown = measurements.slice(-200);
    const whose = attempts.length > 1
        ? ` of ${attemptLabel(attempts.at(-1).number)}, the trial's result`
        : '';
    return el('details', {id: 'measurements'},
        el('summary', {}, `${measurements.length} measurements${whose}` +
                          (shown.length < measurements.length
                               ? ' (the last 200 below)' : '')),
        el('table', {class: 'trials'},
           el('tr', {}, el('th', {}, 'step'), el('th', {}, 'elapsed s'),
              ...names.map((n) => el('th', {}, n))),
           ...shown.map((m) => el('tr', {},
               el('td', {class: 'num'}, Number(m.step || 0)),
               el('td', {class: 'num'}, formatNumber(num(m.elapsed_seconds) ||
                                                     0)),
               ...names.map((n) => el('td', {class: 'num'},
                   m.metrics && n in m.metrics
                       ? formatNumber(num(m.metrics[n])) : ''))))));
  }

  renderActions() {
    const box = this.actionBox;
    box.replaceChildren();
    const state = this.trial.state;
    if (!this.server || !this.server.writes || !STOPPABLE.has(state)) return;
    const reason = el('input', {id: 'stop-reason', type: 'text', size: 30,
                                placeholder: 'reason (optional)'});
    const status = el('span', {id: 'trial-action-status', class: 'note'});
    const error = el('span', {id: 'trial-action-error', class: 'error'});
    box.append(el('button', {id: 'trial-stop', onclick: async () => {
      error.textContent = '';
      status.textContent = 'stopping…';
      try {
        this.trial = await api.post(api.studyPath(
            this.data.study.name, `/trials/${this.id}/stop`),
            reason.value ? {reason: reason.value} : {});
        this.data.applyTrial(this.trial);
        this.render();
        this.actionBox.append(el('span', {id: 'trial-action-status',
                                          class: 'note'},
                                 `stop requested: ${this.trial.state}`));
      } catch (e) {
        status.textContent = '';
        error.textContent = 'stop: ' + e.message;
      }
    }}, 'Stop trial'), ' ', reason, ' ', status, error);
  }

  drawCurve() {
    const box = this.curveBox;
    const curves = attemptCurves(this.trial, this.metric);
    const earlierPoints = curves.earlier.reduce(
        (n, c) => n + c.points.length, 0);
    box.setAttribute('data-points', curves.current.points.length);
    box.setAttribute('data-earlier-curves', curves.earlier.length);
    box.setAttribute('data-earlier-points', earlierPoints);
    box.setAttribute('data-metric', this.metric);
    if (!this.app.hasCharts) {
      box.replaceChildren(el('p', {class: 'note'},
                             'Charts are not part of this build.'));
      return;
    }
    if (curves.current.points.length + earlierPoints === 0) {
      box.replaceChildren(el('p', {class: 'note'},
          `No intermediate value of ${this.metric} was reported.`));
      return;
    }
    drawTrialCurve(box, curves, STATE_COLORS[this.trial.state] || '#3b6ea5',
                   {metric: this.metric, log: this.logScale, id: this.id,
                    width: Math.min(900, this.app.main.clientWidth - 40)});
  }

  // Reads the log's tail, at most every 2 s while live changes come in.
  async loadLog() {
    const now = Date.now();
    if (this.logAt && now - this.logAt < 2000) {
      if (!this.logTimer) {
        this.logTimer = setTimeout(() => {
          this.logTimer = null;
          this.logAt = 0;
          if (this.root.isConnected) this.loadLog();
        }, 2000 - (now - this.logAt));
      }
      return;
    }
    this.logAt = now;
    const box = this.logBox;
    if (!this.trial.log_path) {
      box.setAttribute('data-state', 'none');
      box.replaceChildren(el('p', {class: 'note'},
          'This trial has no log: only trials run by `hypertune worker` ' +
          'have one.'));
      return;
    }
    if (this.server && !this.server.logs) {
      box.setAttribute('data-state', 'off');
      box.replaceChildren(el('p', {class: 'note', id: 'log-off'},
          'This server does not serve logs: start hypertuned with ' +
          '--log-root DIR (the folder the workers write their logs into) ' +
          `to see the end of ${this.trial.log_path} here.`));
      return;
    }
    try {
      const tail = await api.get(api.studyPath(
          this.data.study.name, `/trials/${this.id}/log`));
      box.setAttribute('data-state', 'ok');
      box.setAttribute('data-bytes', tail.text.length);
      box.replaceChildren(
          el('p', {class: 'note'}, tail.offset > 0
              ? `The last ${formatNumber(tail.size - tail.offset)} bytes of ` +
                `${tail.path} (${formatNumber(tail.size)} bytes):`
              : `${tail.path} (${formatNumber(tail.size)} bytes):`),
          el('pre', {id: 'log-tail'}, tail.text));
    } catch (e) {
      box.setAttribute('data-state', 'error');
      box.replaceChildren(el('p', {class: 'error', id: 'log-error'},
                             'Log: ' + e.message));
    }
  }
}
