// hypertune dashboard: the entry point and router. The location's fragment
// carries the view:
//   (empty)                 the study list
//   #study=NAME             a study: plots, table, actions
//   #study=NAME&trial=ID    one trial
//   #compare=A,B[,C...]     studies side by side
// plus `live=0` (no event stream: a snapshot) and `token=` (moved to the
// tab's sessionStorage and out of the address at once; the fragment never
// reaches the server). A study's data stay loaded while its trial pages are
// open, kept current by the event stream, so opening a trial and coming
// back draw from memory. The study itself is not on the event stream (only
// its trials are), so while live it is read again after trial events and
// every few seconds: its state badge and budget follow what changes
// elsewhere (`hypertune study update`, the suggestion that completes it).

import * as api from './api.js';
import {el} from './dom.js';
import {StudyData, studyChanged} from './model.js';
import {StudyPage} from './study_page.js';
import {showCompare, showStudies} from './studies_page.js';
import {TrialPage} from './trial_page.js';

// While live, the study is read again at least this often (ms).
const STUDY_EVERY_MS = 2000;
// After a trial event, the study is read again this soon (ms): one read
// for a burst of events.
const STUDY_AFTER_EVENT_MS = 250;

const app = {
  main: document.getElementById('main'),
  hasCharts: !!window.d3,
  // Opens trial `id` of `study` (default: the open one).
  open(id, study) {
    const name = study || (current && current.data.study.name);
    location.hash = `study=${encodeURIComponent(name)}&trial=${id}`;
  },
  setLive(text) {
    document.getElementById('live').textContent = text;
  },
};

// The open study: {data, studyPage, page, stream, live}.
let current = null;

function hashParams() {
  return new URLSearchParams(location.hash.replace(/^#/, ''));
}

function takeTokenFromHash() {
  const params = hashParams();
  if (params.has('token')) {
    api.setToken(params.get('token'));
    api.forgetServer();
    params.delete('token');
    const text = params.toString();
    history.replaceState(null, '', text ? '#' + text : location.pathname);
  }
}

function showError(error) {
  if (error instanceof api.ApiError && error.status === 401) return askToken();
  app.main.replaceChildren(el('p', {class: 'error', id: 'error'},
                              String(error.message || error)));
}

function askToken() {
  closeStudy();
  const input = el('input', {type: 'password', id: 'token-input',
                             placeholder: 'bearer token'});
  const form = el('form', {id: 'token-form', onsubmit: (event) => {
    event.preventDefault();
    api.setToken(input.value.trim());
    api.forgetServer();
    route();
  }}, el('p', {}, 'This server needs a token.'), input,
      el('button', {type: 'submit'}, 'Sign in'));
  app.main.replaceChildren(form);
}

function closeStudy() {
  if (!current) return;
  if (current.stream) current.stream.abort();
  if (current.studyTimer) clearInterval(current.studyTimer);
  if (current.studySoon) clearTimeout(current.studySoon);
  if (current.studyPage) current.studyPage.stop();
  current = null;
  app.setLive('');
}

function crumb(name, trial) {
  const box = document.getElementById('crumb');
  box.replaceChildren(
      ...(name ? [' / ', el('a', {href: '#study=' + encodeURIComponent(name)},
                            name)] : []),
      trial ? ` / trial ${trial}` : '');
}

// Resolves after the next frame has been painted.
function painted() {
  return new Promise((resolve) => requestAnimationFrame(
      () => setTimeout(resolve, 0)));
}

async function openStudy(name, params) {
  closeStudy();
  app.main.replaceChildren(el('p', {}, 'Loading ' + name + '…'));
  const loadStart = performance.now();
  const data = new StudyData(await api.get(api.studyPath(name)));
  await data.load();
  current = {data, studyPage: null, page: null, stream: null,
             studyTimer: null, studySoon: null, reading: false,
             loadMs: performance.now() - loadStart};
  if (params.get('live') !== '0') {
    const controller = new AbortController();
    current.stream = controller;
    const opened = current;
    // Reads the study again; redraws the header when what it shows changed.
    const refreshStudy = async () => {
      opened.studySoon = null;
      if (current !== opened || opened.reading) return;
      opened.reading = true;
      try {
        const study = await api.get(api.studyPath(name),
                                    {signal: controller.signal});
        if (current === opened && studyChanged(data.study, study)) {
          data.setStudy(study);
          if (current.page instanceof StudyPage) current.page.renderHeader();
        }
      } catch (e) {
        // Closed, or the server is away: the next read tries again.
      } finally {
        opened.reading = false;
      }
    };
    current.studyTimer = setInterval(refreshStudy, STUDY_EVERY_MS);
    api.watch(name, data.cursor, controller.signal, (trial) => {
      if (current !== opened) return;
      if (!opened.studySoon) {
        opened.studySoon = setTimeout(refreshStudy, STUDY_AFTER_EVENT_MS);
      }
      const row = data.applyTrial(trial);
      const page = current.page;
      if (page instanceof StudyPage) page.scheduleRender();
      else if (page instanceof TrialPage && page.id === row.id) {
        page.update(trial);
      }
    }, (status) => {
      if (current === opened) {
        app.setLive(status === 'live' ? '● live'
                    : status === 'reconnecting' ? '○ reconnecting' : status);
      }
    });
  }
}

async function route() {
  takeTokenFromHash();
  const params = hashParams();
  const name = params.get('study');
  const trial = params.get('trial');
  const compare = params.get('compare');
  crumb(name, trial);
  try {
    if (compare) {
      closeStudy();
      crumb('', '');
      await showCompare(app, compare.split(',').filter((s) => s));
    } else if (name) {
      const fresh = !current || current.data.study.name !== name;
      // The server's settings and the study's data, in parallel.
      const [server] = await Promise.all([
        api.server(), fresh ? openStudy(name, params) : null]);
      if (trial) {
        current.page = new TrialPage(current.data, Number(trial), app);
        const start = performance.now();
        await current.page.show(server);
        document.body.setAttribute('data-trial-ms',
                                   Math.round(performance.now() - start));
      } else {
        if (!current.studyPage) {
          current.studyPage = new StudyPage(current.data, app);
        }
        current.page = current.studyPage;
        const start = performance.now();
        await current.studyPage.show(server);
        if (fresh) {
          // For people and benchmarks: how long the data took, the drawing
          // (the page's code, then its layout and paint), and the first
          // full render from the navigation's start.
          document.body.setAttribute('data-render-code-ms',
                                     Math.round(performance.now() - start));
          await painted();
          document.body.setAttribute('data-load-ms',
                                     Math.round(current.loadMs));
          document.body.setAttribute('data-load-times', JSON.stringify(
              current.data.loadTimes, (k, v) => (typeof v === 'number'
                                                 ? Math.round(v) : v)));
          document.body.setAttribute(
              'data-render-ms', Math.round(performance.now() - start));
          document.body.setAttribute('data-first-render-ms',
                                     Math.round(performance.now()));
        }
      }
    } else {
      closeStudy();
      await showStudies(app);
    }
  } catch (error) {
    showError(error);
  }
}

document.body.setAttribute('data-charts', app.hasCharts ? 'd3' : 'none');
window.addEventListener('hashchange', route);
route();
