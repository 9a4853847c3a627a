// The first thing the page runs (an async module with no imports, so it
// runs as soon as it arrives, before the charting library and the other
// modules): when the address opens a study, it starts that study's
// requests (the server's settings, the study, the first page of its
// compact feed), so that the server works on them while the rest of the
// page loads. api.get takes each answer once (takePrefetched).

export const TOKEN_KEY = 'hypertune-token';
// The compact feed's page: as the server allows (common/limits.h).
export const FEED_LIMIT = 10000;

const started = new Map();  // path -> Promise<Response>

function start() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ''));
  const name = params.get('study');
  if (!name || params.has('trial') || params.has('compare')) return;
  const token = params.get('token') || sessionStorage.getItem(TOKEN_KEY);
  const headers = token ? {'Authorization': 'Bearer ' + token} : {};
  const study = '/api/studies/' + encodeURIComponent(name);
  for (const path of ['/api/server', study,
                      `${study}/changes?view=compact&limit=${FEED_LIMIT}` +
                      '&after=0']) {
    // A failure here is met again, and reported, by the page's own request.
    started.set(path, fetch(path, {headers}).catch(() => null));
  }
}

// The prefetched answer to GET `path` (a Promise of a Response, or of null
// when the request failed), once; undefined if there is none.
export function takePrefetched(path) {
  const answer = started.get(path);
  started.delete(path);
  return answer;
}

// Not in node, where the data model's tests import this module.
if (typeof location !== 'undefined') start();
