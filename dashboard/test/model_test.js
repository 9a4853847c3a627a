// Unit tests of the dashboard's data model (dashboard/src/model.js) in
// node: metric roles, feasibility, the Pareto front, rows of conditional
// trials and non-finite objectives, parameter specs, rungs, a study's
// counts, best trial and front, and a trial's attempts (only the current
// one's curve is its result). Run by ctest (dashboard_model_test)
// with `node --test`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {StudyData, attemptsOf, budgetOf, studyChanged, boundText, int64, isFeasible, metricsOf,
        objectiveOf, outsideBounds, parametersOf, paretoFront,
        rowFromCompact, rowFromTrial, rungsOf, earlyStoppingText} from '../src/model.js';

const twoObjectives = {
  name: 'mo',
  spec: {
    parameters: [{name: 'x', double_spec: {min: 0, max: 1}}],
    metrics: [
      {name: 'loss', goal: 'MINIMIZE', role: 'OBJECTIVE'},
      {name: 'acc', goal: 'MAXIMIZE', role: 'OBJECTIVE'},
      {name: 'latency', goal: 'MINIMIZE', role: 'CONSTRAINT',
       upper_bound: 10},
      {name: 'memory', role: 'CONSTRAINT', lowerBound: 1, upperBound: '8'},
      {name: 'epochs'},
    ],
  },
};

function row(id, metrics, state = 'COMPLETED', feasible = null) {
  return {id, state, metrics, params: [], feasible};
}

test('a study without roles has the first metric as its objective', () => {
  const study = {spec: {metrics: [{name: 'a', goal: 'MAXIMIZE'},
                                  {name: 'b', goal: 'MINIMIZE'}]}};
  const metrics = metricsOf(study);
  assert.deepEqual(metrics.map((m) => m.role), ['OBJECTIVE', 'RECORDED']);
  assert.deepEqual(objectiveOf(study),
                   {name: 'a', index: 0, minimize: false});
  const unspecified = {spec: {metrics: [{name: 'a', role: 'ROLE_UNSPECIFIED'},
                                        {name: 'b'}]}};
  assert.equal(metricsOf(unspecified)[0].role, 'OBJECTIVE');
});

test('roles and both spellings of the bounds are read', () => {
  const metrics = metricsOf(twoObjectives);
  assert.deepEqual(metrics.map((m) => m.role),
                   ['OBJECTIVE', 'OBJECTIVE', 'CONSTRAINT', 'CONSTRAINT',
                    'RECORDED']);
  assert.equal(metrics[2].upper, 10);
  assert.equal(metrics[2].lower, null);
  assert.equal(metrics[3].lower, 1);
  assert.equal(metrics[3].upper, 8);
  // The roles the server publishes are read as they are.
  const published = {spec: {metrics: [{name: 'c', role: 'CONSTRAINT'},
                                      {name: 'o', goal: 'MINIMIZE'}]},
                     metric_roles: ['CONSTRAINT', 'OBJECTIVE']};
  assert.deepEqual(objectiveOf(published),
                   {name: 'o', index: 1, minimize: true});
});

test('feasibility follows the bounds and the server\'s mark', () => {
  const metrics = metricsOf(twoObjectives);
  assert.ok(isFeasible(row(1, [1, 1, 10, 8, 0]), metrics));
  assert.ok(!isFeasible(row(2, [1, 1, 10.5, 8, 0]), metrics));
  assert.ok(!isFeasible(row(3, [1, 1, 5, 0.5, 0]), metrics));
  assert.ok(!isFeasible(row(4, [1, 1, null, 2, 0]), metrics));
  assert.ok(!isFeasible(row(5, [1, 1, NaN, 2, 0]), metrics));
  assert.ok(!isFeasible(row(6, [1, 1, 5, 2, 0], 'COMPLETED', false),
                        metrics));
});

test('a constraint\'s bounds are told and checked inclusively', () => {
  const [, , latency, memory] = metricsOf(twoObjectives);
  assert.equal(boundText(latency), '\u2264 10');
  assert.equal(boundText(memory), 'in [1, 8]');
  assert.equal(boundText({lower: 2, upper: null}), '\u2265 2');
  assert.ok(!outsideBounds(latency, 10));
  assert.ok(outsideBounds(latency, 10.01));
  assert.ok(!outsideBounds(memory, 1));
  assert.ok(outsideBounds(memory, 0.99));
  assert.ok(outsideBounds(memory, 8.5));
});

