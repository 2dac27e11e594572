// Regent dashboard, the live figures: the polls every page shares (the
// system feed and the consumer groups), and the history of the last minutes
// that the charts draw, kept in memory since the page opened (plus the
// per-minute throughput the broker kept before that).

import { $, api, apiAll, enc, fmtSecs, hasToken, HISTORY_MS, POLL_MS, QUEUE_MODE } from './lib.js';

// hooks lets the pages ask the poller for a refresh now (app.js sets it).
export const hooks = { refresh: () => {} };

export const store = {
  sys: null,        // GET /api/v1/dashboard/system, latest
  groups: [],       // GET /api/v1/consumer-groups (every page), latest
  samples: [],      // {from, t, in, out, ack, fsync, fsyncP99, depth, dead}: rates over [from, t]
  seed: [],         // {from, t, in, out, ack}: per-minute throughput the broker kept before the page opened
  journal: [],      // {t, fsyncs, secs, hist}: the journal's fsync totals, the last FSYNC_WINDOW_MS and one more
  lag: new Map(),   // "queue\u0000group" -> [[t, lag]]
};

// quantile over the delta of two fsync histograms.
function deltaQuantile(prev, cur, bounds, q) {
  if (!prev || !cur || !bounds || !bounds.length) return null;
  const d = cur.map((n, i) => n - (prev[i] || 0));
  const total = d.reduce((a, b) => a + b, 0);
  if (total <= 0) return null;
  const rank = Math.max(1, Math.round(q * total));
  let cum = 0;
  for (let i = 0; i < d.length; i++) {
    cum += d[i];
    if (cum >= rank) return bounds[Math.min(i, bounds.length - 1)];
  }
  return bounds[bounds.length - 1];
}

export async function pollGlobal() {
  const [sys, groups] = await Promise.all([api('api/v1/dashboard/system'), apiAll('api/v1/consumer-groups')]);
  const t = Date.now();
  const prev = store.sys, prevT = store.sysT;
  store.sys = sys;
  store.sysT = t;
  store.groups = groups || [];
  if (prev && t - prevT > 200) {
    const dt = (t - prevT) / 1000, c = sys.counters, p = prev.counters;
    const j = sys.journal, pj = prev.journal;
    let fsync = null, p99 = null;
    if (j && pj && j.fsyncs > pj.fsyncs) {
      fsync = (j.fsyncSecondsTotal - pj.fsyncSecondsTotal) / (j.fsyncs - pj.fsyncs);
      p99 = deltaQuantile(pj.fsyncHistogram, j.fsyncHistogram, j.fsyncBucketsSeconds, 0.99);
    }
    store.samples.push({
      from: prevT, t, in: Math.max(0, (c.pushed - p.pushed) / dt), out: Math.max(0, (c.popped - p.popped) / dt),
      ack: Math.max(0, (c.acked - p.acked) / dt), fsync, fsyncP99: p99, depth: sys.depth, dead: sys.messages.deadLetter,
      disk: j ? j.diskBytes : null,
    });
  }
  if (sys.journal) {
    store.journal.push({ t, fsyncs: sys.journal.fsyncs, secs: sys.journal.fsyncSecondsTotal, hist: sys.journal.fsyncHistogram });
    while (store.journal.length > 2 && store.journal[1].t <= t - FSYNC_WINDOW_MS) store.journal.shift();
  }
  for (const g of store.groups) {
    const k = g.queueName + '\u0000' + g.name;
    if (!store.lag.has(k)) store.lag.set(k, []);
    store.lag.get(k).push([t, Number(g.totalLag) || 0]);
  }
  const cut = t - HISTORY_MS - 60000;
  while (store.samples.length && store.samples[0].t < cut) store.samples.shift();
  const live = new Set(store.groups.map(g => g.queueName + '\u0000' + g.name));
  for (const [k, pts] of store.lag) {
    while (pts.length && pts[0][0] < cut) pts.shift();
    if (!pts.length || (!live.has(k) && pts[pts.length - 1][0] < t - 30000)) store.lag.delete(k);
  }
  $('#version').textContent = `Regent ${sys.version} · up ${fmtSecs(sys.uptimeSeconds)}`;
  $('#signout').hidden = !hasToken();
}

