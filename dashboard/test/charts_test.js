// Unit tests of the plots' pure parts in node (no DOM, no d3): the
// contour's thresholds and the ticks of a log-scaled integer axis. Run by
// ctest (dashboard_model_test) with `node --test`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {contourThresholds} from '../src/charts.js';
import {logIntegerTicks} from '../src/plot.js';

// Each threshold's band is the region at or above it: the whole plot is
// filled when the first threshold is at or below the minimum.
function assertFills(thresholds, lo, hi) {
  assert.ok(thresholds.length > 0);
  assert.ok(thresholds[0] <= lo, `first ${thresholds[0]} above lo ${lo}`);
  assert.ok(thresholds[thresholds.length - 1] <= hi);
  for (let i = 1; i < thresholds.length; ++i) {
    assert.ok(thresholds[i] > thresholds[i - 1], `${thresholds}`);
  }
}

test('contour thresholds start at or below the minimum', () => {
  // The case: the minimum lies between two nice values, so the
  // first threshold within [lo, hi] was above it and the best region white.
  const t = contourThresholds(0.237, 3.91, 12);
  assertFills(t, 0.237, 3.91);
  assert.deepEqual(t.slice(0, 3), [0.2, 0.4, 0.6]);
  assert.equal(t[t.length - 1], 3.8);
  // Negative and large values; a minimum that is itself a nice value.
  for (const [lo, hi] of [[-17.3, 42.9], [-1e-3, -2e-4], [1234, 98765],
                          [0, 1], [5, 5.5], [-3, 3], [0.3, 0.9]]) {
    const ts = contourThresholds(lo, hi, 12);
    assertFills(ts, lo, hi);
    assert.ok(ts.length >= 5 && ts.length <= 20, `${lo}..${hi}: ${ts}`);
  }
  assert.deepEqual(contourThresholds(0, 1, 10),
                   [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1]);
  assert.equal(contourThresholds(0.3, 0.9, 6)[0], 0.3);
});

test('contour thresholds of a constant or empty grid', () => {
  assert.deepEqual(contourThresholds(2.5, 2.5), [2.5]);
  assert.deepEqual(contourThresholds(NaN, 1), []);
  assert.deepEqual(contourThresholds(1, 0), []);
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
