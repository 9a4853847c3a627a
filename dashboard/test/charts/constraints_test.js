// Unit tests of the constraint panels' pure part
// (dashboard/src/charts/constraints.js) in node: which trials a panel
// shows and which of them lie outside the bounds. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {constraintPoints} from '../../src/charts/constraints.js';

function row(id, metrics, state = 'COMPLETED') {
  return {id, state, metrics};
}

test('a panel shows finished trials with a finite value of its metric', () => {
  // latency (metric 1) <= 10.
  const latency = {name: 'latency', index: 1, lower: null, upper: 10};
  const rows = [
    row(1, [0.5, 3]),
    row(2, [0.4, 12]),              // outside
    row(3, [0.3, 10]),              // on the bound: within
    row(4, [0.2, 50], 'STOPPED'),   // finished: shown, outside
    row(5, [0.1, 1], 'ACTIVE'),     // not finished
    row(6, [0.1, NaN]),             // not finite
    row(7, [0.1, null]),
    row(8, [0.1]),                  // never reported
    row(9, [0.1, Infinity]),
    row(10, [0.1, 2], 'INFEASIBLE'),
  ];
  const {points, outside} = constraintPoints(rows, latency);
  assert.deepEqual(points.map((r) => r.id), [1, 2, 3, 4]);
  assert.deepEqual(outside.map((r) => r.id), [2, 4]);
});

test('both bounds: below the lower one and above the upper one', () => {
  const memory = {name: 'memory', index: 0, lower: 1, upper: 8};
  const rows = [row(1, [0.5]), row(2, [1]), row(3, [8]), row(4, [8.01]),
                row(5, [-3])];
  const {points, outside} = constraintPoints(rows, memory);
  assert.equal(points.length, 5);
  assert.deepEqual(outside.map((r) => r.id), [1, 4, 5]);
});
