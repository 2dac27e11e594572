// Regent dashboard, the toolbox: DOM building, number and time formats,
// the API client (with the token prompt), dialogs and toasts, and the SVG
// charts. Every piece of data reaches the page through textContent or
// attributes (h and svg), never as HTML.

export const POLL_MS = 1500;
export const HISTORY_MS = 10 * 60 * 1000;
export const QUEUE_MODE = '__QUEUE_MODE__';

// ---------------------------------------------------------------- DOM

export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
export function svg(tag, attrs, ...kids) {
  const el = document.createElementNS('http://www.w3.org/2000/svg', tag);
  setAttrs(el, attrs);
  append(el, kids);
  return el;
}
function setAttrs(el, attrs) {
  if (!attrs) return;
  for (const [k, v] of Object.entries(attrs)) {
    if (v == null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.setAttribute('class', v);
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, String(v));
  }
}
function append(el, kids) {
  for (const k of kids.flat(Infinity)) {
    if (k == null || k === false) continue;
    el.append(k instanceof Node ? k : String(k));
  }
}
export const $ = (sel, root = document) => root.querySelector(sel);
export const $$ = (sel, root = document) => Array.from(root.querySelectorAll(sel));
export const enc = encodeURIComponent;

// fill replaces a container's children unless the data they were drawn
// from has not changed; open <details> with a data-key stay open.
export function fill(box, data, build) {
  const sig = JSON.stringify(data);
  if (box._sig === sig) return;
  box._sig = sig;
  const open = new Set($$('details[open][data-key]', box).map(d => d.dataset.key));
  box.replaceChildren(...[build()].flat());
  for (const d of $$('details[data-key]', box)) if (open.has(d.dataset.key)) d.open = true;
}

// ----------------------------------------------------------- formats