test('the Pareto front honours each objective\'s goal', () => {
  const metrics = metricsOf(twoObjectives);
  const objectives = metrics.filter((m) => m.role === 'OBJECTIVE');
  // loss (min), acc (max), latency <= 10, 1 <= memory <= 8.
  const rows = [
    row(1, [0.1, 0.5, 1, 2, 0]),   // front: lowest loss
    row(2, [0.5, 0.9, 1, 2, 0]),   // front: highest acc
    row(3, [0.3, 0.7, 1, 2, 0]),   // front: between
    row(4, [0.4, 0.6, 1, 2, 0]),   // dominated by 3
    row(5, [0.05, 0.99, 50, 2, 0]),  // would dominate all; misses latency
    row(6, [0.2, 0.5, 1, 2, 0]),   // dominated by 1
    row(7, [0.01, 1.0, 1, 2, 0], 'STOPPED'),  // not COMPLETED
    row(8, [Infinity, 1.5, 1, 2, 0]),  // non-finite: left out
    row(9, [0.3, 0.7, 1, 2, 0]),   // equal to 3: on the front too
    row(10, [0.1, 0.5, 1, 2, 0], 'COMPLETED', false),  // marked infeasible
  ];
  const front = paretoFront(rows, objectives, metrics);
  assert.deepEqual(front.map((r) => r.id).sort((a, b) => a - b),
                   [1, 2, 3, 9]);
  // Flipping acc's goal: a trial with low loss and low acc wins.
  const flipped = objectives.map((m) => ({...m, minimize: true}));
  assert.deepEqual(paretoFront(rows, flipped, metrics).map((r) => r.id),
                   [1]);
});

test('the front of many random points matches the quadratic definition',
     () => {
  const metrics = metricsOf(twoObjectives);
  const objectives = metrics.filter((m) => m.role === 'OBJECTIVE');
  let seed = 7;
  const random = () => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed / 2147483648;
  };
  const rows = [];
  for (let i = 1; i <= 500; ++i) {
    rows.push(row(i, [Math.round(random() * 50) / 50,
                      Math.round(random() * 50) / 50, 1, 2, 0]));
  }
  const better = (a, b) => a.metrics[0] <= b.metrics[0] &&
      a.metrics[1] >= b.metrics[1] &&
      (a.metrics[0] < b.metrics[0] || a.metrics[1] > b.metrics[1]);
  const expected = rows.filter((r) => !rows.some((o) => better(o, r)))
      .map((r) => r.id).sort((a, b) => a - b);
  const got = paretoFront(rows, objectives, metrics).map((r) => r.id)
      .sort((a, b) => a - b);
  assert.deepEqual(got, expected);
});

test('an inactive parameter is null and non-finite objectives are kept',
     () => {
  const study = {spec: {
    parameters: [{name: 'x', double_spec: {min: 0, max: 1}},
                 {name: 'depth', integer_spec: {min: 1, max: 9}}],
    metrics: [{name: 'loss', goal: 'MINIMIZE'}]}};
  const compact = rowFromCompact({id: 3, state: 'COMPLETED',
                                  params: [0.5, null], metrics: ['NaN'],
                                  curve: [[1, 'Infinity']], measurements: 1});
  assert.equal(compact.params[1], null);
  assert.ok(Number.isNaN(compact.objective));
  assert.equal(compact.values[0], Infinity);
  const full = rowFromTrial({
    id: '4', state: 'COMPLETED',
    parameters: [{name: 'x', double_value: 0.25}],
    final_measurement: {metrics: {loss: '-Infinity'}}}, study);
  assert.deepEqual(full.params, [0.25, null]);
  assert.equal(full.objective, -Infinity);
});

