// A study's page: its summary and actions (pause, resume, raise the
// budget: only when the server serves writes), the plots (history, slices,
// contour, parallel coordinates, intermediate values, EDF, importance) and
// the trial table, kept live by the event stream. Drawing is throttled to
// at most once a second, or four times the last drawing's duration. Plots
// in or near the window are drawn at once; the others when they scroll
// near it or when the browser is next idle, one at a time, so that the
// first paint waits only for what can be seen (body[data-charts-drawn]
// says when every plot is drawn).

import * as api from './api.js';
import {completedRows} from './charts/common.js';
import {drawConstraints} from './charts/constraints.js';
import {drawContour} from './charts/contour.js';
import {drawCurves} from './charts/curves.js';
import {drawEdf} from './charts/edf.js';
import {drawHistory} from './charts/history.js';
import {drawImportance} from './charts/importance.js';
import {drawLineage, drawSchedule} from './charts/lineage.js';
import {drawParallel} from './charts/parallel.js';
import {drawPareto} from './charts/pareto.js';
import {drawSlices} from './charts/slices.js';
import {el} from './dom.js';
import {formatNumber} from './format.js';
import {STATES, STATE_COLORS, budgetOf, earlyStoppingText, rungsOf} from './model.js';
import {TrialTable} from './table.js';

const RENDER_EVERY_MS = 1000;
// A plot this close to the window (px) is drawn as it scrolls near.
const NEAR_WINDOW_PX = 200;
// The height a plot not yet drawn keeps, so that the layout holds still.
const PLACEHOLDER_PX = 340;
// Importance is recomputed by the server at most this often while live.
const IMPORTANCE_EVERY_MS = 10000;

export class StudyPage {
  // `data`: a loaded StudyData; `app`: {main, open(id, study), setLive,
  // hasCharts, route()}.
  constructor(data, app) {
    this.data = data;
    this.app = app;
    this.logObjective = false;
    this.logParams = true;
    this.brushes = {};
    this.contour = null;  // [x, y] parameter names
    this.importance = null;
    this.budgetDraft = null;  // the budget box's text while being edited
    // The objective slices and importance show (several objectives: the
    // selector's choice); the first one to begin with.
    this.metric = data.objectives[0] || data.objective;
    this.scheduleName = null;  // PBT: the parameter whose schedule is drawn
    this.importanceRequest = 0;
    this.importanceAt = 0;
    this.importanceCompleted = -1;
    this.renderTimer = null;
    this.lastRenderMs = 0;
    this.pendingCharts = new Map();  // box id -> draw(), not yet drawn
    this.idleRequest = null;
    this.observer = window.IntersectionObserver
        ? new IntersectionObserver((entries) => {
          for (const e of entries) if (e.isIntersecting) this.drawPending(e.target.id);
        }, {rootMargin: `${NEAR_WINDOW_PX}px`})
        : null;
    this.table = new TrialTable(data, {
      open: (id) => app.open(id),
      clearBrush: () => {
        this.brushes = {};
        this.drawParallel();
        this.table.setBrush(null);
      },
    });
    this.root = null;
  }

  width() {
    return Math.max(600, Math.min(1200, this.app.main.clientWidth - 40));
  }

  opts() {
    return {logObjective: this.logObjective, logParams: this.logParams,
            width: this.width(), metric: this.metric,
            open: (id, study) => this.app.open(id, study)};
  }

  // Several objectives: a select of them that slices and importance follow.
  objectiveSelector() {
    if (this.data.objectives.length < 2) return [];
    return [el('label', {}, ' objective for slices and importance ',
        el('select', {id: 'objective-select', onchange: (event) => {
          this.metric = this.data.objectives.find(
              (m) => m.name === event.target.value) || this.metric;
          // A deferred slice plot reads the choice when it is drawn.
          if (!this.pendingCharts.has('slice')) {
            this.timedDraw('slice', () => drawSlices(
                this.boxes.slice, this.data, this.opts()));
          }
          this.loadImportance();
        }}, ...this.data.objectives.map((m) => el('option', {
          value: m.name, selected: m.name === this.metric.name}, m.name))))];
  }

