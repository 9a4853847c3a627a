// Unit tests of the intermediate values' pure parts
// (dashboard/src/charts/curves.js) in node: the colour group of each state
// and the curve nearest the pointer. Run by ctest (dashboard_model_test)
// with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {curveGroup, nearestCurve} from '../../src/charts/curves.js';

test('each state\'s colour group', () => {
  const groups = Object.fromEntries(
      ['REQUESTED', 'ACTIVE', 'STOPPING', 'PAUSED', 'COMPLETED', 'STOPPED',
       'INFEASIBLE', 'FAILED'].map((s) => [s, curveGroup(s)]));
  assert.deepEqual(groups, {
    REQUESTED: 'OTHER', ACTIVE: 'ACTIVE', STOPPING: 'STOPPED',
    PAUSED: 'ACTIVE', COMPLETED: 'COMPLETED', STOPPED: 'STOPPED',
    INFEASIBLE: 'OTHER', FAILED: 'OTHER'});
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
