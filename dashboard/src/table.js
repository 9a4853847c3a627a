// The trial table: every metric as a column (the objective first), every
// parameter, the state's reason, steps, duration, device-hours and cost;
// sort by any column, filter by state, by ranges of any numeric column and
// by the parallel-coordinates brush, search the text; pages of 50 (only a
// page is ever in the DOM, so ten thousand trials stay fast); and a CSV of
// exactly the rows that pass the filters.

import {el} from './dom.js';
import {formatDuration, formatNumber, formatTime,
        formatValue} from './format.js';
import {STATES, STATE_COLORS, isFeasible} from './model.js';

const PAGE_SIZES = [25, 50, 100, 250];

function csvField(value) {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
}

export class TrialTable {
  // open(id) opens a trial's page; clearBrush() removes the parallel
  // coordinates' brushes (their filter chip's ×).
  constructor(data, {open, clearBrush}) {
    this.data = data;
    this.open = open;
    this.clearBrush = clearBrush;
    this.sortKey = 'id';
    this.sortAsc = true;
    this.page = 1;
    this.pageSize = 50;
    this.hiddenStates = new Set();
    this.search = '';
    this.ranges = [];  // {key, label, lo, hi}
    this.brushIds = null;
    this.cache = null;
    this.root = el('div', {id: 'trial-table'});
    this.built = false;
  }

  columns() {
    const data = this.data;
    const priced = Number(data.study.spec.price_per_device_hour || 0) > 0;
    const cols = [
      {key: 'id', label: 'trial', value: (r) => r.id, numeric: true},
      {key: 'state', label: 'state',
       value: (r) => (r.warm_start ? r.state + ' (warm start)' : r.state)},
      ...data.metricSpecs.map((m) => ({
        key: 'm:' + m.name,
        label: m.role === 'OBJECTIVE' ? `${m.name} ${m.minimize ? '↓' : '↑'}`
            : m.role === 'CONSTRAINT'
                ? `${m.name} ∈ [${m.lower ?? '−∞'}, ${m.upper ?? '+∞'}]`
                : m.name,
        value: (r) => r.metrics[m.index], numeric: true})),
      ...data.params.map((p) => ({
        key: 'p:' + p.name, label: p.name, value: (r) => r.params[p.index],
        numeric: p.kind !== 'categorical'})),
      ...(data.metricSpecs.some((m) => m.role === 'CONSTRAINT') ||
          data.multiObjective()
          ? [{key: 'feasible', label: 'feasible',
              value: (r) => (r.state !== 'COMPLETED' ? ''
                             : isFeasible(r, data.metricSpecs) ? 'yes'
                             : 'no')}] : []),
      {key: 'reason', label: 'reason', value: (r) => r.reason},
      {key: 'steps', label: 'steps', value: (r) => r.measurements,
       numeric: true},
      {key: 'duration', label: 'duration', value: (r) => r.duration,
       numeric: true, show: formatDuration, csv: (v) => (v === null ? '' : v / 1000),
       csvLabel: 'duration_s'},
      {key: 'device_hours', label: 'device·h',
       value: (r) => r.device_seconds / 3600, numeric: true},
      ...(priced ? [{key: 'cost', label: 'cost', value: (r) => r.cost,
                     numeric: true}] : []),
      {key: 'created', label: 'created', value: (r) => r.create_time_ms,
       numeric: true, show: formatTime},
    ];
    return cols;
  }

  // ----- Filtering and sorting -----

  textOf(row) {
    if (row.text === undefined) {
      row.text = [row.id, row.state, row.reason,
                  ...row.params.filter((v) => typeof v === 'string')]
          .join(' ').toLowerCase();
    }
    return row.text;
  }

  signature() {
    return JSON.stringify([this.data.version, this.sortKey, this.sortAsc,
                           [...this.hiddenStates], this.search, this.ranges,
                           this.brushIds ? this.brushIds.size : -1,
                           this.brushVersion || 0]);
  }

