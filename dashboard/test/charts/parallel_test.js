// Unit tests of the parallel coordinates' pure parts
// (dashboard/src/charts/parallel.js) in node, with hand-made scales in
// place of d3's: the colour buckets by rank, which values pass a brush,
// and a brush's pixels to data and back. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {brushOf, insideBrush, pixelsOf,
        rankBuckets} from '../../src/charts/parallel.js';

// A linear scale as d3's, upside down as the axes are (range [bottom,
// top]): a function with domain, range and invert.
function linearScale([d0, d1], [r0, r1]) {
  const scale = (v) => r0 + (v - d0) / (d1 - d0) * (r1 - r0);
  scale.domain = () => [d0, d1];
  scale.range = () => [r0, r1];
  scale.invert = (p) => d0 + (p - r0) / (r1 - r0) * (d1 - d0);
  return scale;
}

// A point scale as d3's: categories `step` pixels apart from `first`.
function pointScale(categories, first, step) {
  const scale = (c) => {
    const i = categories.indexOf(c);
    return i < 0 ? undefined : first + i * step;
  };
  scale.domain = () => categories;
  scale.bandwidth = () => 0;
  scale.step = () => step;
  return scale;
}

test('colour buckets by rank, equal in size, middle value as colour', () => {
  const values = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4];
  const {bucketOf, middle} = rankBuckets(values, 4);
  // Ranks 0-1, 2-3, 4-5, 6-7 share a bucket.
  assert.deepEqual([...bucketOf], [3, 0, 2, 1, 2, 0, 3, 1]);
  // Bucket b takes the value ranked floor((b + 0.5) * 8 / 4) = 2b + 1.
  assert.deepEqual(middle.map((i) => values[i]), [0.2, 0.4, 0.7, 0.9]);
  // More buckets than values: every bucket named, none past the last.
  const few = rankBuckets([3, 1, 2], 32);
  assert.equal(few.middle.length, 32);
  assert.ok(few.middle.every((i) => i >= 0 && i < 3));
  assert.ok([...few.bucketOf].every((b) => b < 32));
  assert.deepEqual([...few.bucketOf], [21, 0, 10]);
});

test('a brush passes the values in its range or categories', () => {
  assert.ok(insideBrush(undefined, null));
  assert.ok(insideBrush(undefined, 5));
  const range = {lo: 1, hi: 2};
  assert.ok(insideBrush(range, 1) && insideBrush(range, 2));
  assert.ok(!insideBrush(range, 2.01) && !insideBrush(range, 0.5));
  assert.ok(!insideBrush(range, null));
  const kinds = {categories: ['adam', 'sgd']};
  assert.ok(insideBrush(kinds, 'sgd'));
  assert.ok(!insideBrush(kinds, 'rmsprop'));
  assert.ok(!insideBrush(kinds, null));
});

test('a brush on a numeric axis: pixels to a range and back', () => {
  const axis = {scale: linearScale([0, 10], [300, 100])};
  assert.equal(brushOf(axis, null), null);
  // Pixels 150 to 250 (y grows downwards) are the values 2.5 to 7.5.
  const brush = brushOf(axis, [150, 250]);
  assert.deepEqual(brush, {lo: 2.5, hi: 7.5});
  assert.deepEqual(pixelsOf(axis, brush), [150, 250]);
  // Redrawn on a narrower axis, the saved range is clamped to it.
  const narrower = {scale: linearScale([4, 6], [300, 100])};
  assert.deepEqual(pixelsOf(narrower, brush), [100, 300]);
  // A range cannot be shown on a categorical axis.
  const categorical = {scale: pointScale(['a', 'b'], 150, 100)};
  assert.equal(pixelsOf(categorical, brush), null);
});

test('a brush on a log axis keeps a range that starts at or below 0', () => {
  const scale = (v) => 300 - 100 * Math.log10(v);
  scale.domain = () => [1, 100];
  scale.range = () => [300, 100];
  scale.base = () => 10;
  // From the domain's start, not log(0).
  assert.deepEqual(pixelsOf({scale}, {lo: -1, hi: 10}), [200, 300]);
});

test('a brush on a categorical axis: the categories it covers', () => {
  const axis = {scale: pointScale(['adam', 'sgd', 'rmsprop'], 100, 80)};
  assert.deepEqual(brushOf(axis, [90, 190]), {categories: ['adam', 'sgd']});
  assert.deepEqual(brushOf(axis, [0, 50]), {categories: []});
  // Back to pixels: a quarter step either side of the outer categories.
  assert.deepEqual(pixelsOf(axis, {categories: ['adam', 'sgd']}),
                   [80, 200]);
  assert.equal(pixelsOf(axis, {categories: []}), null);
  assert.equal(pixelsOf(axis, {categories: ['lbfgs']}), null);
  const numeric = {scale: linearScale([0, 1], [300, 100])};
  assert.equal(pixelsOf(numeric, {categories: ['adam']}), null);
});
