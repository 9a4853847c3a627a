// The shared fixtures (testing/fixtures/README.md) in node: the identifier
// pattern the server publishes (GetServerInfo) read by ECMAScript's RegExp,
// and metric roles as metricsOf reads them, from the server's metric_roles
// and, for servers that predate them, by the same rule. Run by ctest
// (dashboard_model_test) with `node --test`.

import assert from 'node:assert/strict';
import {readFileSync} from 'node:fs';
import {test} from 'node:test';

import {metricsOf} from '../src/model.js';

const fixture = (name) => JSON.parse(readFileSync(
    new URL(`../../testing/fixtures/${name}`, import.meta.url), 'utf8'));

test('the identifier pattern reads the same in ECMAScript', () => {
  const cases = fixture('identifiers.json');
  const pattern = new RegExp(cases.pattern);
  for (const name of cases.valid) assert.ok(pattern.test(name), name);
  for (const name of cases.invalid) assert.ok(!pattern.test(name), name);
});

test('metric roles: the server\'s, and the rule for older servers', () => {
  for (const c of fixture('metric_roles.json').cases) {
    const spec = {metrics: c.metrics};
    assert.deepEqual(metricsOf({spec}).map((m) => m.role), c.roles, c.name);
    assert.deepEqual(
        metricsOf({spec, metric_roles: c.roles}).map((m) => m.role), c.roles,
        c.name);
  }
});
