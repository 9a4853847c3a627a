// Unit tests of the slices' layout (dashboard/src/charts/slices.js) in
// node: how many panels a row holds and how wide each is. Run by ctest
// (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {test} from 'node:test';

import {sliceLayout} from '../../src/charts/slices.js';

test('as many 330 px columns as fit, at most one per parameter', () => {
  assert.deepEqual(sliceLayout(1200, 5), {columns: 3, width: 392});
  assert.deepEqual(sliceLayout(1200, 2), {columns: 2, width: 592});
  assert.deepEqual(sliceLayout(1320, 9), {columns: 4, width: 322});
  // Narrower than one column, or no parameters: one column, full width.
  assert.deepEqual(sliceLayout(300, 4), {columns: 1, width: 292});
  assert.deepEqual(sliceLayout(1200, 0), {columns: 1, width: 1192});
});

test('the panels of a row fit in the width', () => {
  for (let width = 200; width <= 2400; width += 37) {
    for (let panels = 1; panels <= 12; ++panels) {
      const layout = sliceLayout(width, panels);
      assert.ok(layout.columns >= 1 && layout.columns <= panels);
      assert.ok(layout.columns * (layout.width + 8) <= width,
                `${width} px, ${panels} panels: ${JSON.stringify(layout)}`);
    }
  }
});
