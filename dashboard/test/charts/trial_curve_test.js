// Unit tests of the trial page's learning curve's pure parts
// (dashboard/src/charts/trial_curve.js) in node: the current attempt's
// curve apart from the earlier attempts', each labelled with how it ended,
// and the legend that tells them apart. Run by ctest (dashboard_model_test)
// with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {EARLIER_COLOR, attemptCurves, earlierDash,
        legendItems} from '../../src/charts/trial_curve.js';

// Attempt 1 lost its lease after step 8 with a checkpoint at step 6; the
// current attempt 2 resumed there and measured step 7 again, worse.
const trial = {
  id: '4', state: 'ACTIVE', attempt: 2, checkpoint_step: '6',
  measurements: [{step: '5', metrics: {loss: 0.6, acc: 0.7}},
                 {step: '6', metrics: {loss: 0.5}},
                 {step: '7', metrics: {loss: 0.55}}],
  earlier_attempts: [
    {number: 1, end_reason: 'lease expired',
     measurements: [{step: '7', elapsed_seconds: 3.1, metrics: {loss: 0.4}},
                    {step: '8', metrics: {loss: 'NaN'}}]},
  ],
};

test('the current attempt\'s curve is the measurements alone', () => {
  const curves = attemptCurves(trial, 'loss');
  assert.deepEqual(curves.current,
                   {number: 2, label: 'attempt 2 (current)',
                    points: [[5, 0.6], [6, 0.5], [7, 0.55]]});
  assert.equal(curves.checkpointStep, 6);
  // Attempt 1's step 7 is its own point, never the current one's.
  assert.equal(curves.earlier.length, 1);
  assert.equal(curves.earlier[0].number, 1);
  assert.equal(curves.earlier[0].label, 'attempt 1 (lease expired)');
  assert.equal(curves.earlier[0].points.length, 2);
  assert.deepEqual(curves.earlier[0].points[0], [7, 0.4]);
  assert.ok(Number.isNaN(curves.earlier[0].points[1][1]));
});

test('earlier attempts by number; those without the metric left out', () => {
  const many = {...trial, attempt: 4, earlier_attempts: [
    {number: 3, end_reason: 'worker preempted',
     measurements: [{step: '9', metrics: {loss: 0.3}}]},
    {number: 2, end_reason: 'interrupted'},  // nothing past the checkpoint
    ...trial.earlier_attempts]};
  const curves = attemptCurves(many, 'loss');
  assert.deepEqual(curves.earlier.map((c) => c.label),
                   ['attempt 1 (lease expired)',
                    'attempt 3 (worker preempted)']);
  // A metric only the current attempt reported.
  const acc = attemptCurves(trial, 'acc');
  assert.deepEqual(acc.current.points, [[5, 0.7]]);
  assert.deepEqual(acc.earlier, []);
});

test('a trial from a server without attempts: one unlabelled curve', () => {
  const curves = attemptCurves({id: '1', measurements: [
    {step: 1, metrics: {loss: 1}}, {metrics: {loss: 0.5}}]}, 'loss');
  assert.deepEqual(curves, {current: {number: 0, label: '',
                                      points: [[1, 1], [0, 0.5]]},
                            earlier: [], checkpointStep: 0});
  assert.deepEqual(legendItems(curves, '#2e8b57'), []);
});

test('the legend: the current attempt solid, each earlier one dashed grey',
     () => {
  const items = legendItems(attemptCurves(trial, 'loss'), '#2e8b57');
  assert.deepEqual(items, [
    {label: 'attempt 2 (current)', color: '#2e8b57', shape: 'line'},
    {label: 'attempt 1 (lease expired)', color: EARLIER_COLOR,
     shape: 'line', dash: earlierDash(0)}]);
  // A lost trial with no curve of its own yet: only the earlier ones.
  const waiting = attemptCurves({...trial, state: 'REQUESTED',
                                 measurements: []}, 'loss');
  assert.deepEqual(legendItems(waiting, '#9aa5b1').map((i) => i.label),
                   ['attempt 1 (lease expired)']);
});

test('the legend names at most four earlier attempts, then how many more',
     () => {
  const earlier = Array.from({length: 6}, (_, k) => ({
    number: k + 1, end_reason: 'lease expired',
    measurements: [{step: String(k + 1), metrics: {loss: 1}}]}));
  const items = legendItems(
      attemptCurves({...trial, attempt: 7, earlier_attempts: earlier},
                    'loss'), '#2e8b57');
  assert.equal(items.length, 1 + 4 + 1);
  assert.equal(items[5].label, '+2 earlier');
  // Neighbouring attempts are dashed differently.
  const dashes = items.slice(1, 5).map((i) => i.dash.join(' '));
  assert.equal(new Set(dashes).size, 4);
  assert.deepEqual(earlierDash(4), earlierDash(0));
});