  // PBT: the parameter whose schedule is drawn (the first at first).
  scheduleParam() {
    return this.data.params.find((p) => p.name === this.scheduleName) ||
        this.data.params[0];
  }

  scheduleSelector() {
    if (this.data.params.length < 2) return [];
    return [el('select', {id: 'schedule-select', onchange: (event) => {
      this.scheduleName = event.target.value;
      if (!this.pendingCharts.has('schedule')) {
        this.timedDraw('schedule', () => drawSchedule(
            this.boxes.schedule, this.data, this.scheduleParam(),
            this.opts()));
      }
    }}, ...this.data.params.map((p) => el('option', {value: p.name},
                                           p.name)))];
  }

  // Builds the page's skeleton and draws everything once.
  async show(server) {
    this.server = server;
    // Back from a trial: the page as it was, redrawn only if data changed.
    if (this.root) {
      this.app.main.replaceChildren(this.root);
      if (this.renderedVersion !== this.data.version) this.render();
      else this.drawWhenIdle();
      return;
    }
    const section = (id, title, ...extra) => {
      const box = el('div', {id, class: 'chart'});
      return [el('section', {class: 'plot'},
                 el('h2', {}, title, ...extra), box), box];
    };
    this.header = el('div', {id: 'study-header'});
    const toggles = el('div', {class: 'toggles'},
        el('label', {}, el('input', {
          type: 'checkbox', id: 'log-objective', checked: this.logObjective,
          onchange: (event) => {
            this.logObjective = event.target.checked;
            this.renderCharts();
          }}), ` log scale for ${this.data.objective.name}`),
        el('label', {}, el('input', {
          type: 'checkbox', id: 'log-params', checked: this.logParams,
          onchange: (event) => {
            this.logParams = event.target.checked;
            this.renderCharts();
          }}), ' log axes for log-scaled parameters'),
        ...(this.app.hasCharts ? this.objectiveSelector() : []));
    const sections = [this.header];
    if (this.app.hasCharts) {
      let history;
      let slice;
      let contour;
      let parallel;
      let curves;
      let edf;
      let importance;
      this.contourControls = el('span', {class: 'controls'});
      // Two or more objectives: their Pareto front instead of one
      // objective's best-so-far history.
      const s1 = this.data.multiObjective()
          ? section('pareto', 'Pareto front: ' + this.data.objectives.slice(0, 2)
                .map((m) => m.name).join(' against '))
          : section('history', 'Optimization history');
      // Constraints: each constrained metric by trial, under the history.
      const s1c = this.data.constraints.length
          ? section('constraints', 'Constraints by trial',
                    el('span', {class: 'hint'},
                       'bounds dashed, the region outside them shaded'))
          : null;
      const s2 = section('slice', this.data.objectives.length > 1
          ? 'Slices: the chosen objective against each parameter'
          : 'Slices: the objective against each parameter');
      const s3 = section('contour', 'Contour', this.contourControls);
      const s4 = section('parallel', 'Parallel coordinates',
          el('span', {class: 'hint'}, 'drag along an axis to filter the table'));
      const s5 = section('curves', 'Intermediate values');
      const s6 = section('edf', 'Empirical distribution of the objective');
      const s7 = section('importance', 'Parameter importance');
      [, history] = s1;
      [, slice] = s2;
      [, contour] = s3;
      [, parallel] = s4;
      [, curves] = s5;
      [, edf] = s6;
      [, importance] = s7;
      // Population-based training: who took whose checkpoint, and when;
      // a parameter's schedule.
      const pbt = (this.data.study.spec || {}).algorithm === 'PBT';
      const s8 = pbt ? section('lineage', 'Population lineage',
          el('span', {class: 'hint'}, 'an arrow from the donor\'s ' +
             'checkpoint to the member that took it')) : null;
      const s9 = pbt ? section('schedule', 'Parameter schedule',
                               this.scheduleSelector()) : null;
      this.boxes = {history, constraints: s1c && s1c[1], slice, contour,
                    parallel, curves, edf, importance,
                    lineage: s8 && s8[1], schedule: s9 && s9[1]};
      importance.append(el('p', {class: 'note'}, 'Computing…'));
      // About its drawn height, so that the plots below hold still.
      importance.style.minHeight = 30 * (this.data.params.length + 3) + 'px';
      sections.push(toggles, s1[0], ...(s1c ? [s1c[0]] : []),
                    ...(pbt ? [s8[0], s9[0]] : []), s7[0], s2[0], s3[0],
                    s4[0], s5[0], s6[0]);
    } else {
      sections.push(el('p', {id: 'no-charts', class: 'note'},
          'Charts are not part of this build (npm was absent when ' +
          'hypertuned was built): tables and text only.'));
    }
    sections.push(el('section', {class: 'plot'}, el('h2', {}, 'Trials'),
                     this.table.root));
    this.root = el('div', {id: 'study-page'}, ...sections);
    this.app.main.replaceChildren(this.root);
    this.render();
    if (this.app.hasCharts) this.loadImportance();
  }

