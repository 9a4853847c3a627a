// Unit tests of the Pareto front's step line
// (dashboard/src/charts/pareto.js) in node. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {frontStepVertices} from '../../src/charts/pareto.js';

test('the step line has a corner between each two front points', () => {
  const front = [[0, 10], [5, 6], [9, 2]];
  // x minimized: along x first, at the previous point's y.
  assert.deepEqual(frontStepVertices(front, true),
                   [[0, 10], [5, 10], [5, 6], [9, 6], [9, 2]]);
  // x maximized: along y first, at the previous point's x.
  assert.deepEqual(frontStepVertices(front, false),
                   [[0, 10], [0, 6], [5, 6], [5, 2], [9, 2]]);
});

test('one point or none: no corners', () => {
  assert.deepEqual(frontStepVertices([[3, 4]], true), [[3, 4]]);
  assert.deepEqual(frontStepVertices([], false), []);
});
