// Unit tests of the parameter importance's pure parts
// (dashboard/src/charts/importance.js) in node: reading the server's
// answer and the share left to interactions. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {importanceRows,
        interactionShare} from '../../src/charts/importance.js';

test('the answer\'s parameters as numbers, most important first', () => {
  // As the server's JSON has them: numbers, or strings for +-inf and NaN.
  const answer = {parameters: [
    {name: 'momentum', importance: 0.05, stddev: 0.01, trials: 40},
    {name: 'lr', importance: 0.6, stddev: '0.1', trials: 40},
    {name: 'depth', importance: '0.25', stddev: 0.05, trials: 12},
  ]};
  assert.deepEqual(importanceRows(answer), [
    {name: 'lr', importance: 0.6, stddev: 0.1},
    {name: 'depth', importance: 0.25, stddev: 0.05},
    {name: 'momentum', importance: 0.05, stddev: 0.01},
  ]);
  assert.deepEqual(importanceRows({}), []);
});

test('what no parameter explains alone is left to interactions', () => {
  const rows = importanceRows({parameters: [
    {name: 'a', importance: 0.5, stddev: 0}, {name: 'b', importance: 0.3,
                                              stddev: 0}]});
  assert.ok(Math.abs(interactionShare(rows) - 0.2) < 1e-12);
  assert.equal(interactionShare([]), 1);
  // Rounding can make the sum pass 1: never a negative share.
  assert.equal(interactionShare([{importance: 0.7}, {importance: 0.31}]), 0);
});