  render() {
    const start = performance.now();
    this.renderHeader();
    this.renderCharts();
    const table = performance.now();
    this.table.render();
    document.body.setAttribute('data-table-ms',
                               Math.round(performance.now() - table));
    this.renderedVersion = this.data.version;
    this.lastRenderMs = performance.now() - start;
  }

  scheduleRender() {
    if (this.renderTimer !== null) return;
    this.renderTimer = setTimeout(() => {
      this.renderTimer = null;
      if (!this.root || !this.root.isConnected) return;
      this.render();
      this.maybeReloadImportance();
    }, Math.max(RENDER_EVERY_MS, 4 * this.lastRenderMs));
  }

  stop() {
    if (this.renderTimer !== null) clearTimeout(this.renderTimer);
    this.renderTimer = null;
  }

  // ----- Summary and actions -----

  renderHeader() {
    const data = this.data;
    const study = data.study;
    const counts = data.counts();
    const total = data.rows.size;
    const best = data.best();
    const spec = study.spec || {};
    const budget = budgetOf(study);
    const parts = STATES.filter((s) => counts[s]).map((s) => el('span', {
      class: 'count', style: `color:${STATE_COLORS[s]}`, 'data-state': s},
      `${counts[s]} ${s.toLowerCase()}`));
    const summary = el('p', {id: 'summary', 'data-trials': total},
        el('span', {id: 'study-state', 'data-state': study.state || '',
                    class: 'badge'}, study.state || ''),
        ` ${total} trials: `, ...parts.flatMap((p, i) => (i ? [', ', p] : [p])),
        ` · ${data.objectives.length > 1 ? 'objectives' : 'objective'} ` +
        data.objectives.map((m) => `${m.name} ` +
            `(${m.minimize ? 'minimize' : 'maximize'})`).join(', ') + ' · ' +
        `${spec.algorithm || 'default algorithm'} · budget ` +
        (budget ? `${budget} trials` : 'unlimited'),
        earlyStoppingText(study)
            ? el('span', {id: 'early-stopping'},
                 ` · early stopping ${earlyStoppingText(study)}`) : '',
        Number(study.cost || 0) > 0
            ? ` · cost ${formatNumber(Number(study.cost))}` : '',
        Number(study.device_seconds || 0) > 0
            ? ` · ${formatNumber(Number(study.device_seconds) / 3600)} ` +
              'device-hours' : '',
        ' · ',
        el('a', {href: api.studyPath(study.name, '/trials.csv'), id: 'csv',
                 onclick: (event) => this.downloadAllCsv(event)},
           'CSV of all trials'));
    const link = (id) => el('a', {href: `#study=${encodeURIComponent(
        study.name)}&trial=${id}`}, `trial ${id}`);
    const front = data.multiObjective() ? data.front() : null;
    const bestLine = front ? el('p', {id: 'best', 'data-front': front.length},
        front.length
            ? [`Pareto front of ${data.objectives.map((m) => m.name)
                   .join(', ')}: ${front.length} trials: `,
               ...front.slice(0, 20).flatMap((r, i) => [i ? ', ' : '',
                                                       link(r.id)]),
               front.length > 20 ? ', …' : '']
            : 'No completed feasible trial yet.')
        : el('p', {id: 'best', 'data-id': best ? best.id : ''},
        best ? ['Best: ', el('a', {href: `#study=${encodeURIComponent(
                                       study.name)}&trial=${best.id}`},
                             `trial ${best.id}`),
                `, ${data.objective.name} = ${formatNumber(best.objective)}` +
                ' with ' + data.params.map((p) =>
                    `${p.name}=${typeof best.params[p.index] === 'number'
                        ? formatNumber(best.params[p.index])
                        : best.params[p.index] ?? '—'}`).join(', ')]
             : 'No completed trial yet.');
    // The actions stay as they are while the budget box has the focus, so
    // that a live redraw never takes it from under the user's typing.
    const typing = this.actionsBox && document.activeElement &&
        document.activeElement.id === 'budget-input' &&
        this.actionsBox.contains(document.activeElement);
    const info = [el('h1', {}, study.name), summary, bestLine];
    if (typing) {
      // Replaced in place, the box left where it is (moved, it would lose
      // the focus).
      while (this.header.firstChild !== this.actionsBox) {
        this.header.firstChild.remove();
      }
      this.actionsBox.before(...info);
      return;
    }
    this.actionsBox = this.actions();
    this.header.replaceChildren(...info, this.actionsBox);
  }

