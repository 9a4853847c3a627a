// Unit tests of the empirical distribution's steps
// (dashboard/src/charts/edf.js) in node. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {edfSteps} from '../../src/charts/edf.js';

const rows = [3, 1, 2, 2, -1, 0.5].map((objective, i) => ({id: i + 1,
                                                           objective}));

test('the EDF rises by 1/n at each objective, in order', () => {
  const steps = edfSteps(rows, () => true);
  assert.deepEqual(steps.map((s) => s.row.objective), [-1, 0.5, 1, 2, 2, 3]);
  assert.deepEqual(steps.map((s) => s.below), [0, 1, 2, 3, 4, 5].map(
      (k) => k / 6));
  assert.deepEqual(steps.map((s) => s.fraction), [1, 2, 3, 4, 5, 6].map(
      (k) => k / 6));
  assert.equal(steps[steps.length - 1].fraction, 1);
});

test('only the rows the axis shows count', () => {
  // A log axis cannot show -1: the other five make the distribution.
  const steps = edfSteps(rows, (r) => r.objective > 0);
  assert.deepEqual(steps.map((s) => s.row.id), [6, 2, 3, 4, 1]);
  assert.deepEqual(steps.map((s) => s.fraction), [0.2, 0.4, 0.6, 0.8, 1]);
  assert.deepEqual(edfSteps(rows, () => false), []);
  assert.deepEqual(edfSteps([], () => true), []);
});
