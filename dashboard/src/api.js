// The HTTP API as the page uses it: the bearer token (kept in the tab's
// sessionStorage, never in a cookie), JSON reads, JSON writes, the pages
// of the compact change feed the data model loads from, and the server's
// event stream read with fetch so that it can carry the token.

import {FEED_LIMIT, TOKEN_KEY, takePrefetched} from './boot.js';

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value);
}

function headers(extra = {}) {
  const out = {...extra};
  const t = token();
  if (t) out['Authorization'] = 'Bearer ' + t;
  return out;
}

async function check(response) {
  if (response.ok) return response;
  let message = response.statusText;
  try {
    message = (await response.json()).error.message;
  } catch (e) { /* not our JSON error */ }
  throw new ApiError(response.status, message);
}

// GET `path`: the parsed JSON, or the Response itself with {raw: true}.
// The answer boot.js started early is taken when there is one.
export async function get(path, options = {}) {
  const early = await takePrefetched(path);
  const response = await check(
      early || await fetch(path, {headers: headers(), signal: options.signal}));
  return options.raw ? response : response.json();
}

// POST `body` as JSON (writes: stop, pause/resume, budget).
export async function post(path, body) {
  const response = await check(await fetch(path, {
    method: 'POST',
    headers: headers({'Content-Type': 'application/json'}),
    body: JSON.stringify(body),
  }));
  return response.json();
}

export function studyPath(name, suffix = '') {
  return '/api/studies/' + encodeURIComponent(name) + suffix;
}

// One page of the study's change feed in the compact form
// (`changes?view=compact`, service/http/dashboard_view.h) after sequence
// `after`: {events: [{sequence, trial}], last_sequence, more}. Adds to
// `times` (ms) the wait for the answer's headers (answer) and the reading
// and parsing of its body (parse).
export async function compactChanges(name, after, {signal, times}) {
  let t = performance.now();
  const response = await get(studyPath(
      name, `/changes?view=compact&limit=${FEED_LIMIT}&after=` + after),
      {signal, raw: true});
  times.answer += performance.now() - t;
  t = performance.now();
  const page = await response.json();
  times.parse += performance.now() - t;
  return page;
}

// What the server offers: {auth, writes, logs, charts}; read once.
let serverInfo = null;
export async function server() {
  if (!serverInfo) serverInfo = await get('/api/server');
  return serverInfo;
}

export function forgetServer() {
  serverInfo = null;
}

// Reads the study's event stream from sequence `after` until `signal`
// aborts, calling onTrial(trial, sequence) per trial event and onStatus
// with 'live', 'reconnecting' or 'not live: why'. Resumes after a break
// from the last sequence seen.
export async function watch(name, after, signal, onTrial, onStatus) {
  let cursor = after;
  while (!signal.aborted) {
    try {
      const response = await get(studyPath(name, '/events?after=' + cursor),
                                  {raw: true, signal});
      onStatus('live');
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = '';
      for (;;) {
        const {value, done} = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, {stream: true});
        let end;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          const event = parseEvent(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (event.type === 'trial' && event.data) {
            if (event.id !== null) cursor = event.id;
            onTrial(JSON.parse(event.data), cursor);
          } else if (event.type === 'error' && event.data) {
            onStatus('not live: ' + JSON.parse(event.data).error.message);
          }
        }
      }
    } catch (error) {
      if (signal.aborted) return;
      if (error instanceof ApiError && error.status !== 503) {
        onStatus('not live: ' + error.message);
        return;
      }
    }
    onStatus('reconnecting');
    await new Promise((resolve) => setTimeout(resolve, 2000));
  }
}

function parseEvent(block) {
  const event = {id: null, type: 'message', data: ''};
  for (const line of block.split('\n')) {
    if (line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') event.id = value;
    else if (field === 'event') event.type = value;
    else if (field === 'data') event.data += (event.data ? '\n' : '') + value;
  }
  return event;
}