export const fmtInt = n => (n == null ? '–' : Math.round(Number(n)).toLocaleString('en-US'));
export function fmtNum(v) {
  if (v == null || isNaN(v)) return '–';
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e9) return (v / 1e9).toFixed(a >= 1e10 ? 0 : 1) + 'G';
  if (a >= 1e6) return (v / 1e6).toFixed(a >= 1e7 ? 0 : 1) + 'M';
  if (a >= 1e4) return (v / 1e3).toFixed(a >= 1e5 ? 0 : 1) + 'k';
  if (a >= 100) return Math.round(v).toString();
  if (a >= 10) return v.toFixed(1).replace(/\.0$/, '');
  return v.toFixed(2).replace(/\.?0+$/, '');
}
export function fmtBytes(b) {
  if (b == null) return '–';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < u.length - 1) { b /= 1024; i++; }
  return (i === 0 ? b : b.toFixed(b >= 100 ? 0 : 1)) + ' ' + u[i];
}
export function fmtSecs(s) {
  if (s == null || isNaN(s)) return '–';
  if (s === 0) return '0';
  const trim = v => (v.includes('.') ? v.replace(/\.?0+$/, '') : v);
  if (s < 1e-3) return trim((s * 1e6).toFixed(s < 1e-5 ? 1 : 0)) + ' µs';
  if (s < 1) return trim((s * 1e3).toFixed(s < 1e-2 ? 2 : s < 0.1 ? 1 : 0)) + ' ms';
  if (s < 60) return s.toFixed(s < 10 ? 1 : 0).replace(/\.0$/, '') + ' s';
  if (s < 3600) return Math.floor(s / 60) + ' min' + (s < 600 && s % 60 >= 1 ? ' ' + Math.floor(s % 60) + ' s' : '');
  if (s < 86400) return (s / 3600).toFixed(1).replace(/\.0$/, '') + ' h';
  return (s / 86400).toFixed(1).replace(/\.0$/, '') + ' d';
}
export function fmtAgo(iso) {
  if (!iso) return '–';
  const d = (Date.now() - Date.parse(iso)) / 1000;
  if (isNaN(d)) return '–';
  if (Math.abs(d) < 1) return 'now';
  return d > 0 ? fmtSecs(d) + ' ago' : 'in ' + fmtSecs(-d);
}
export function fmtStamp(iso) {
  if (!iso) return '–';
  const d = new Date(iso);
  if (isNaN(d)) return iso;
  const p = n => String(n).padStart(2, '0');
  const t = `${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
  return new Date().toDateString() === d.toDateString() ? t : `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${t}`;
}
export const when = iso => h('span', { title: iso || '' }, fmtStamp(iso));
export const ago = iso => h('span', { title: iso || '' }, fmtAgo(iso));
export function pretty(v) {
  if (typeof v === 'string') return v;
  try { return JSON.stringify(v, null, 2); } catch { return String(v); }
}
export function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}
export const fromLocalInput = v => (v ? new Date(v).toISOString() : '');

// ---------------------------------------------------------------- API

export class ApiError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}
let token = localStorage.getItem('regent.token') || sessionStorage.getItem('regent.token') || '';
let asking = null;

export async function request(path, opts = {}, tok = token) {
  const headers = { Accept: 'application/json' };
  if (opts.body !== undefined) headers['Content-Type'] = 'application/json';
  if (tok) headers.Authorization = 'Bearer ' + tok;
  return fetch(new URL(path, document.baseURI), {
    method: opts.method || 'GET', headers, cache: 'no-store',
    body: opts.body === undefined ? undefined : JSON.stringify(opts.body),
  });
}

// api calls a route and returns its JSON; a 401 asks for a token and
// tries again, any other failure throws an ApiError with the broker's
// words.
export async function api(path, opts = {}) {
  return (await call(path, opts)).data;
}

// apiAll reads every page of a paged list: of an object's list under key
// (following pagination.next), or of a bare array (its total in the
// X-Total-Count header), and returns the whole list.
export async function apiAll(path, key) {
  const sep = path.includes('?') ? '&' : '?';
  let out = [];
  for (let offset = 0, pages = 0; ; pages++) {
    const { data, res } = await call(path + sep + 'offset=' + offset);
    const list = (key ? data && data[key] : data) || [];
    out = out.concat(list);
    let next = null;
    if (key) next = data && data.pagination ? data.pagination.next : null;
    else {
      const total = Number(res.headers.get('X-Total-Count'));
      if (total > offset + list.length) next = offset + list.length;
    }
    if (next == null || !list.length || pages > 1000) return out;
    offset = next;
  }
}

async function call(path, opts = {}) {
  for (;;) {
    let res;
    try {
      res = await request(path, opts);
    } catch (e) {
      throw new ApiError(0, 'cannot reach the broker (' + e.message + ')');
    }
    if (res.status === 401) {
      await askToken(token ? 'The broker refused the token.' : 'This broker requires a token.');
      continue;
    }
    const text = await res.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = null; }
    if (!res.ok) {
      let msg = (data && (data.error || data.message)) || text || res.statusText;
      if (res.status === 403) msg = 'your token does not allow this (' + msg + ')';
      throw new ApiError(res.status, msg);
    }
    return { data, res };
  }
}

export function askToken(why) {
  if (asking) return asking;
  const input = h('input', { type: 'password', name: 'token', autocomplete: 'current-password', placeholder: 'JWT', required: true });
  const remember = h('input', { type: 'checkbox', name: 'remember', checked: true });
  asking = dialog({
    title: 'Sign in', ok: 'Sign in', cancel: false,
    body: [h('p', null, why, ' Paste a token (a JWT whose role may read).'),
      h('div', { class: 'field' }, h('label', null, 'Token'), input),
      h('label', { class: 'radio' }, remember, 'Remember on this device')],
    action: async () => {
      const t = input.value.trim().replace(/^bearer\s+/i, '');
      const res = await request('api/v1/dashboard/system', {}, t);
      if (res.status === 401) throw new Error('The broker refused this token.');
      token = t;
      localStorage.removeItem('regent.token');
      sessionStorage.removeItem('regent.token');
      (remember.checked ? localStorage : sessionStorage).setItem('regent.token', t);
      $('#signout').hidden = false;
    },
  }).finally(() => { asking = null; });
  return asking;
}

// lagDefinition says what "lagging" means, from the broker's threshold.
export const lagDefinition = secs => 'Lagging: a group whose oldest unfinished message, on some partition, ' +
  `was created more than ${fmtSecs(secs)} ago (its time lag is over ${fmtSecs(secs)}).`;

// ---------------------------------------------------- dialogs, toasts

// dialog shows a modal; action runs on OK (its error stays in the
// dialog). It resolves with action's result, or null when cancelled.
export function dialog({ title, body, ok = 'OK', danger = false, cancel = true, action }) {
  return new Promise(resolve => {
    const err = h('p', { class: 'error', hidden: true });
    const okBtn = h('button', { type: 'submit', class: danger ? 'primary danger' : 'primary', 'data-role': 'ok' }, ok);
    const cancelBtn = cancel && h('button', { type: 'button', 'data-role': 'cancel' }, 'Cancel');
    const form = h('form', { method: 'dialog' }, h('h2', null, title), body, err,
      h('div', { class: 'dlg-buttons' }, cancelBtn, okBtn));
    const dlg = h('dialog', null, form);
    document.body.append(dlg);
    const close = v => { dlg.close(); dlg.remove(); resolve(v); };
    if (cancelBtn) cancelBtn.addEventListener('click', () => close(null));
    dlg.addEventListener('cancel', e => { e.preventDefault(); if (cancel) close(null); });
    form.addEventListener('submit', async e => {
      e.preventDefault();
      okBtn.disabled = true;
      err.hidden = true;
      try {
        const r = await action(form);
        close(r === undefined ? true : r);
      } catch (ex) {
        err.textContent = ex.message;
        err.hidden = false;
        okBtn.disabled = false;
      }
    });
    dlg.showModal();
    (form.querySelector('input[type=password], input[type=text]') || okBtn).focus();
  });
}

let toastTimer = 0;
export function toast(msg, bad = false) {
  const t = $('#toast');
  t.textContent = msg;
  t.className = 'toast' + (bad ? ' bad' : '');
  t.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.hidden = true; }, 4000);
}

// ------------------------------------------------------------- charts

function niceCeil(v) {
  if (!(v > 0)) return 1;
  const e = Math.pow(10, Math.floor(Math.log10(v)));
  const f = v / e;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e;
}

// chart draws series [{name, points: [[ms, value|null]]}] over the last
// opts.span ms into box, as an SVG line chart with a hover read-out.
export function chart(box, series, opts) {
  const W = Math.max(Math.floor(box.clientWidth) || 600, 260);
  const H = 190, L = 50, R = 12, T = 10, B = 22;
  // The span grows with the history the page has, from one minute up to
  // HISTORY_MS.
  const now = Date.now();
  let first = now;
  for (const s of series) for (const [t, v] of s.points) if (v != null && t < first) first = t;
  const span = opts.span || Math.min(HISTORY_MS, Math.max(60000, now - first)), t0 = now - span;
  let top = opts.min || 0;
  for (const s of series) for (const [t, v] of s.points) if (t >= t0 && v != null && v > top) top = v;
  top = niceCeil(top * 1.05);
  const x = t => L + ((t - t0) / span) * (W - L - R);
  const y = v => T + (1 - v / top) * (H - T - B);
  const fmt = opts.fmt || fmtNum;
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: 'img', 'aria-label': opts.label || 'chart' });
  for (let i = 0; i <= 4; i++) {
    const v = (top * i) / 4, yy = y(v).toFixed(1);
    root.append(svg('line', { class: 'gridline', x1: L, x2: W - R, y1: yy, y2: yy }));
    root.append(svg('text', { class: 'axis', x: L - 6, y: (+yy + 3.5).toFixed(1), 'text-anchor': 'end' }, fmt(v)));
  }
  const most = W < 420 ? 4 : 8;
  const step = [10, 15, 30, 60, 120, 300, 600].find(st => span / 1000 / st <= most) || 600;
  for (let sec = 0; sec * 1000 <= span; sec += step) {
    const xx = x(now - sec * 1000);
    if (xx < L - 1) break;
    root.append(svg('text', { class: 'axis', x: xx.toFixed(1), y: H - 6, 'text-anchor': sec === 0 ? 'end' : 'middle' },
      sec === 0 ? 'now' : '−' + fmtSecs(sec)));
  }
  // A null value breaks a line, and so does a gap longer than six polls
  // (or the series' gapMs): nothing is drawn where nothing was measured.
  // Each series has its own dash and width, the first drawn the widest, so
  // that lines of equal value lie on each other and all stay visible.
  series.forEach((s, i) => {
    let d = '', last = null;
    for (const [t, v] of s.points) {
      if (t < t0 - 60000) continue;
      if (v == null) { last = null; continue; }
      const gap = last != null && t - last > Math.max(6 * POLL_MS, s.gapMs || 0);
      d += (last == null || gap ? 'M' : 'L') + x(Math.max(t, t0)).toFixed(1) + ',' + y(v).toFixed(1);
      last = t;
    }
    if (d) root.append(svg('path', { class: `line s${(s.color ?? i) % 6} ls${i % 6}`, d, 'data-series': s.name }));
  });
  const cursor = svg('line', { class: 'cursor', y1: T, y2: H - B, visibility: 'hidden' });
  root.append(cursor);
  const tip = h('div', { class: 'tip', hidden: true });
  const show = px => {
    const t = t0 + ((px - L) / (W - L - R)) * span;
    if (px < L || px > W - R) { cursor.setAttribute('visibility', 'hidden'); tip.hidden = true; return; }
    const rows = [];
    let at = null;
    series.forEach((s, i) => {
      let best = null;
      for (const p of s.points) if (p[1] != null && (best == null || Math.abs(p[0] - t) < Math.abs(best[0] - t))) best = p;
      if (best && Math.abs(best[0] - t) < Math.max(span / 40, 3 * POLL_MS)) {
        at = at ?? best[0];
        rows.push(h('div', null, h('i', { class: `s${(s.color ?? i) % 6}` }), ' ', s.name, ': ', h('b', null, fmt(best[1]))));
      }
    });
    if (!rows.length) { cursor.setAttribute('visibility', 'hidden'); tip.hidden = true; return; }
    cursor.setAttribute('x1', px); cursor.setAttribute('x2', px); cursor.setAttribute('visibility', 'visible');
    tip.replaceChildren(h('div', { class: 'muted' }, fmtStamp(new Date(at).toISOString())), ...rows);
    tip.hidden = false;
    tip.style.left = Math.min(px + 10, W - 170) + 'px';
    tip.style.top = '8px';
  };
  root.addEventListener('mousemove', e => {
    const r = root.getBoundingClientRect();
    box._hover = ((e.clientX - r.left) / r.width) * W;
    show(box._hover);
  });
  root.addEventListener('mouseleave', () => { box._hover = null; show(-1); });
  box.replaceChildren(root, tip);
  if (box._hover != null) show(box._hover);
}

// legend shows each series' line (its colour, dash and width, as the
// chart draws it), name and latest value.
export function legend(box, series, fmt = fmtNum) {
  box.replaceChildren(...series.map((s, i) => {
    let v = null;
    for (let k = s.points.length - 1; k >= 0; k--) if (s.points[k][1] != null) { v = s.points[k][1]; break; }
    const swatch = svg('svg', { class: 'swatch', viewBox: '0 0 26 10', 'aria-hidden': 'true' },
      svg('path', { class: `line s${(s.color ?? i) % 6} ls${i % 6}`, d: 'M2,5L24,5' }));
    return h('span', { 'data-series': s.name }, swatch, s.name, ' ', h('b', null, v == null ? '–' : fmt(v)));
  }));
}

export function spark(points, cls = 's0') {
  const W = 90, H = 22, t1 = Date.now();
  const span = Math.min(HISTORY_MS, Math.max(60000, t1 - (points.length ? points[0][0] : t1))), t0 = t1 - span;
  let top = 1;
  for (const [, v] of points) if (v > top) top = v;
  let d = '';
  for (const [t, v] of points) {
    if (t < t0) continue;
    d += (d ? 'L' : 'M') + (((t - t0) / span) * W).toFixed(1) + ',' + (H - 2 - (v / top) * (H - 4)).toFixed(1);
  }
  return svg('svg', { class: 'spark', viewBox: `0 0 ${W} ${H}`, 'aria-hidden': 'true' }, d ? svg('path', { class: cls, d }) : null);
}

export function chartPanel(title, label) {
  const legendBox = h('div', { class: 'legend' });
  const box = h('div', { class: 'chart', 'data-chart': label });
  return { el: h('section', { class: 'panel' }, h('h2', null, title), legendBox, box), box, legend: legendBox };
}


// hasToken reports whether a token is in use; signOut forgets it.
export const hasToken = () => !!token;
export function signOut() {
  token = '';
  localStorage.removeItem('regent.token');
  sessionStorage.removeItem('regent.token');
}