  // The rows passing every filter, in the chosen order (cached).
  rows() {
    const signature = this.signature();
    if (this.cache && this.cache.signature === signature) {
      return this.cache.rows;
    }
    const columns = this.columns();
    const byKey = new Map(columns.map((c) => [c.key, c]));
    const ranges = this.ranges.map((r) => ({...r, column: byKey.get(r.key)}))
        .filter((r) => r.column);
    const needle = this.search.trim().toLowerCase();
    const out = [];
    for (const row of this.data.sorted()) {
      if (this.hiddenStates.has(row.state)) continue;
      if (this.brushIds && !this.brushIds.has(row.id)) continue;
      if (needle && !this.textOf(row).includes(needle)) continue;
      let ok = true;
      for (const r of ranges) {
        const v = r.column.value(row);
        if (v === null || v === undefined || typeof v !== 'number' ||
            Number.isNaN(v) || (r.lo !== null && v < r.lo) ||
            (r.hi !== null && v > r.hi)) {
          ok = false;
          break;
        }
      }
      if (ok) out.push(row);
    }
    const column = byKey.get(this.sortKey) || columns[0];
    let sorted = out;
    if (column.key !== 'id' || !this.sortAsc) {
      const missing = (v) => v === null || v === undefined || v === '' ||
                             (typeof v === 'number' && Number.isNaN(v));
      const keyed = out.map((row) => {
        const k = column.value(row);
        return {row, k, missing: missing(k)};
      });
      const sign = this.sortAsc ? 1 : -1;
      // Missing values last in either direction; ties by id.
      keyed.sort((a, b) => {
        if (a.missing || b.missing) {
          return a.missing && b.missing ? a.row.id - b.row.id
                                        : a.missing ? 1 : -1;
        }
        if (a.k < b.k) return -sign;
        if (a.k > b.k) return sign;
        return a.row.id - b.row.id;
      });
      sorted = keyed.map((x) => x.row);
    }
    this.cache = {signature, rows: sorted};
    return sorted;
  }

  setBrush(ids) {
    this.brushIds = ids;
    this.brushVersion = (this.brushVersion || 0) + 1;
    this.page = 1;
    this.render();
  }

  // ----- Rendering -----

  build() {
    const numeric = this.columns().filter((c) => c.numeric && c.key !== 'id');
    this.stateBox = el('span', {id: 'state-filter', class: 'chips'});
    this.searchInput = el('input', {
      id: 'trial-search', type: 'search', value: this.search,
      placeholder: 'search id, state, reason, category…',
      oninput: () => {
        this.search = this.searchInput.value;
        this.page = 1;
        this.render();
      },
    });
    const column = el('select', {id: 'range-column'},
        ...numeric.map((c) => el('option', {value: c.key}, c.label)));
    const lo = el('input', {id: 'range-min', type: 'text', size: 8,
                            placeholder: 'min'});
    const hi = el('input', {id: 'range-max', type: 'text', size: 8,
                            placeholder: 'max'});
    const error = el('span', {class: 'error', id: 'range-error'});
    const add = el('button', {id: 'range-add', type: 'submit'}, 'filter');
    const parse = (text) => {
      const t = text.trim();
      if (t === '') return null;
      const v = Number(t);
      return Number.isNaN(v) ? undefined : v;
    };
    const form = el('form', {class: 'range-form', onsubmit: (event) => {
      event.preventDefault();
      const a = parse(lo.value);
      const b = parse(hi.value);
      if (a === undefined || b === undefined || (a === null && b === null)) {
        error.textContent = 'give a number for min, max or both';
        return;
      }
      error.textContent = '';
      const c = numeric.find((x) => x.key === column.value);
      this.ranges = this.ranges.filter((r) => r.key !== c.key);
      this.ranges.push({key: c.key, label: c.label, lo: a, hi: b});
      lo.value = '';
      hi.value = '';
      this.page = 1;
      this.render();
    }}, column, ' from ', lo, ' to ', hi, ' ', add, ' ', error);
    this.chips = el('div', {id: 'active-filters', class: 'chips'});
    this.countLine = el('span', {id: 'table-count'});
    this.csvLink = el('a', {href: '#', id: 'csv-filtered',
                            onclick: (event) => {
                              event.preventDefault();
                              this.downloadCsv();
                            }}, 'CSV of these rows');
    this.table = el('table', {id: 'trials', class: 'trials'});
    this.pager = el('div', {class: 'pager'});
    this.root.replaceChildren(
        el('div', {class: 'filters'}, el('span', {class: 'label'}, 'states '),
           this.stateBox),
        el('div', {class: 'filters'}, this.searchInput, ' ', form),
        this.chips,
        el('div', {class: 'filters'}, this.countLine, ' · ', this.csvLink),
        el('div', {class: 'table-scroll'}, this.table), this.pager);
    this.built = true;
  }

