// Every module of the page imported in node, with a minimal DOM stub: a
// wrong path or a name a module imports and another does not export fails
// here rather than only in the browser. Also checks that index.html
// preloads exactly the page's modules (a preload of a file that is not
// there, or a module not preloaded, would otherwise go unnoticed), and that
// the router (app.js) runs: with the server answering an error, it shows
// it. Run by ctest (dashboard_model_test) with `node --test dashboard/test/`.

import assert from 'node:assert/strict';
import {readFileSync, readdirSync} from 'node:fs';
import {test} from 'node:test';
import {fileURLToPath, pathToFileURL} from 'node:url';

const SRC = fileURLToPath(new URL('../src/', import.meta.url));

// The page's modules, as paths under src/ ('charts/history.js', ...).
function modules(dir = SRC, prefix = '') {
  const out = [];
  for (const entry of readdirSync(dir, {withFileTypes: true})) {
    if (entry.isDirectory()) {
      out.push(...modules(dir + entry.name + '/', prefix + entry.name + '/'));
    } else if (entry.name.endsWith('.js')) {
      out.push(prefix + entry.name);
    }
  }
  return out.sort();
}

// Just enough of a DOM for the modules' top-level code and app.js's first
// route: elements that keep their attributes and children.
class StubElement {
  constructor(tag) {
    this.tagName = tag.toUpperCase();
    this.attributes = new Map();
    this.children = [];
    this.style = {};
    this.textContent = '';
  }
  setAttribute(name, value) {
    this.attributes.set(name, String(value));
  }
  getAttribute(name) {
    return this.attributes.has(name) ? this.attributes.get(name) : null;
  }
  removeAttribute(name) {
    this.attributes.delete(name);
  }
  append(...children) {
    this.children.push(...children);
  }
  replaceChildren(...children) {
    this.children = children;
    if (this.onReplace) this.onReplace(children);
  }
}

const byId = new Map(['main', 'crumb', 'live'].map(
    (id) => [id, new StubElement('div')]));
const listeners = [];
Object.assign(globalThis, {
  Node: StubElement,
  document: {
    body: new StubElement('body'),
    getElementById: (id) => byId.get(id) || null,
    createElement: (tag) => new StubElement(tag),
  },
  window: globalThis,
  addEventListener: (type) => listeners.push(type),
  location: {hash: '', pathname: '/'},
  history: {replaceState() {}},
  sessionStorage: {getItem: () => null, setItem() {}},
  // The server refuses every request: the study list cannot load.
  fetch: async () => new Response(JSON.stringify({error: {
    code: 14, status: 'UNAVAILABLE', message: 'stub server: unavailable'}}),
                                  {status: 503}),
});

// What the study list's route shows first, once app.js is imported.
const shown = new Promise((resolve) => {
  byId.get('main').onReplace = resolve;
});

test('every module imports, and each but app.js exports something',
     async () => {
  const names = modules();
  assert.ok(names.includes('charts/common.js') &&
            names.includes('model.js'), `${names}`);
  for (const name of names) {
    const module = await import(pathToFileURL(SRC + name).href);
    if (name !== 'app.js') {
      assert.ok(Object.keys(module).length > 0, `${name} exports nothing`);
    }
  }
});

test('the router runs: it listens for the fragment and shows the error',
     async () => {
  await import(pathToFileURL(SRC + 'app.js').href);
  const [error] = await shown;
  assert.equal(error.tagName, 'P');
  assert.equal(error.getAttribute('id'), 'error');
  assert.deepEqual(error.children, ['stub server: unavailable']);
  assert.deepEqual(listeners, ['hashchange']);
  // Without d3, the plain page.
  assert.equal(document.body.getAttribute('data-charts'), 'none');
});

test('index.html preloads every module but boot.js, and only those', () => {
  const html = readFileSync(SRC + 'index.html', 'utf8');
  const preloaded = [...html.matchAll(
      /<link rel="modulepreload" href="\/assets\/([^"]+)">/g)]
      .map((m) => m[1]).sort();
  assert.deepEqual(preloaded,
                   modules().filter((name) => name !== 'boot.js'));
  assert.match(html, /<script type="module" async src="\/assets\/boot.js">/);
});
