// Unit tests of what the charts share (dashboard/src/charts/common.js) in
// node, without DOM or d3: extents, the ticks of a log-scaled integer axis,
// positions on a scale, the nearest point, tooltips, the jitter and the
// rows the plots show. Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {allPositive, completedRows, extent, finite, jitter, logIntegerTicks,
        nearest, paramPairs, position, tipHtml,
        trialTip} from '../../src/charts/common.js';

test('extent: finite values, positive ones on a log axis, widened', () => {
  assert.deepEqual(extent([3, null, -1, Infinity, NaN, 2]), [-1, 3]);
  assert.deepEqual(extent([3, -1, 0, 2], true), [2, 3]);
  assert.equal(extent([null, NaN, -Infinity]), null);
  assert.equal(extent([-2, 0], true), null);
  // One value: 10% either side, 1 around 0, halved and doubled on log.
  assert.deepEqual(extent([5]), [4.5, 5.5]);
  assert.deepEqual(extent([0]), [-1, 1]);
  assert.deepEqual(extent([4], true), [2, 8]);
});

test('allPositive ignores absent and non-finite values', () => {
  assert.ok(allPositive([1, null, Infinity, 2]));
  assert.ok(!allPositive([1, 0]));
  assert.ok(!allPositive([null, NaN]));
  assert.ok(!allPositive([]));
});

// A linear scale as d3 makes one, enough for position(): a function with
// domain and range, no bandwidth, a `base` only when logarithmic.
function linearScale([d0, d1], [r0, r1]) {
  const scale = (v) => r0 + (v - d0) / (d1 - d0) * (r1 - r0);
  scale.domain = () => [d0, d1];
  scale.range = () => [r0, r1];
  return scale;
}

test('position: absent, non-finite and non-positive-on-log are null', () => {
  const linear = linearScale([0, 10], [100, 0]);
  assert.equal(position(linear, 5), 50);
  assert.equal(position(linear, -5), 150);
  for (const v of [null, undefined, NaN, Infinity]) {
    assert.equal(position(linear, v), null);
  }
  const log = (v) => Math.log10(v);
  log.base = () => 10;
  assert.equal(position(log, 100), 2);
  assert.equal(position(log, 0), null);
  // A point scale (categories): its position, null for an unknown one.
  const point = (c) => ({a: 10, b: 20})[c];
  point.bandwidth = () => 0;
  assert.equal(position(point, 'b'), 20);
  assert.equal(position(point, 'c'), null);
});

test('nearest: the closest point within the radius, or -1', () => {
  const xs = Float32Array.from([0, 10, 20]);
  const ys = Float32Array.from([0, 0, 5]);
  assert.equal(nearest(xs, ys, 3, 9, 1, 10), 1);
  assert.equal(nearest(xs, ys, 3, 19, 4, 10), 2);
  assert.equal(nearest(xs, ys, 3, 50, 50, 10), -1);
  // Only the first n points count.
  assert.equal(nearest(xs, ys, 2, 19, 4, 10), 1);
  // On the radius counts; ties go to the later point.
  assert.equal(nearest(xs, ys, 3, 5, 0, 5), 1);
});

test('tooltips escape their text and format numbers', () => {
  assert.equal(tipHtml('a <b> & "c"', [['x', 0.123456], ['s', '<i>'],
                                         ['n', null]]),
               '<b>a &lt;b&gt; &amp; &quot;c&quot;</b><br>x: 0.12346' +
               '<br>s: &lt;i&gt;<br>n: ');
  const data = {
    objective: {name: 'loss'},
    constraints: [{name: 'mem', index: 1, lower: null, upper: 8}],
    params: [{name: 'lr', index: 0}],
  };
  const row = {id: 7, state: 'COMPLETED', objective: 0.5, metrics: [0.5, 9],
               params: [1e-4], reason: ''};
  assert.deepEqual(paramPairs(data, row), [['lr', 1e-4]]);
  assert.equal(trialTip(data, row, [['extra', 'yes']]),
               '<b>trial 7 (completed)</b><br>loss: 0.5' +
               '<br>mem (\u2264 8): 9<br>extra: yes<br>lr: 1.000e-4');
});