test('PBT exploits read alike from the compact feed and a full Trial', () => {
  const study = {spec: {
    parameters: [{name: 'lr', double_spec: {min: 0.001, max: 1}},
                 {name: 'opt', categorical_spec: {values: ['adam', 'sgd']}}],
    metrics: [{name: 'acc', goal: 'MAXIMIZE'}]}};
  const compact = rowFromCompact({id: 5, state: 'ACTIVE',
      params: [0.024, 'sgd'], metrics: [null], curve: [[4, 0.7]],
      measurements: 1, exploits: [{step: 4, donor: 2, checkpoint_step: 3,
          time_ms: 99, value: 0.5, donor_value: 0.8,
          params_before: [0.01, 'adam'], params: [0.024, 'sgd']}]});
  const full = rowFromTrial({id: '5', state: 'ACTIVE',
      parameters: [{name: 'opt', string_value: 'sgd'},
                   {name: 'lr', double_value: 0.024}],
      measurements: [{step: '4', metrics: {acc: 0.7}}],
      exploits: [{number: 1, step: '4', donor_trial_id: '2',
                  checkpoint_step: '3', time_ms: '99', value: 0.5,
                  donor_value: 0.8, checkpoint_uri: 'file:///c/2',
                  parameters_before: [{name: 'lr', double_value: 0.01},
                                      {name: 'opt', string_value: 'adam'}],
                  parameters: [{name: 'lr', double_value: 0.024},
                               {name: 'opt', string_value: 'sgd'}]}]},
      study);
  const expected = [{step: 4, donor: 2, checkpoint_step: 3, time_ms: 99,
                     value: 0.5, donor_value: 0.8,
                     params_before: [0.01, 'adam'], params: [0.024, 'sgd']}];
  assert.deepEqual(compact.exploits, expected);
  assert.deepEqual(full.exploits, expected);
  assert.deepEqual(rowFromCompact({id: 1, state: 'ACTIVE', params: [0.1, 'a'],
                                   metrics: [null]}).exploits, []);
});

test('parameter specs: kind, range, log scale and categories', () => {
  const params = parametersOf({spec: {parameters: [
    {name: 'lr', double_spec: {min: 1e-5, max: '0.1', scale: 'LOG'}},
    {name: 'depth', integer_spec: {min: '2', max: '12'}},
    {name: 'batch', discrete_spec: {values: [64, '16', 32]}},
    {name: 'opt', categorical_spec: {values: ['adam', 'sgd']}},
  ]}});
  assert.deepEqual(params.map((p) => [p.name, p.index, p.kind, p.log]),
                   [['lr', 0, 'double', true], ['depth', 1, 'integer', false],
                    ['batch', 2, 'discrete', false],
                    ['opt', 3, 'categorical', false]]);
  assert.deepEqual([params[0].min, params[0].max], [1e-5, 0.1]);
  assert.deepEqual([params[1].min, params[1].max], [2, 12]);
  assert.deepEqual([params[2].min, params[2].max], [16, 64]);
  assert.deepEqual(params[3].categories, ['adam', 'sgd']);
  assert.equal(params[3].min, null);
});

test('rungs of ASHA and HYPERBAND, none for other rules', () => {
  const rule = (early_stopping) => ({spec: {early_stopping}});
  assert.deepEqual(rungsOf(rule({rule: 'ASHA', min_resource: '1',
                                 max_resource: '100',
                                 reduction_factor: 3})),
                   [1, 3, 9, 27, 81]);
  assert.deepEqual(rungsOf(rule({rule: 'HYPERBAND', min_resource: 4,
                                 max_resource: 64, reduction_factor: 2})),
                   [4, 8, 16, 32]);
  assert.deepEqual(rungsOf(rule({rule: 'MEDIAN'})), []);
  assert.deepEqual(rungsOf({spec: {}}), []);
});

test('the early-stopping rule in words', () => {
  const rule = (early_stopping) => ({spec: {early_stopping}});
  assert.equal(earlyStoppingText(rule({rule: 'ASHA', multi_objective: 'EPSILON_NET',
                                       stop_on_constraints: true})),
               'ASHA (objectives: EPSILON_NET), stops on constraint forecasts');
  assert.equal(earlyStoppingText(rule({rule: 'MEDIAN'})), 'MEDIAN');
  assert.equal(earlyStoppingText(rule({})), '');
  assert.equal(earlyStoppingText({spec: {}}), '');
});

