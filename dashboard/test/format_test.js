// Unit tests of how the page writes values (dashboard/src/format.js) in
// node: numbers, values of any kind, times, durations, device time and
// attempts. Run by ctest (dashboard_model_test) with
// `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {attemptLabel, formatDeviceTime, formatDuration, formatNumber,
        formatTime, formatValue} from '../src/format.js';

test('numbers: five significant digits, exponents at the extremes', () => {
  assert.equal(formatNumber(42), '42');
  assert.equal(formatNumber(-7), '-7');
  assert.equal(formatNumber(0), '0');
  assert.equal(formatNumber(0.123456), '0.12346');
  assert.equal(formatNumber(12345.678), '12346');
  assert.equal(formatNumber(1e-3), '0.001');
  assert.equal(formatNumber(9.9e-4), '9.900e-4');
  assert.equal(formatNumber(123456.7), '1.235e+5');
  // Integers stay whole up to 1e15.
  assert.equal(formatNumber(123456789), '123456789');
  assert.equal(formatNumber(1e15), '1.000e+15');
});

test('numbers: absent, infinite and NaN', () => {
  assert.equal(formatNumber(null), '');
  assert.equal(formatNumber(undefined), '');
  assert.equal(formatNumber(NaN), 'NaN');
  assert.equal(formatNumber(Infinity), '+inf');
  assert.equal(formatNumber(-Infinity), '-inf');
});

test('values: numbers formatted, categories as they are', () => {
  assert.equal(formatValue(0.5), '0.5');
  assert.equal(formatValue('adam'), 'adam');
  assert.equal(formatValue(null), '');
  assert.equal(formatValue(undefined), '');
});

test('times in UTC to the second, from milliseconds or their string', () => {
  assert.equal(formatTime(Date.UTC(2026, 0, 2, 3, 4, 5, 678)),
               '2026-01-02 03:04:05');
  assert.equal(formatTime(String(Date.UTC(2024, 11, 31, 23, 59, 59))),
               '2024-12-31 23:59:59');
  assert.equal(formatTime(0), '');
  assert.equal(formatTime(null), '');
});

test('durations: seconds, then minutes, then hours', () => {
  assert.equal(formatDuration(0), '0.0 s');
  assert.equal(formatDuration(4200), '4.2 s');
  assert.equal(formatDuration(12400), '12 s');
  assert.equal(formatDuration(59400), '59 s');
  assert.equal(formatDuration(187000), '3m 7s');
  assert.equal(formatDuration(3599000), '59m 59s');
  assert.equal(formatDuration(2 * 3600000 + 5 * 60000 + 30000), '2h 5m');
  assert.equal(formatDuration(null), '');
  assert.equal(formatDuration(undefined), '');
  assert.equal(formatDuration(-1), '');
  assert.equal(formatDuration(NaN), '');
});

test('device time: seconds and device-hours, absent as 0', () => {
  assert.equal(formatDeviceTime(45), '45 s (0.0125 device-hours)');
  assert.equal(formatDeviceTime(7200), '7200 s (2 device-hours)');
  assert.equal(formatDeviceTime(30.2), '30.2 s (0.0083889 device-hours)');
  assert.equal(formatDeviceTime(0), '0 s (0 device-hours)');
  assert.equal(formatDeviceTime(null), '0 s (0 device-hours)');
  assert.equal(formatDeviceTime(undefined), '0 s (0 device-hours)');
});

test('attempts by number, with how they ended when they did', () => {
  assert.equal(attemptLabel(2), 'attempt 2');
  assert.equal(attemptLabel(1, 'lease expired'), 'attempt 1 (lease expired)');
  assert.equal(attemptLabel(3, ''), 'attempt 3');
});
