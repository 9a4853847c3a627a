// Unit tests of PBT's lineage and schedules (dashboard/src/charts/
// lineage.js) in node. Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {lineageOf, scheduleOf} from '../../src/charts/lineage.js';

const exploit = (step, donor, checkpointStep, before, after) => ({
  step, donor, checkpoint_step: checkpointStep, time_ms: 0, value: 0,
  donor_value: 1, params_before: before, params: after});

const rows = [
  {id: 1, steps: Float64Array.from([1, 2, 3, 4]), params: [0.1, 'a'],
   exploits: []},
  {id: 2, steps: Float64Array.from([1, 2, 3, 4, 5, 6]), params: [0.3, 'b'],
   exploits: [exploit(2, 1, 2, [0.5, 'a'], [0.12, 'a']),
              exploit(4, 3, 4, [0.12, 'a'], [0.3, 'b'])]},
  {id: 3, steps: Float64Array.from([1, 2, 3, 4]), params: [0.2, 'b'],
   exploits: []},
  {id: 4, steps: Float64Array.from([1]), params: [0.9, 'a'], exploits: []},
];

test('the lineage holds the members that exploited and their donors', () => {
  const {ids, links, maxStep} = lineageOf(rows);
  assert.deepEqual(ids, [1, 2, 3]);
  assert.deepEqual(links.map((l) => [l.from, l.to, l.fromStep, l.toStep]),
                   [[1, 2, 2, 2], [3, 2, 4, 4]]);
  assert.equal(maxStep, 6);
});

test('a PBT study lists every member, exploited or not', () => {
  assert.deepEqual(lineageOf(rows, true).ids, [1, 2, 3, 4]);
  assert.deepEqual(lineageOf([], true), {ids: [], links: [], maxStep: 0});
});

test('a link reaching past every curve widens the steps', () => {
  const late = [{id: 7, steps: Float64Array.from([1]), params: [1],
                 exploits: [exploit(9, 8, 5, [1], [2])]},
                {id: 8, steps: Float64Array.from([5]), params: [3],
                 exploits: []}];
  assert.equal(lineageOf(late).maxStep, 9);
});

test('a schedule starts with the initial values and moves at each exploit',
     () => {
       assert.deepEqual(scheduleOf(rows[1], 0), [[0, 0.5], [2, 0.12],
                                                 [4, 0.3]]);
       assert.deepEqual(scheduleOf(rows[1], 1), [[0, 'a'], [2, 'a'],
                                                 [4, 'b']]);
       // Never exploited: its parameters throughout.
       assert.deepEqual(scheduleOf(rows[0], 0), [[0, 0.1]]);
     });
