// Unit tests of the parameter importance's pure parts
// (dashboard/src/charts/importance.js) in node: reading the server's
// answer, the share left to interactions, and the warning when too few
// trials stand behind the shares. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {RELIABLE_IMPORTANCE_TRIALS, importanceRows, interactionShare,
        reliabilityWarning} from '../../src/charts/importance.js';

test('the answer\'s parameters as numbers, most important first', () => {
  // As the server's JSON has them: numbers, or strings for +-inf and NaN.
  const answer = {parameters: [
    {name: 'momentum', importance: 0.05, stddev: 0.01, trials: 40},
    {name: 'lr', importance: 0.6, stddev: '0.1', trials: 40},
    {name: 'depth', importance: '0.25', stddev: 0.05, trials: 12},
  ]};
  assert.deepEqual(importanceRows(answer), [
    {name: 'lr', importance: 0.6, stddev: 0.1, trials: 40},
    {name: 'depth', importance: 0.25, stddev: 0.05, trials: 12},
    {name: 'momentum', importance: 0.05, stddev: 0.01, trials: 40},
  ]);
  assert.deepEqual(importanceRows({}), []);
  // A parameter without its own count: the answer's.
  assert.equal(importanceRows({trials: 7, parameters: [
    {name: 'a', importance: 1, stddev: 0}]})[0].trials, 7);
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

test('importance from 2 trials says it is unreliable', () => {
  // The case: "lr 100%" from 2 trials, shown as if it meant it.
  const answer = {trials: 2, parameters: [
    {name: 'lr', importance: 1, stddev: 0, trials: 2},
    {name: 'momentum', importance: 0, stddev: 0, trials: 2}]};
  const warning = reliabilityWarning(answer, importanceRows(answer));
  assert.match(warning, /^Unreliable: only 2 completed trials/);
  assert.match(warning, new RegExp(`at least ${RELIABLE_IMPORTANCE_TRIALS}`));
  const one = {trials: 1, parameters: []};
  assert.match(reliabilityWarning(one, []), /only 1 completed trial;/);
  // Just below and at the threshold.
  const at = (n) => ({trials: n, parameters: [
    {name: 'lr', importance: 1, stddev: 0, trials: n}]});
  const below = at(RELIABLE_IMPORTANCE_TRIALS - 1);
  assert.notEqual(reliabilityWarning(below, importanceRows(below)), '');
  const enough = at(RELIABLE_IMPORTANCE_TRIALS);
  assert.equal(reliabilityWarning(enough, importanceRows(enough)), '');
});

test('a conditional parameter measured over too few trials is named', () => {
  const answer = {trials: 40, parameters: [
    {name: 'lr', importance: 0.5, stddev: 0, trials: 40},
    {name: 'depth', importance: 0.4, stddev: 0, trials: 3}]};
  assert.equal(reliabilityWarning(answer, importanceRows(answer)),
               `Unreliable for depth (3 trials): measured over fewer than ` +
               `${RELIABLE_IMPORTANCE_TRIALS} trials where it is active; ` +
               'greyed.');
});