  actions() {
    const box = el('div', {id: 'actions', class: 'actions'});
    if (!this.server || !this.server.writes) {
      box.append(el('span', {class: 'note', id: 'actions-off'},
          'Read-only: this server takes no actions from the page (start ' +
          'hypertuned with --auth-token-file, or --http-allow-writes on ' +
          'loopback).'));
      return box;
    }
    const study = this.data.study;
    const status = el('span', {id: 'action-status', class: 'note'},
                      this.actionStatus || '');
    const error = el('span', {id: 'action-error', class: 'error'},
                     this.actionError || '');
    // Each action goes through the same service call as gRPC; the answer
    // is the study as it is now.
    const run = async (what, path, body) => {
      error.textContent = '';
      status.textContent = what + '…';
      try {
        const updated = await api.post(api.studyPath(study.name, path), body);
        this.data.setStudy(updated);
        this.actionStatus = what + ': done';
        this.actionError = '';
      } catch (e) {
        this.actionStatus = '';
        this.actionError = `${what}: ${e.message}`;
      }
      this.renderHeader();
    };
    if (study.state === 'ACTIVE') {
      box.append(el('button', {id: 'action-pause', onclick: () =>
          run('pause', '/state', {state: 'PAUSED'})}, 'Pause study'));
    } else if (study.state === 'PAUSED') {
      box.append(el('button', {id: 'action-resume', onclick: () =>
          run('resume', '/state', {state: 'ACTIVE'})}, 'Resume study'));
    }
    // The box shows the current budget (a suggestion beside it read as the
    // budget: 50 beside "budget 40"), and keeps what the user is typing
    // across the live redraws until it is set.
    const input = el('input', {
      id: 'budget-input', type: 'number', min: 0, step: 1,
      value: this.budgetDraft ?? String(budgetOf(study)),
      oninput: (event) => { this.budgetDraft = event.target.value; }});
    const form = el('form', {id: 'budget-form', onsubmit: async (event) => {
      event.preventDefault();
      input.blur();
      await run('budget', '/max_trials', {max_trials: Number(input.value)});
      if (!this.actionError) this.budgetDraft = null;
      this.renderHeader();
    }}, ' max trials ', input, ' ',
        el('button', {id: 'budget-set', type: 'submit'}, 'Set budget'),
        el('span', {class: 'hint'}, ' (0 = unlimited; a completed study ' +
                                    'becomes active when raised)'));
    box.append(form, ' ', status, error);
    return box;
  }