  render() {
    if (!this.built) this.build();
    const columns = this.columns();
    const rows = this.rows();
    const pages = Math.max(1, Math.ceil(rows.length / this.pageSize));
    this.page = Math.min(Math.max(1, this.page), pages);
    const first = (this.page - 1) * this.pageSize;
    const shown = rows.slice(first, first + this.pageSize);

    const counts = this.data.counts();
    this.stateBox.replaceChildren(...STATES.filter((s) => counts[s]).map(
        (s) => el('label', {class: 'chip', style: `border-color:${STATE_COLORS[s]}`},
                  el('input', {type: 'checkbox', 'data-state': s,
                               checked: !this.hiddenStates.has(s),
                               onchange: (event) => {
                                 if (event.target.checked) {
                                   this.hiddenStates.delete(s);
                                 } else {
                                   this.hiddenStates.add(s);
                                 }
                                 this.page = 1;
                                 this.render();
                               }}),
                  ` ${s.toLowerCase()} (${counts[s]})`)));
    const chips = this.ranges.map((r) => el('span', {class: 'chip active',
        'data-filter': r.key},
        `${r.label} ${r.lo !== null ? '≥ ' + formatNumber(r.lo) : ''}` +
        `${r.lo !== null && r.hi !== null ? ' and ' : ''}` +
        `${r.hi !== null ? '≤ ' + formatNumber(r.hi) : ''} `,
        el('button', {class: 'remove', title: 'remove this filter',
                      onclick: () => {
                        this.ranges = this.ranges.filter((x) => x !== r);
                        this.render();
                      }}, '×')));
    if (this.brushIds) {
      chips.push(el('span', {class: 'chip active', 'data-filter': 'brush'},
          `parallel coordinates brush: ${this.brushIds.size} trials `,
          el('button', {class: 'remove', title: 'clear the brushes',
                        onclick: () => this.clearBrush()}, '×')));
    }
    this.chips.replaceChildren(...chips);

    const total = this.data.rows.size;
    this.countLine.textContent = rows.length
        ? `trials ${first + 1}–${first + shown.length} of ${rows.length}` +
          (rows.length < total ? ` matching (of ${total})` : '')
        : `no trial matches (of ${total})`;
    this.csvLink.textContent = `CSV of these ${rows.length} trials`;

    const head = el('tr', {}, ...columns.map((c) => el('th', {
      class: 'sortable' + (c.key === this.sortKey
                               ? (this.sortAsc ? ' asc' : ' desc') : ''),
      'data-key': c.key,
      onclick: () => {
        this.sortAsc = c.key === this.sortKey ? !this.sortAsc : true;
        this.sortKey = c.key;
        this.page = 1;
        this.render();
      },
    }, c.label)));
    const body = shown.map((row) => el('tr', {
      'data-id': row.id, class: 'state-' + row.state,
      onclick: () => this.open(row.id),
    }, ...columns.map((c) => {
      const v = c.value(row);
      const text = c.show ? c.show(v) : formatValue(v);
      return el('td', {class: c.numeric ? 'num' : (c.key === 'reason'
                                                    ? 'reason' : '')},
                text);
    })));
    this.table.setAttribute('data-page', this.page);
    this.table.setAttribute('data-pages', pages);
    this.table.setAttribute('data-rows', shown.length);
    this.table.setAttribute('data-total', rows.length);
    this.table.setAttribute('data-all', total);
    this.table.setAttribute('data-sort',
                            (this.sortAsc ? '+' : '-') + this.sortKey);
    this.table.replaceChildren(el('thead', {}, head), el('tbody', {}, body));

    const go = (page) => {
      this.page = page;
      this.render();
    };
    this.pager.replaceChildren(
        el('button', {id: 'first', disabled: this.page <= 1,
                      onclick: () => go(1)}, '«'),
        el('button', {id: 'prev', disabled: this.page <= 1,
                      onclick: () => go(this.page - 1)}, '‹ prev'),
        el('span', {id: 'page-label'}, ` page ${this.page} of ${pages} `),
        el('button', {id: 'next', disabled: this.page >= pages,
                      onclick: () => go(this.page + 1)}, 'next ›'),
        el('button', {id: 'last', disabled: this.page >= pages,
                      onclick: () => go(pages)}, '»'),
        ' rows per page ',
        el('select', {id: 'page-size', onchange: (event) => {
          this.pageSize = Number(event.target.value);
          this.page = 1;
          this.render();
        }}, ...PAGE_SIZES.map((n) => el('option', {
          value: n, selected: n === this.pageSize}, n))));
    return this.root;
  }

  // The filtered rows in their order, as CSV, downloaded.
  downloadCsv() {
    const columns = this.columns();
    const lines = [columns.map((c) => csvField(c.csvLabel || c.key)).join(',')];
    for (const row of this.rows()) {
      lines.push(columns.map((c) => {
        const v = c.value(row);
        return csvField(c.csv ? c.csv(v) : v);
      }).join(','));
    }
    const blob = new Blob([lines.join('\r\n') + '\r\n'],
                          {type: 'text/csv'});
    const url = URL.createObjectURL(blob);
    const a = el('a', {href: url,
                       download: this.data.study.name + '-filtered.csv'});
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
    // For tests and tools: the last CSV made, without a download folder.
    document.body.setAttribute('data-last-csv-rows', lines.length - 1);
    window.hypertuneLastCsv = lines.join('\r\n');
  }
}