test('a study\'s counts, best feasible trial and Pareto front', () => {
  const data = new StudyData(twoObjectives);
  assert.ok(data.multiObjective());
  assert.deepEqual(data.constraints.map((m) => m.name), ['latency', 'memory']);
  const add = (id, state, metrics) => data.rows.set(id, rowFromCompact(
      {id, state, params: [0.5], metrics, measurements: 1}));
  add(1, 'COMPLETED', [0.3, 0.7, 1, 2, 0]);
  add(2, 'COMPLETED', [0.05, 0.9, 50, 2, 0]);  // misses latency
  add(3, 'FAILED', [null, null, null, null, null]);
  add(4, 'COMPLETED', [0.2, 0.6, 1, 2, 0]);
  ++data.version;
  assert.deepEqual(data.counts(), {COMPLETED: 3, FAILED: 1});
  // The first objective (loss, minimized), feasible trials only.
  assert.equal(data.best().id, 4);
  assert.deepEqual(data.front().map((r) => r.id), [4, 1]);
  // Cached until the data change.
  assert.equal(data.front(), data.front());
});

// A trial on its third attempt, as the HTTP API writes it (int64s as
// strings): attempt 1 lost its lease after step 8 (checkpoint at step 6,
// so steps 7 and 8 were not kept), attempt 2 was preempted before
// measuring past the checkpoint, attempt 3 resumed at step 6 and completed.
const retried = {
  id: '9', state: 'COMPLETED', attempt: 3, client_id: 'host-3-1',
  checkpoint_uri: 'file:///ckpt/9', checkpoint_step: '6',
  device_seconds: 50.75, cost: 50.75, end_time_ms: '1765000300000',
  parameters: [{name: 'x', double_value: 0.5}],
  measurements: [{step: '5', metrics: {loss: 0.6}},
                 {step: '6', metrics: {loss: 0.5}},
                 {step: '7', metrics: {loss: 0.45}}],
  earlier_attempts: [
    // Out of order on purpose: shown by number.
    {number: 2, client_id: 'host-7-1', end_reason: 'worker preempted',
     end_time_ms: '1765000100000', device_seconds: 8.5},
    {number: 1, client_id: 'host-12-1', end_reason: 'lease expired',
     end_time_ms: '1765000000000', device_seconds: 30.25,
     measurements: [{step: '7', elapsed_seconds: 3.1, metrics: {loss: 0.4}},
                    {step: '8', metrics: {loss: 0.1}}]},
  ],
};

test('int64 fields: strings or numbers, absent as 0', () => {
  assert.equal(int64('1765000000000'), 1765000000000);
  assert.equal(int64(6), 6);
  assert.equal(int64(undefined), 0);
  assert.equal(int64(null), 0);
});

test('a trial\'s attempts by number, the current one last, each with its ' +
     'device time and cost', () => {
  // A price of 3600 per device-hour: the cost is the device-seconds.
  const attempts = attemptsOf(retried, 3600);
  assert.deepEqual(attempts.map((a) => [a.number, a.current, a.client_id]),
                   [[1, false, 'host-12-1'], [2, false, 'host-7-1'],
                    [3, true, 'host-3-1']]);
  assert.deepEqual(attempts.map((a) => a.end_reason),
                   ['lease expired', 'worker preempted', '']);
  assert.deepEqual(attempts.map((a) => a.end_time_ms),
                   [1765000000000, 1765000100000, 1765000300000]);
  assert.deepEqual(attempts.map((a) => [a.measurements, a.steps]),
                   [[2, [7, 8]], [0, null], [3, [5, 7]]]);
  // The current attempt's device time is the trial's less the earlier
  // attempts': 50.75 - 30.25 - 8.5.
  assert.deepEqual(attempts.map((a) => a.device_seconds), [30.25, 8.5, 12]);
  assert.deepEqual(attempts.map((a) => a.cost), [30.25, 8.5, 12]);
  // Without a price, no cost.
  assert.deepEqual(attemptsOf(retried).map((a) => a.cost),
                   [null, null, null]);
  // 1.8 per device-hour: 0.0005 per device-second.
  attemptsOf(retried, 1.8).forEach((a, i) => assert.ok(
      Math.abs(a.cost - [30.25, 8.5, 12][i] * 0.0005) < 1e-12, `${a.cost}`));
});

