// Unit tests of the intermediate values' pure parts
// (dashboard/src/charts/curves.js) in node: the colour group of each state
// (paused trials apart), the values that need a dot of their own, the
// legend, and the curve nearest the pointer. Run by ctest (dashboard_model_test)
// with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {CURVE_GROUPS, curveGroup, curveLegend, isolatedPoints, nearestCurve}
  from '../../src/charts/curves.js';
import {STATE_COLORS} from '../../src/model.js';

test('each state\'s colour group', () => {
  const groups = Object.fromEntries(
      ['REQUESTED', 'ACTIVE', 'STOPPING', 'PAUSED', 'COMPLETED', 'STOPPED',
       'INFEASIBLE', 'FAILED'].map((s) => [s, curveGroup(s)]));
  assert.deepEqual(groups, {
    REQUESTED: 'OTHER', ACTIVE: 'ACTIVE', STOPPING: 'STOPPED',
    PAUSED: 'PAUSED', COMPLETED: 'COMPLETED', STOPPED: 'STOPPED',
    INFEASIBLE: 'OTHER', FAILED: 'OTHER'});
});

test('paused trials have a colour of their own and a legend entry', () => {
  const colors = new Map(CURVE_GROUPS.map((g) => [g.group, g.color]));
  assert.equal(colors.get('PAUSED'), STATE_COLORS.PAUSED);
  assert.equal(new Set(colors.values()).size, colors.size);
  // ASHA's case: paused and stopped trials, none running.
  assert.deepEqual(curveLegend(new Set(['PAUSED', 'STOPPED'])).map(
      (i) => [i.label, i.color]),
  [['paused', STATE_COLORS.PAUSED],
   ['stopped (\u00d7 where it stopped)', '#c23030']]);
  assert.deepEqual(curveLegend(new Set(['OTHER'])), []);
});

test('a value no line passes through gets a dot', () => {
  // One measurement (a trial paused at ASHA's first rung): its one value.
  assert.deepEqual(isolatedPoints(Float32Array.from([5])), [0]);
  // A line: none.
  assert.deepEqual(isolatedPoints(Float32Array.from([5, 4, 3])), []);
  // Values cut off by undrawn ones (NaN: non-finite, or <= 0 on a log axis).
  assert.deepEqual(isolatedPoints(Float32Array.from([1, NaN, 2, 3, NaN, 4])),
                   [0, 5]);
  assert.deepEqual(isolatedPoints(Float32Array.from([NaN, NaN])), []);
  assert.deepEqual(isolatedPoints(new Float32Array(0)), []);
});

// Curves in pixels: each a list of x (increasing) and y.
const px = [Float32Array.from([0, 10, 20]), Float32Array.from([0, 10, 20]),
            Float32Array.from([30, 40])];
const py = [Float32Array.from([100, 80, 60]), Float32Array.from([50, 50, 50]),
            Float32Array.from([10, NaN])];

test('the nearest curve, read between its points', () => {
  // At x = 5 curve 0 is at 90: the pointer at 88 is nearest to it.
  assert.deepEqual(nearestCurve(px, py, 5, 88), {index: 0, y: 90});
  assert.deepEqual(nearestCurve(px, py, 15, 52), {index: 1, y: 50});
  // Before its first point and past its last (within 4 px): its end.
  assert.deepEqual(nearestCurve(px, py, -3, 99), {index: 0, y: 100});
  assert.deepEqual(nearestCurve(px, py, 23, 61), {index: 0, y: 60});
  assert.deepEqual(nearestCurve(px, py, 28, 12), {index: 2, y: 10});
});

test('no curve within 8 px, or none under the pointer: null', () => {
  assert.equal(nearestCurve(px, py, 5, 70), null);
  assert.equal(nearestCurve(px, py, 25, 60), null);
  // A value that is not drawn (NaN) is never near.
  assert.equal(nearestCurve(px, py, 40, 10), null);
  assert.equal(nearestCurve([], [], 5, 5), null);
});
