// Unit tests of the comparison's best-so-far series
// (dashboard/src/charts/compare.js) in node, over the data model's own
// StudyData. Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {bestSoFarSeries} from '../../src/charts/compare.js';
import {StudyData, rowFromCompact} from '../../src/model.js';

function study(goal) {
  const data = new StudyData({name: 's', spec: {
    parameters: [{name: 'x', double_spec: {min: 0, max: 1}}],
    metrics: [{name: 'loss', goal}]}});
  const trials = [[3, 'COMPLETED', 5], [1, 'COMPLETED', 7],
                  [2, 'FAILED', 0], [4, 'COMPLETED', 'NaN'],
                  [5, 'STOPPED', -10], [6, 'COMPLETED', 4],
                  [7, 'COMPLETED', 9]];
  for (const [id, state, loss] of trials) {
    data.rows.set(id, rowFromCompact({id, state, params: [0.5],
                                      metrics: [loss], measurements: 1}));
  }
  return data;
}

test('best so far over COMPLETED trials with a finite objective', () => {
  const points = bestSoFarSeries(study('MINIMIZE'));
  // In trial order (1, 3, 6, 7); failed, stopped and NaN trials left out.
  assert.deepEqual(points.map((p) => [p.row.id, p.best]),
                   [[1, 7], [3, 5], [6, 4], [7, 4]]);
});

test('a maximized objective keeps the highest so far', () => {
  assert.deepEqual(bestSoFarSeries(study('MAXIMIZE')).map((p) => p.best),
                   [7, 7, 7, 9]);
});