test('the jitter is deterministic and within half a step', () => {
  for (let id = 1; id <= 2000; ++id) {
    const j = jitter(id);
    assert.ok(j >= -0.5 && j < 0.5, `${id}: ${j}`);
    assert.equal(jitter(id), j);
  }
  // Spread out, not all on one side.
  const values = Array.from({length: 200}, (_, i) => jitter(i + 1));
  assert.ok(values.some((v) => v < -0.25) && values.some((v) => v > 0.25));
});

test('completedRows: COMPLETED trials with a finite objective', () => {
  const rows = [
    {id: 1, state: 'COMPLETED', objective: 1},
    {id: 2, state: 'COMPLETED', objective: NaN},
    {id: 3, state: 'STOPPED', objective: 2},
    {id: 4, state: 'COMPLETED', objective: null},
    {id: 5, state: 'COMPLETED', objective: -Infinity},
    {id: 6, state: 'COMPLETED', objective: 0},
  ];
  assert.deepEqual(completedRows({sorted: () => rows}).map((r) => r.id),
                   [1, 6]);
  assert.ok(finite(0) && !finite(null) && !finite(NaN) && !finite(Infinity));
});

function assertTicks(ticks, lo, hi, maxCount) {
  assert.ok(ticks.length >= 1, `no ticks for ${lo}..${hi}`);
  assert.ok(ticks.length <= maxCount, `${ticks} over ${maxCount}`);
  for (let i = 0; i < ticks.length; ++i) {
    assert.ok(Number.isInteger(ticks[i]), `${ticks}`);
    assert.ok(ticks[i] >= lo && ticks[i] <= hi, `${ticks} outside`);
    if (i > 0) assert.ok(ticks[i] > ticks[i - 1], `${ticks} not increasing`);
  }
}

test('log integer ticks: powers of ten, then of two, bounded', () => {
  // INTEGER LOG 1..1024, as the scale pads it (/1.15, *1.15): the issue's
  // axis, whose 1-9 per decade ticks were all labelled over each other.
  assert.deepEqual(logIntegerTicks(1 / 1.15, 1024 * 1.15, 6), [1, 10, 100,
                                                              1000]);
  assert.deepEqual(logIntegerTicks(1, 1e6, 4), [1, 100, 10000, 1000000]);
  // Seven powers of two in 16..1024: every other one.
  assert.deepEqual(logIntegerTicks(16, 1024, 6), [16, 64, 256, 1024]);
  assert.deepEqual(logIntegerTicks(1, 6.9, 4), [1, 2, 4]);
  assert.deepEqual(logIntegerTicks(2, 3.45, 4), [2, 3]);
  assert.deepEqual(logIntegerTicks(0.87, 1.15, 4), [1]);
  for (const [lo, hi, n] of [[1, 1024, 6], [1, 1024, 4], [3, 9, 4],
                             [5, 15, 4], [1, 2 ** 40, 6], [100, 130, 4],
                             [7, 7000, 3], [1, 10, 1]]) {
    assertTicks(logIntegerTicks(lo, hi, n), lo, hi, n);
  }
});

test('log integer ticks: bounded, distinct, within range everywhere', () => {
  for (const lo of [1, 2, 3, 7, 15, 99, 1000, 4096]) {
    for (const factor of [1, 1.5, 2, 3, 5, 10, 40, 300, 1e4, 1e7]) {
      for (let n = 1; n <= 8; ++n) {
        assertTicks(logIntegerTicks(lo, lo * factor, n), lo, lo * factor, n);
      }
    }
  }
  // No integer within the range: no ticks.
  assert.deepEqual(logIntegerTicks(1.2, 1.8, 4), []);
});
