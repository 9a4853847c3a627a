// Unit tests of the compact change feed as the page reads it
// (dashboard/src/api.js, compactChanges) and of the data model loading a
// study from it (StudyData.load), in node with fetch and sessionStorage
// stubbed: the request's path and token, the error answer, pages followed
// to the last one. Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {beforeEach, test} from 'node:test';

import {ApiError, compactChanges, setToken} from '../src/api.js';
import {FEED_LIMIT} from '../src/boot.js';
import {StudyData} from '../src/model.js';

// The tab's sessionStorage, as the browser's.
const stored = new Map();
globalThis.sessionStorage = {
  getItem: (key) => (stored.has(key) ? stored.get(key) : null),
  setItem: (key, value) => stored.set(key, String(value)),
};

// fetch answers from `answers` (path -> [status, body]) and records each
// request.
let requests = [];
let answers = new Map();
globalThis.fetch = async (path, init = {}) => {
  requests.push({path, headers: init.headers || {}});
  const [status, body] = answers.get(path) || [404, {error: {
    code: 5, status: 'NOT_FOUND', message: 'no such path: ' + path}}];
  return new Response(JSON.stringify(body), {status});
};

beforeEach(() => {
  requests = [];
  answers = new Map();
  stored.clear();
});

const feed = (name, after) => '/api/studies/' + encodeURIComponent(name) +
    `/changes?view=compact&limit=${FEED_LIMIT}&after=${after}`;

test('a page of the compact feed, with the token, its time counted',
     async () => {
  setToken('secret');
  const page = {events: [], last_sequence: '12', more: false};
  answers.set(feed('my study', '5'), [200, page]);
  const times = {answer: 0, parse: 0, rows: 0};
  assert.deepEqual(await compactChanges('my study', '5', {times}), page);
  assert.equal(requests.length, 1);
  assert.equal(requests[0].path,
               '/api/studies/my%20study/changes?view=compact&limit=' +
               FEED_LIMIT + '&after=5');
  assert.equal(requests[0].headers.Authorization, 'Bearer secret');
  assert.ok(times.answer >= 0 && times.parse >= 0);
  assert.equal(times.rows, 0);
});

test('the server\'s error answer is an ApiError with its message', async () => {
  answers.set(feed('s', '0'), [403, {error: {
    code: 7, status: 'PERMISSION_DENIED', message: 'another owner\'s study'}}]);
  await assert.rejects(
      compactChanges('s', '0', {times: {answer: 0, parse: 0}}),
      (error) => error instanceof ApiError && error.status === 403 &&
                 error.message === 'another owner\'s study');
  // Without a token, no Authorization header.
  assert.equal(requests[0].headers.Authorization, undefined);
});

test('a study loads every page of its feed into rows', async () => {
  const trial = (id, loss) => ({id, state: 'COMPLETED', params: [0.5],
                                metrics: [loss], measurements: 1});
  answers.set(feed('s', '0'), [200, {
    events: [{sequence: '1', trial: trial(1, 3)},
             {sequence: '2', trial: trial(2, 1)}],
    last_sequence: '2', more: true}]);
  answers.set(feed('s', '2'), [200, {
    events: [{sequence: '3', trial: trial(1, 0.5)},
             {sequence: '4', trial: trial(3, 2)}],
    last_sequence: '4', more: false}]);
  const data = new StudyData({name: 's', spec: {
    parameters: [{name: 'x', double_spec: {min: 0, max: 1}}],
    metrics: [{name: 'loss', goal: 'MINIMIZE'}]}});
  await data.load();
  assert.deepEqual(requests.map((r) => r.path), [feed('s', '0'),
                                                 feed('s', '2')]);
  assert.equal(data.cursor, '4');
  assert.equal(data.version, 2);
  // Trial 1 at its latest state.
  assert.deepEqual(data.sorted().map((r) => [r.id, r.objective]),
                   [[1, 0.5], [2, 1], [3, 2]]);
  assert.equal(data.best().id, 1);
  assert.deepEqual(Object.keys(data.loadTimes).sort(),
                   ['answer', 'parse', 'rows']);
});
