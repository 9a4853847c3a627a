// Unit tests of the contour's pure parts (dashboard/src/charts/contour.js)
// in node, without DOM or d3: its thresholds, the Laplace filling of the
// grid's empty cells, when it falls back to the trials alone, and its axes'
// domain (the search domain). Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {MIN_CONTOUR_TRIALS, contourDomain, contourMode, contourThresholds,
        fillGrid} from '../../src/charts/contour.js';

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

test('the grid holds each known cell\'s mean', () => {
  const sum = Float64Array.from([6, 1, -4, 10]);
  const count = Uint32Array.from([3, 1, 2, 4]);
  assert.deepEqual([...fillGrid(sum, count, 2, 2)], [2, 1, -2, 2.5]);
});

test('empty cells are filled by Laplace interpolation', () => {
  // Known: the first column 0, the last 4; between them the harmonic (and
  // here linear) fill is the column's index, in every row.
  const nx = 5;
  const ny = 4;
  const sum = new Float64Array(nx * ny);
  const count = new Uint32Array(nx * ny);
  for (let j = 0; j < ny; ++j) {
    sum[j * nx + nx - 1] = 4;
    count[j * nx] = 1;
    count[j * nx + nx - 1] = 1;
  }
  const grid = fillGrid(sum, count, nx, ny);
  for (let j = 0; j < ny; ++j) {
    for (let i = 0; i < nx; ++i) {
      assert.ok(Math.abs(grid[j * nx + i] - i) < 1e-6,
                `cell (${i}, ${j}): ${grid[j * nx + i]}`);
    }
  }
  // A single known cell fills the whole grid with its mean.
  const single = new Float64Array(9);
  const singleCount = new Uint32Array(9);
  single[4] = 7;
  singleCount[4] = 2;
  const flat = fillGrid(single, singleCount, 3, 3);
  assert.ok(flat.every((v) => Math.abs(v - 3.5) < 1e-9), `${flat}`);
});

const x = {name: 'x', kind: 'double', min: -5, max: 10, log: false};
const y = {name: 'y', kind: 'double', min: 0, max: 15, log: false};
const lr = {name: 'lr', kind: 'double', min: 1e-5, max: 1e-1, log: true};
const act = {name: 'act', kind: 'categorical', categories: ['relu', 'tanh'],
             min: null, max: null};

test('a contour over two numeric parameters with enough trials', () => {
  assert.ok(MIN_CONTOUR_TRIALS > 3);
  assert.deepEqual(contourMode(x, y, MIN_CONTOUR_TRIALS), {mode: 'contour',
                                                          why: ''});
  assert.equal(contourMode(lr, y, 500).mode, 'contour');
});

test('three trials get no contour, and a sentence saying why', () => {
  const {mode, why} = contourMode(x, y, 3);
  assert.equal(mode, 'scatter');
  assert.match(why, new RegExp(
      `needs at least ${MIN_CONTOUR_TRIALS} completed trials`));
  assert.match(why, /; 3 so far have both parameters: the trials alone\.$/);
  assert.match(contourMode(x, y, 1).why, /; 1 so far has both/);
  assert.equal(contourMode(x, y, MIN_CONTOUR_TRIALS - 1).mode, 'scatter');
});

test('a categorical axis: the trials alone, never interpolated', () => {
  // However many trials: a fill between categories means nothing.
  for (const [a, b] of [[act, y], [x, act]]) {
    const {mode, why} = contourMode(a, b, 1000);
    assert.equal(mode, 'scatter');
    assert.match(why, /^act is categorical/);
  }
  assert.match(contourMode(act, {...act, name: 'opt'}, 50).why,
               /^act and opt are categorical/);
});

test('the contour spans the search domain exactly', () => {
  // The case: [-5, 10] drew from -6 to 12 (padded, then rounded).
  assert.deepEqual(contourDomain(x, [-4.2, 0.5, 9.9]), [-5, 10]);
  assert.deepEqual(contourDomain(lr, [1e-4, 1e-2], true), [1e-5, 1e-1]);
  // A value outside the spec (the spec changed since): widened to it.
  assert.deepEqual(contourDomain(x, [-4, 12]), [-5, 12]);
  // No range in the spec (a discrete one without values): the values'.
  assert.deepEqual(contourDomain({...x, min: null, max: null}, [1, 3]),
                   [1, 3]);
  assert.deepEqual(contourDomain({...x, min: null, max: null}, []), [0, 1]);
});
