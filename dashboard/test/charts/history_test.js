// Unit tests of the optimization history's pure parts
// (dashboard/src/charts/history.js) in node: the best-so-far line's steps
// and the summary of why trials were infeasible. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {bestSoFarSteps, commonReasons} from '../../src/charts/history.js';

const lower = (a, b) => a < b;
const higher = (a, b) => a > b;

function row(id, objective, state = 'COMPLETED', reason = '') {
  return {id, objective, state, reason};
}

test('the best so far steps at each improvement, by the goal', () => {
  const rows = [row(1, 5), row(2, 7), row(3, 3), row(4, 3), row(5, 4),
                row(6, 1)];
  const all = () => true;
  assert.deepEqual(bestSoFarSteps(rows, lower, all),
                   [[1, 5], [3, 3], [6, 1]]);
  assert.deepEqual(bestSoFarSteps(rows, higher, all), [[1, 5], [2, 7]]);
  assert.deepEqual(bestSoFarSteps([], lower, all), []);
});

test('rows the history does not count never become the best', () => {
  // As drawHistory counts: COMPLETED, finite, not missing a constraint.
  const rows = [row(1, 5), row(2, 1, 'STOPPED'), row(3, -Infinity),
                row(4, 4), row(5, 0, 'COMPLETED', 'misses')];
  const counts = (r) => r.state === 'COMPLETED' &&
      Number.isFinite(r.objective) && r.reason === '';
  assert.deepEqual(bestSoFarSteps(rows, lower, counts), [[1, 5], [4, 4]]);
});

test('the most common infeasible reasons, ties in order seen', () => {
  const rows = [row(1, null, 'INFEASIBLE', 'oom'),
                row(2, null, 'INFEASIBLE', 'nan loss'),
                row(3, null, 'INFEASIBLE', ''),
                row(4, null, 'INFEASIBLE', 'nan loss'),
                row(5, null, 'INFEASIBLE', 'oom'),
                row(6, null, 'INFEASIBLE', 'oom'),
                row(7, null, 'INFEASIBLE', 'timeout')];
  assert.deepEqual(commonReasons(rows, 3),
                   [['oom', 3], ['nan loss', 2], ['no reason given', 1]]);
  assert.deepEqual(commonReasons(rows, 1), [['oom', 3]]);
  assert.deepEqual(commonReasons([]), []);
});
