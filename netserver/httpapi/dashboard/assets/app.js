// Regent dashboard: plain JavaScript modules, no dependencies. It reads the
// HTTP bridge's JSON routes only, polls them every POLL_MS, keeps the last
// minutes of figures in memory for its charts (live.js), and draws those as
// inline SVG (lib.js). Pages (pages.js) are chosen by the URL's fragment:
//
//   #/                   overview
//   #/queues             queues
//   #/queue/NAME         one queue
//   #/groups             consumer groups
//   #/dlq                dead-letter queue
//   #/message?queue=Q&partition=P&offset=N, #/message?transactionId=T
//                        one message, found by its place or its transaction id
//   #/message/PARTITION_ID/TXN  (the older form) the same, by transaction id
//
// This file routes, runs the polling loop, and wires the top bar.

import { $, $$, POLL_MS, signOut } from './lib.js';
import { hooks, pollGlobal, seedThroughput } from './live.js';
import { pages } from './pages.js';

const main = document.getElementById('main');

// --------------------------------------------------------------- router

let current = null;
function route() {
  const raw = location.hash.replace(/^#\/?/, '');
  const [path, qs] = raw.split('?');
  const parts = path.split('/').filter(Boolean).map(s => { try { return decodeURIComponent(s); } catch { return s; } });
  const name = parts[0] || 'overview';
  const page = pages[name] && name !== 'notfound' ? pages[name] : pages.notfound;
  current = { name: pages[name] ? name : 'notfound', page, ctx: {}, loaded: false };
  main.replaceChildren();
  $('#toast').hidden = true;
  main.dataset.page = current.name;
  delete main.dataset.loaded;
  page.mount(main, current.ctx, parts.slice(1), new URLSearchParams(qs || ''));
  for (const a of $$('#nav a')) a.classList.toggle('active', a.dataset.page === page.nav);
  document.title = (name === 'overview' ? '' : ($('#nav a.active')?.textContent || 'Not found') + ' · ') + 'Regent';
  window.scrollTo(0, 0);
  refreshNow();
}

// tick polls and redraws, then schedules the next tick. A forced tick
// (a page change, or after the user's own action) runs while paused too.
let paused = false, running = false, again = false, timer = 0, rev = 0;
async function tick(force = false) {
  clearTimeout(timer);
  if (running) { again = true; return; }
  running = true;
  const cur = current;
  try {
    if ((force || !paused) && !document.hidden) {
      await pollGlobal();
      await cur.page.refresh(cur.ctx);
      if (cur === current) {
        cur.page.draw(main, cur.ctx);
        main.dataset.loaded = '1';
        main.dataset.rev = String(++rev);
      }
      setDown(null);
    }
  } catch (e) {
    setDown(e);
  } finally {
    running = false;
    if (again) { again = false; tick(true); } else timer = setTimeout(tick, POLL_MS);
  }
}
const refreshNow = () => tick(true);
hooks.refresh = refreshNow;

function setDown(err) {
  const b = $('#banner'), live = $('#live');
  if (err) {
    b.textContent = (err.status ? `Error ${err.status}: ` : 'Error: ') + err.message;
    b.hidden = false;
    live.className = 'live down';
    live.textContent = 'error';
  } else {
    b.hidden = true;
    live.className = 'live' + (paused ? ' paused' : '');
    live.textContent = paused ? 'paused' : 'live';
  }
}

// ---------------------------------------------------------------- theme

function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t;
  else delete document.documentElement.dataset.theme;
}
const darkNow = () => (document.documentElement.dataset.theme || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light')) === 'dark';
applyTheme(localStorage.getItem('regent.theme'));

$('#theme').addEventListener('click', () => {
  const t = darkNow() ? 'light' : 'dark';
  localStorage.setItem('regent.theme', t);
  applyTheme(t);
});
$('#pause').addEventListener('click', () => {
  paused = !paused;
  $('#pause').textContent = paused ? 'Resume' : 'Pause';
  $('#pause').title = paused ? 'Resume live updates' : 'Pause live updates';
  setDown(null);
  if (!paused) refreshNow();
});
$('#signout').addEventListener('click', () => {
  signOut();
  $('#signout').hidden = true;
  refreshNow();
});
let resizeTimer = 0;
window.addEventListener('resize', () => {
  clearTimeout(resizeTimer);
  resizeTimer = setTimeout(() => { if (current && main.dataset.loaded) current.page.draw(main, current.ctx); }, 150);
});
document.addEventListener('visibilitychange', () => { if (!document.hidden) refreshNow(); });
window.addEventListener('hashchange', route);

seedThroughput().finally(route);