// FSYNC_WINDOW_MS is the window of the fsync latency figures.
export const FSYNC_WINDOW_MS = 60000;

// fsyncWindow returns the journal's fsync latency over the last
// FSYNC_WINDOW_MS (over less while the page has not been open that long):
// {avg, p99, secs (the window's length), fsyncs}, or null before the page
// has two readings to tell apart.
export function fsyncWindow(sys = store.sys) {
  const js = store.journal, cur = js.at(-1);
  if (js.length < 2 || !sys || !sys.journal) return null;
  let base = js[0];
  for (const r of js) if (r.t <= cur.t - FSYNC_WINDOW_MS) base = r;
  const n = cur.fsyncs - base.fsyncs;
  return {
    secs: (cur.t - base.t) / 1000, fsyncs: n,
    avg: n > 0 ? (cur.secs - base.secs) / n : null,
    p99: deltaQuantile(base.hist, cur.hist, sys.journal.fsyncBucketsSeconds, 0.99),
  };
}

export async function seedThroughput() {
  try {
    const st = await api('api/v1/status?from=' + enc(new Date(Date.now() - HISTORY_MS).toISOString()));
    store.seed = (st.throughput || []).map(p => ({
      from: Date.parse(p.timestamp), t: Date.parse(p.timestamp) + 60000,
      in: p.ingestedPerSecond, out: (p.popped || 0) / 60, ack: p.processedPerSecond,
    }));
  } catch { store.seed = []; }
}

// STEP_MS: a rate measured over a longer interval is drawn as a step.
const STEP_MS = 4 * POLL_MS;

// throughputSeries joins the broker's per-minute figures (before the page
// opened) with the page's own samples, each a rate measured over an
// interval [from, t]. A poll's rate is a point at its end; a longer one (a
// minute of the broker's, or a poll after the page was hidden) is a flat
// step over its interval. Where an interval does not begin where the one
// before ended, nothing was measured in between: a null point breaks the
// line there, rather than a ramp drawing traffic that never was.
export function throughputSeries() {
  const first = store.samples.length ? store.samples[0].from : Infinity;
  const meas = store.seed.filter(p => p.t <= first).concat(store.samples);
  const s = key => {
    const pts = [];
    let end = null;
    for (const m of meas) {
      if (end != null && m.from - end > POLL_MS) pts.push([(end + m.from) / 2, null]);
      if (m.t - m.from > STEP_MS) pts.push([m.from, m[key]]);
      pts.push([m.t, m[key]]);
      end = m.t;
    }
    return pts;
  };
  // Only the null points break these lines: a step's ends lie a minute apart.
  return [
    { name: 'in (pushed)', points: s('in'), gapMs: Infinity },
    { name: 'out (delivered)', points: s('out'), gapMs: Infinity },
    { name: 'acked', points: s('ack'), gapMs: Infinity },
  ];
}

// lagSeries returns the lag history of the groups (of one queue, or of
// all), the largest first, at most max of them.
export function lagSeries(queue, max = 6) {
  const out = [];
  for (const [k, pts] of store.lag) {
    const [q, g] = k.split('\u0000');
    if (queue != null && q !== queue) continue;
    out.push({ name: (g === QUEUE_MODE ? 'queue mode' : g) + (queue == null ? ' @ ' + q : ''), points: pts, key: k });
  }
  out.sort((a, b) => (b.points.at(-1)?.[1] || 0) - (a.points.at(-1)?.[1] || 0) || a.name.localeCompare(b.name));
  return out.slice(0, max);
}