  async downloadAllCsv(event) {
    event.preventDefault();
    const name = this.data.study.name;
    const response = await api.get(api.studyPath(name, '/trials.csv'),
                                   {raw: true});
    const url = URL.createObjectURL(await response.blob());
    const a = el('a', {href: url, download: name + '.csv'});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  // ----- Plots -----

  renderCharts() {
    if (!this.app.hasCharts) {
      document.body.setAttribute('data-charts-drawn', this.data.version);
      return;
    }
    const opts = this.opts();
    const b = this.boxes;
    const positive = completedRows(this.data).every(
        (r) => r.objective > 0);
    const toggle = document.getElementById('log-objective');
    if (toggle) {
      toggle.disabled = !positive;
      toggle.parentElement.title = positive ? ''
          : 'a log scale needs positive values';
    }
    const plots = [
      [b.history, () => (this.data.multiObjective()
          ? drawPareto(b.history, this.data, opts)
          : drawHistory(b.history, this.data, opts))],
      [b.constraints,
       () => drawConstraints(b.constraints, this.data, opts)],
      [b.slice, () => drawSlices(b.slice, this.data, opts)],
      [b.contour, () => this.drawContour()],
      [b.parallel, () => this.drawParallel()],
      [b.curves, () => drawCurves(b.curves, this.data, opts,
                                  rungsOf(this.data.study))],
      [b.lineage, () => drawLineage(b.lineage, this.data, opts)],
      [b.schedule, () => drawSchedule(b.schedule, this.data,
                                      this.scheduleParam(), opts)],
      [b.edf, () => drawEdf(
          b.edf, [{name: this.data.study.name, color: '#3b6ea5',
                   rows: completedRows(this.data)}],
          this.data.objective, opts)],
    ].filter(([box]) => box);
    this.chartTimes = {};
    this.pendingCharts.clear();
    document.body.removeAttribute('data-charts-drawn');
    // Where each plot lies, read before any is drawn: one layout, not one
    // per plot.
    for (const [box] of plots) {
      if (!box.firstChild) box.style.minHeight = PLACEHOLDER_PX + 'px';
    }
    const bottom = window.innerHeight;
    const tops = plots.map(([box]) => box.getBoundingClientRect().top);
    for (const [i, [box, draw]] of plots.entries()) {
      if (tops[i] < bottom) {
        box.style.minHeight = '';
        this.timedDraw(box.id, draw);
      } else {
        box.setAttribute('data-deferred', '1');
        this.pendingCharts.set(box.id, draw);
        if (this.observer) this.observer.observe(box);
      }
    }
    this.drawWhenIdle();
  }

  // Draws one plot and records its time (body[data-chart-ms], for people
  // and benchmarks).
  timedDraw(id, draw) {
    const start = performance.now();
    draw();
    this.chartTimes[id] = Math.round(performance.now() - start);
    document.body.setAttribute('data-chart-ms',
                               JSON.stringify(this.chartTimes));
  }

  // Draws the deferred plot in box `id`, if it still waits.
  drawPending(id) {
    const draw = this.pendingCharts.get(id);
    if (!draw) return;
    this.pendingCharts.delete(id);
    const box = document.getElementById(id);
    if (this.observer && box) this.observer.unobserve(box);
    if (box) {
      box.removeAttribute('data-deferred');
      box.style.minHeight = '';
    }
    this.timedDraw(id, draw);
    this.drawWhenIdle();
  }

  // Draws the deferred plots one per idle moment; marks the body when
  // every plot is drawn.
  drawWhenIdle() {
    if (this.pendingCharts.size === 0) {
      if (this.idleRequest !== null) {
        (window.cancelIdleCallback || clearTimeout)(this.idleRequest);
        this.idleRequest = null;
      }
      document.body.setAttribute('data-charts-drawn', this.data.version);
      document.body.setAttribute('data-charts-drawn-ms',
                                 Math.round(performance.now()));
      return;
    }
    if (this.idleRequest !== null) return;
    const idle = window.requestIdleCallback ||
        ((f) => setTimeout(f, 16));
    this.idleRequest = idle(() => {
      this.idleRequest = null;
      if (!this.root || !this.root.isConnected) return;
      const [id] = this.pendingCharts.keys();
      if (id !== undefined) this.drawPending(id);
    }, {timeout: 100});
  }

  drawParallel() {
    const drawn = drawParallel(
        this.boxes.parallel, this.data, this.opts(), this.brushes,
        (ids) => this.table.setBrush(ids));
    // Redrawn with the same brushes (new trials, other scales): the table
    // follows what passes now; render() draws it next.
    this.table.brushIds = drawn && Object.keys(this.brushes).length
        ? drawn.ids : null;
    this.table.brushVersion = (this.table.brushVersion || 0) + 1;
  }

  drawContour() {
    const params = this.data.params;
    if (!this.contour || !params.some((p) => p.name === this.contour[0])) {
      const ranked = this.importance && this.importance.parameters &&
          this.importance.parameters.length
          ? [...this.importance.parameters].sort(
                (a, b) => b.importance - a.importance).map((p) => p.name)
          : params.map((p) => p.name);
      this.contour = [ranked[0], ranked[1] || ranked[0]];
    }
    const select = (id, index) => el('select', {
      id, onchange: (event) => {
        this.contour[index] = event.target.value;
        this.drawContour();
      }}, ...params.map((p) => el('option', {
        value: p.name, selected: p.name === this.contour[index]}, p.name)));
    this.contourControls.replaceChildren(
        ' of ', select('contour-x', 0), ' and ', select('contour-y', 1));
    drawContour(this.boxes.contour, this.data, this.opts(),
                this.contour[0], this.contour[1]);
  }

  async loadImportance() {
    const box = this.boxes.importance;
    const started = performance.now();
    this.importanceAt = Date.now();
    this.importanceCompleted = this.data.counts().COMPLETED || 0;
    // Only the latest request's answer is drawn (the objective may change
    // while one is out).
    const request = ++this.importanceRequest;
    let answer;
    try {
      answer = await api.get(api.studyPath(
          this.data.study.name,
          '/importance?metric=' + encodeURIComponent(this.metric.name)));
    } catch (e) {
      if (request !== this.importanceRequest) return;
      box.replaceChildren(el('p', {class: 'error'},
                             'Importance: ' + e.message));
      return;
    }
    if (request !== this.importanceRequest || !box.isConnected) return;
    this.importance = answer;
    const hadContour = this.contour !== null;
    box.style.minHeight = '';
    drawImportance(box, this.importance, (name) => {
      this.contour = [name, this.contour[0] === name ? this.contour[1]
                                                     : this.contour[0]];
      this.drawContour();
      this.boxes.contour.scrollIntoView({block: 'nearest'});
    });
    document.body.setAttribute('data-importance-ms',
                               Math.round(performance.now() - started));
    // The first contour shows the two most important parameters.
    if (!this.contourPicked && hadContour) {
      this.contourPicked = true;
      this.contour = null;
      this.drawContour();
    }
  }

  maybeReloadImportance() {
    if (!this.app.hasCharts) return;
    const completed = this.data.counts().COMPLETED || 0;
    if (completed !== this.importanceCompleted &&
        Date.now() - this.importanceAt >= IMPORTANCE_EVERY_MS) {
      this.loadImportance();
    }
  }
}