test('attempts: none from a server without them; a lost trial waiting ' +
     'for its next attempt', () => {
  assert.deepEqual(attemptsOf({id: '1', state: 'COMPLETED',
                               device_seconds: 5}), []);
  const first = attemptsOf({id: '1', state: 'ACTIVE', attempt: 1,
                            device_seconds: 5});
  assert.equal(first.length, 1);
  assert.equal(first[0].current, true);
  assert.equal(first[0].waiting, false);
  assert.equal(first[0].device_seconds, 5);
  // Attempt 1 lost its lease and the trial waits in REQUESTED: attempt 2
  // has no worker, no measurements and no device time yet.
  const waiting = attemptsOf({
    id: '1', state: 'REQUESTED', attempt: 2, device_seconds: 20,
    client_id: 'host-12-1',
    earlier_attempts: [{number: 1, client_id: 'host-12-1',
                        end_reason: 'lease expired',
                        device_seconds: 20,
                        measurements: [{step: '1', metrics: {loss: 1}}]}]});
  assert.deepEqual(waiting.map((a) => [a.number, a.current, a.waiting,
                                       a.client_id, a.measurements,
                                       a.device_seconds]),
                   [[1, false, false, 'host-12-1', 1, 20],
                    [2, true, true, '', 0, 0]]);
  // Device time never goes below 0 (a total written before the earlier
  // attempts' were).
  assert.equal(attemptsOf({attempt: 2, device_seconds: 1, earlier_attempts: [
    {number: 1, device_seconds: 3}]})[1].device_seconds, 0);
});

test('the study page\'s row holds only the current attempt\'s curve and ' +
     'result', () => {
  const study = {spec: {
    parameters: [{name: 'x', double_spec: {min: 0, max: 1}}],
    metrics: [{name: 'loss', goal: 'MINIMIZE'}]}};
  const row = rowFromTrial(retried, study);
  assert.deepEqual([...row.steps], [5, 6, 7]);
  assert.deepEqual([...row.values], [0.6, 0.5, 0.45]);
  // No final measurement: the result is the current attempt's last, not
  // attempt 1's better, later step 8.
  assert.equal(row.objective, 0.45);
  assert.equal(row.measurements, 3);
  assert.equal(row.attempt, 3);
  // A trial lost before any measurement of its own has no curve at all.
  const lost = rowFromTrial({
    id: '10', state: 'REQUESTED', attempt: 2,
    earlier_attempts: [{number: 1, measurements: [
      {step: '1', metrics: {loss: 0.9}}]}]}, study);
  assert.equal(lost.steps.length, 0);
  assert.equal(lost.objective, null);
  assert.equal(rowFromCompact({id: 10, state: 'ACTIVE', params: [0.5],
                               metrics: [null], attempt: 2}).attempt, 2);
});

test('the budget is the study\'s current max_trials, 0 unlimited', () => {
  assert.equal(budgetOf({spec: {max_trials: 40}}), 40);
  assert.equal(budgetOf({spec: {max_trials: '40'}}), 40);
  assert.equal(budgetOf({spec: {}}), 0);
  assert.equal(budgetOf({}), 0);
});

test('the study read again: a change of state or budget is seen, new ' +
     'trial counts are not', () => {
  const held = {name: 's', state: 'ACTIVE', spec: {max_trials: 50},
                trial_counts: {COMPLETED: 3}, cost: 0};
  // The cases: the badge stayed ACTIVE after the study completed;
  // the budget stayed at 50 after `study update --max-trials 40`.
  assert.equal(studyChanged(held, {...held, state: 'COMPLETED'}), true);
  assert.equal(studyChanged(held, {...held, spec: {max_trials: 40}}), true);
  assert.equal(studyChanged(held, {...held, cost: 1.5}), true);
  assert.equal(studyChanged(held, {...held, trial_counts: {COMPLETED: 4}}),
               false);
  assert.equal(studyChanged(held, JSON.parse(JSON.stringify(held))), false);
});
