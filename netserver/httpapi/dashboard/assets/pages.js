// Regent dashboard, the pages. Each has mount (build the page once),
// refresh (fetch what it shows) and draw (show it; called after every
// refresh and on resize).

import {
  ago, api, apiAll, chart, chartPanel, dialog, enc, fill, fmtAgo, fmtBytes, fmtInt, fmtNum, fmtSecs, fmtStamp,
  fromLocalInput, h, lagDefinition, legend, POLL_MS, pretty, QUEUE_MODE, spark, toast, toLocalInput, when, $,
} from './lib.js';
import { fsyncWindow, hooks, lagSeries, store, throughputSeries } from './live.js';

const groupName = g => (g === QUEUE_MODE ? h('span', { class: 'badge info', title: QUEUE_MODE }, 'queue mode') : g);
function statusBadge(st) {
  const cls = { completed: 'ok', processing: 'info', pending: '', dead_letter: 'bad', Stable: 'ok', Lagging: 'warn', Dead: 'bad' }[st] || '';
  return h('span', { class: 'badge ' + cls }, String(st || '–').replace('_', ' '));
}
// toLocalInput and fromLocalInput convert between ISO times and
// <input type=datetime-local> values.

const card = (key, label) => h('div', { class: 'card', 'data-stat': key },
  h('div', { class: 'label' }, label), h('div', { class: 'value' }, '–'), h('div', { class: 'hint' }, '\u00a0'));
// setCard shows a card's figure; opts may replace its label, and give the
// hint a tooltip (title).
function setCard(root, key, value, hint, bad, opts = {}) {
  const c = $(`[data-stat="${key}"]`, root);
  if (!c) return;
  $('.value', c).textContent = value;
  $('.hint', c).textContent = hint || '\u00a0';
  if (opts.label) $('.label', c).textContent = opts.label;
  if (opts.title) $('.hint', c).title = opts.title;
  else $('.hint', c).removeAttribute('title');
  c.classList.toggle('bad', !!bad);
}
const head = (title, ...sub) => h('div', { class: 'head' }, h('div', null, h('h1', null, title), h('div', { class: 'sub' }, sub)));
const table = (cols, rows, empty = 'Nothing here yet.') => h('div', { class: 'scroll' }, h('table', null,
  h('thead', null, h('tr', null, cols.map(c => (typeof c === 'string' ? h('th', null, c) : h('th', { class: c.cls }, c.t))))),
  h('tbody', null, rows.length ? rows : h('tr', null, h('td', { class: 'empty', colspan: cols.length }, empty)))));

export const pages = {};

// Overview: live rates, depth, dead letters, journal; charts of
// throughput, lag and fsync latency; the deepest queues.
pages.overview = {
  nav: 'overview',
  mount(root, ctx) {
    ctx.tp = chartPanel('Throughput (messages/s)', 'throughput');
    ctx.lag = chartPanel('Consumer lag (messages behind)', 'lag');
    ctx.fs = chartPanel(`Journal fsync latency (each point: one ${fmtSecs(POLL_MS / 1000)} poll)`, 'fsync');
    ctx.deep = h('div');
    ctx.lagBox = h('div');
    root.append(head('Overview', 'Live figures of this broker, refreshed every 1.5 s.'),
      h('div', { class: 'grid cards' },
        card('in', 'Messages in /s'), card('out', 'Messages out /s'), card('acked', 'Acked /s'),
        card('depth', 'Total depth'), card('stored', 'Stored messages'), card('dlq', 'Dead letters'),
        card('journal', 'Journal size'), card('fsync', 'fsync latency'), card('queues', 'Queues'),
        card('partitions', 'Partitions'), card('groups', 'Consumer groups'), card('conns', 'Connections')),
      h('div', { class: 'grid two' }, ctx.tp.el, ctx.lag.el),
      h('div', { class: 'grid two' }, ctx.fs.el,
        h('section', { class: 'panel' }, h('h2', null, 'Deepest queues'), ctx.deep, h('h3', { class: 'spaced' }, 'Lag spread'), ctx.lagBox)));
  },
  async refresh(ctx) {
    ctx.ov = await api('api/v1/resources/overview');
    ctx.queues = await apiAll('api/v1/dashboard/queues', 'queues');
  },
  draw(root, ctx) {
    const sys = store.sys, ov = ctx.ov, last = store.samples.at(-1);
    if (!sys || !ov) return;
    setCard(root, 'in', last ? fmtNum(last.in) : fmtNum(sys.rates.pushPerSecond), `${fmtInt(sys.counters.pushed)} pushed`);
    setCard(root, 'out', last ? fmtNum(last.out) : fmtNum(sys.rates.popPerSecond), `${fmtInt(sys.counters.popped)} delivered`);
    setCard(root, 'acked', last ? fmtNum(last.ack) : fmtNum(sys.rates.ackPerSecond), `${fmtInt(sys.counters.acked)} acked`);
    setCard(root, 'depth', fmtInt(sys.depth), `${fmtInt(sys.messages.pending)} pending · ${fmtInt(sys.messages.processing)} in flight`);
    setCard(root, 'stored', fmtInt(sys.messages.total), `${fmtInt(sys.messages.completed)} passed by every group`);
    setCard(root, 'dlq', fmtInt(sys.messages.deadLetter), `${fmtInt(sys.counters.deadLettered)} filed since start`, sys.messages.deadLetter > 0,
      { title: `Filed since this broker started, ${fmtStamp(new Date(Date.now() - sys.uptimeSeconds * 1000).toISOString())} ` +
        '(the entries it recovered from its journal are not counted).' });
    const j = sys.journal;
    setCard(root, 'journal', j ? fmtBytes(j.diskBytes) : 'n/a', j ? `${fmtBytes(j.bytesWritten)} written since start` : 'no journal figures');
    // The fsync figures over the last minute (since start until the page
    // has two readings), each naming its window.
    const fw = j && fsyncWindow(sys);
    const since = j && `Since start: avg ${fmtSecs(j.avgFsyncSeconds)}, p99 ${fmtSecs(j.fsyncP99Seconds)} over ${fmtInt(j.fsyncs)} fsyncs.`;
    if (!j) setCard(root, 'fsync', 'n/a', '', false, { label: 'fsync latency' });
    else if (!fw) {
      setCard(root, 'fsync', fmtSecs(j.avgFsyncSeconds), `p99 ${fmtSecs(j.fsyncP99Seconds)} since start`, false,
        { label: 'fsync latency, avg since start', title: since });
    } else {
      const win = 'last ' + fmtSecs(Math.round(fw.secs));
      setCard(root, 'fsync', fw.fsyncs ? fmtSecs(fw.avg) : 'idle', fw.fsyncs ? `p99 ${fmtSecs(fw.p99)} over the ${win}` : `no fsync in the ${win}`, false,
        { label: `fsync latency, avg over the ${win}`, title: since });
    }
    setCard(root, 'queues', fmtInt(sys.queues), `${fmtInt(ov.namespaces)} namespaces · ${fmtInt(ov.tasks)} tasks`);
    setCard(root, 'partitions', fmtInt(sys.partitions));
    setCard(root, 'groups', fmtInt(sys.groups), `${fmtInt(store.groups.filter(g => g.state === 'Lagging').length)} lagging ` +
      `(oldest unfinished > ${fmtSecs(sys.laggingAfterSeconds)})`, false, { title: lagDefinition(sys.laggingAfterSeconds) });
    setCard(root, 'conns', fmtInt((sys.connections.http || 0) + (sys.connections.tcp || 0)),
      `${fmtInt(sys.connections.http)} HTTP · ${sys.connections.tcp == null ? '–' : fmtInt(sys.connections.tcp)} TCP`);

    const tp = throughputSeries();
    legend(ctx.tp.legend, tp);
    chart(ctx.tp.box, tp, { label: 'throughput' });
    const lg = lagSeries(null);
    legend(ctx.lag.legend, lg, fmtInt);
    if (lg.length) chart(ctx.lag.box, lg, { label: 'lag', fmt: fmtNum });
    else ctx.lag.box.replaceChildren(h('p', { class: 'empty' }, 'No consumer group has read yet.'));
    const per = fmtSecs(POLL_MS / 1000);
    const fs = [
      { name: `average per ${per}`, points: store.samples.map(s => [s.t, s.fsync]) },
      { name: `p99 per ${per}`, points: store.samples.map(s => [s.t, s.fsyncP99]), color: 2 },
    ];
    legend(ctx.fs.legend, fs, fmtSecs);
    if (j) chart(ctx.fs.box, fs, { label: 'fsync', fmt: fmtSecs, min: 1e-4 });
    else ctx.fs.box.replaceChildren(h('p', { class: 'empty' }, 'This broker reports no journal figures.'));

    const deep = [...ctx.queues].sort((a, b) => b.depth - a.depth || a.name.localeCompare(b.name)).slice(0, 6);
    fill(ctx.deep, deep, () => table(['Queue', { t: 'Depth', cls: 'num' }, { t: 'Dead', cls: 'num' }, 'Worst lag'],
      deep.map(q => {
        const worst = [...q.groups].sort((a, b) => b.offsetLag - a.offsetLag)[0];
        return h('tr', { 'data-queue': q.name }, h('td', null, h('a', { href: '#/queue/' + enc(q.name) }, q.name)),
          h('td', { class: 'num' }, fmtInt(q.depth)), h('td', { class: 'num' }, fmtInt(q.deadLetters)),
          h('td', null, worst ? [groupName(worst.name), ' ', h('b', null, fmtInt(worst.offsetLag))] : h('span', { class: 'muted' }, 'no group')));
      }), 'No queue yet.'));
    fill(ctx.lagBox, ov.lag, () => h('dl', { class: 'kv' },
      h('dt', null, 'Messages behind'), h('dd', null, `avg ${fmtNum(ov.lag.offset.avg)} · median ${fmtNum(ov.lag.offset.median)} · max ${fmtInt(ov.lag.offset.max)}`),
      h('dt', null, 'Time behind'), h('dd', null, `avg ${fmtSecs(ov.lag.time.avg)} · median ${fmtSecs(ov.lag.time.median)} · max ${fmtSecs(ov.lag.time.max)}`)));
  },
};

const optionRows = [
  ['leaseTimeSeconds', 'lease time', v => fmtSecs(v)], ['retryLimit', 'retry limit', fmtInt],
  ['retryDelayMs', 'retry delay', v => fmtSecs(v / 1000)], ['delayedProcessingSeconds', 'delayed processing', fmtSecs],
  ['windowBufferSeconds', 'window buffer', fmtSecs], ['maxSize', 'max size', v => (v ? fmtInt(v) : 'unlimited')],
  ['retentionEnabled', 'retention', v => (v ? 'on' : 'off')], ['retentionSeconds', 'retention after', v => (v ? fmtSecs(v) : '–')],
  ['completedRetentionSeconds', 'completed retention', v => (v ? fmtSecs(v) : '–')],
  ['maxWaitTimeSeconds', 'max wait', v => (v ? fmtSecs(v) : '–')], ['priority', 'priority', String],
  ['encryptionEnabled', 'encryption', v => (v ? 'on' : 'off')], ['maxPartitions', 'max partitions', v => (v ? fmtInt(v) : 'unlimited')],
  ['dedupWindowSeconds', 'dedup window', v => (v ? fmtSecs(v) : 'default')], ['ttlSeconds', 'ttl', fmtSecs],
];
const optionsGrid = o => h('div', { class: 'opts' }, optionRows.map(([k, label, f]) =>
  h('div', { 'data-option': k }, h('span', null, label), h('span', null, f(o[k])))));
const optionsLine = o => `lease ${fmtSecs(o.leaseTimeSeconds)} · ${o.retryLimit} retries · delay ${fmtSecs(o.retryDelayMs / 1000)}` +
  (o.maxSize ? ` · max ${fmtInt(o.maxSize)}` : '') + (o.retentionEnabled ? ' · retention' : '') + (o.encryptionEnabled ? ' · encrypted' : '');

// Queues: every queue with its depth, partitions, groups and their lag,
// and its options.
pages.queues = {
  nav: 'queues',
  mount(root, ctx) {
    ctx.filter = h('input', { type: 'search', placeholder: 'Filter by name, namespace or task', 'aria-label': 'Filter queues' });
    ctx.filter.addEventListener('input', () => this.draw(root, ctx));
    ctx.box = h('div');
    root.append(head('Queues', 'Depth counts the messages the slowest group has not finished.'),
      h('section', { class: 'panel' }, h('div', { class: 'filters' }, h('div', { class: 'field' }, ctx.filter)), ctx.box));
  },
  async refresh(ctx) { ctx.queues = await apiAll('api/v1/dashboard/queues', 'queues'); },
  draw(root, ctx) {
    if (!ctx.queues) return;
    const f = ctx.filter.value.trim().toLowerCase();
    const qs = ctx.queues.filter(q => !f || [q.name, q.namespace, q.task].some(s => s && s.toLowerCase().includes(f)));
    fill(ctx.box, qs, () => table(['Queue', { t: 'Partitions', cls: 'num' }, { t: 'Depth', cls: 'num' },
      { t: 'Stored', cls: 'num' }, { t: 'In flight', cls: 'num' }, { t: 'Dead', cls: 'num' }, 'Groups (lag)', 'Options'],
    qs.map(q => h('tr', { 'data-queue': q.name },
      h('td', null, h('a', { href: '#/queue/' + enc(q.name) }, q.name),
        q.namespace || q.task ? h('div', { class: 'muted' }, [q.namespace, q.task].filter(Boolean).join(' / ')) : null),
      h('td', { class: 'num', 'data-col': 'partitions' }, fmtInt(q.partitions)),
      h('td', { class: 'num', 'data-col': 'depth' }, fmtInt(q.depth)),
      h('td', { class: 'num', 'data-col': 'stored' }, fmtInt(q.messages.total)),
      h('td', { class: 'num', 'data-col': 'processing' }, fmtInt(q.messages.processing)),
      h('td', { class: 'num', 'data-col': 'dead' }, q.deadLetters ? h('span', { class: 'error' }, fmtInt(q.deadLetters)) : '0'),
      h('td', { 'data-col': 'groups' }, q.groups.length ? h('div', { class: 'chips' }, q.groups.map(g =>
        h('span', { class: 'chip', 'data-group': g.name, title: `${g.partitionsWithLag} of ${g.partitions} partitions behind; up to ${fmtSecs(g.maxTimeLagSeconds)}` },
          groupName(g.name), h('b', null, fmtInt(g.offsetLag))))) : h('span', { class: 'muted' }, 'none')),
      h('td', null, h('details', { 'data-key': q.name }, h('summary', null, optionsLine(q.options)), optionsGrid(q.options))))),
    f ? 'No queue matches.' : 'No queue yet: push a message or configure one.'));
  },
};

function leaseCell(c) {
  if (!c.lease) {
    if (c.blockedUntil) return h('span', { class: 'badge warn', title: c.blockedUntil }, 'retry wait ' + fmtAgo(c.blockedUntil).replace('in ', ''));
    return h('span', { class: 'muted' }, 'free');
  }
  const l = c.lease;
  return h('span', { title: 'lease ' + l.id },
    h('span', { class: 'badge info' }, 'leased'), ` ${fmtInt(l.from)}–${fmtInt(l.to - 1)} · ${l.acked} acked · expires ${fmtAgo(l.expiresAt)}`);
}

// One queue: its groups, options, partitions with every group's cursor
// and lease, and its newest messages.
pages.queue = {
  nav: 'queues',
  mount(root, ctx, args) {
    ctx.name = args[0] || '';
    ctx.title = h('div');
    ctx.groups = h('div');
    ctx.opts = h('div');
    ctx.parts = h('div');
    ctx.newest = h('div');
    ctx.lag = chartPanel('Lag of this queue\'s groups', 'queue-lag');
    root.append(ctx.title,
      h('div', { class: 'grid cards' }, card('depth', 'Depth'), card('stored', 'Stored'), card('processing', 'In flight'),
        card('dead', 'Dead letters'), card('partitions', 'Partitions'), card('groupsN', 'Groups')),
      h('div', { class: 'grid two' }, h('section', { class: 'panel' }, h('h2', null, 'Consumer groups'), ctx.groups), ctx.lag.el),
      h('section', { class: 'panel' }, h('h2', null, 'Options'), ctx.opts),
      h('section', { class: 'panel' }, h('h2', null, 'Partitions'), ctx.parts),
      h('section', { class: 'panel' }, h('h2', null, 'Newest messages'), ctx.newest));
  },
  async refresh(ctx) { ctx.q = await api('api/v1/dashboard/queues/' + enc(ctx.name) + '?messages=20'); },
  draw(root, ctx) {
    const q = ctx.q;
    if (!q) return;
    fill(ctx.title, [q.name, q.namespace, q.task, q.id], () => head(q.name,
      [q.namespace && `namespace ${q.namespace}`, q.task && `task ${q.task}`, `created ${fmtStamp(q.createdAt)}`].filter(Boolean).join(' · '),
      ' · ', h('a', { href: '#/dlq?queue=' + enc(q.name) }, 'dead letters'), ' · ', h('a', { href: '#/groups?q=' + enc(q.name) }, 'manage groups')));
    setCard(root, 'depth', fmtInt(q.depth), `${fmtInt(q.messages.pending)} pending`);
    setCard(root, 'stored', fmtInt(q.messages.total));
    setCard(root, 'processing', fmtInt(q.messages.processing));
    setCard(root, 'dead', fmtInt(q.deadLetters), null, q.deadLetters > 0);
    setCard(root, 'partitions', fmtInt(q.partitionsTotal));
    setCard(root, 'groupsN', fmtInt(q.groups.length));
    fill(ctx.groups, q.groups, () => table(['Group', 'Mode', { t: 'Lag', cls: 'num' }, { t: 'Behind', cls: 'num' }, { t: 'Leases', cls: 'num' }, { t: 'Retrying', cls: 'num' }],
      q.groups.map(g => h('tr', { 'data-group': g.name }, h('td', null, groupName(g.name)), h('td', null, g.subscriptionMode),
        h('td', { class: 'num', 'data-col': 'lag' }, fmtInt(g.offsetLag)), h('td', { class: 'num' }, fmtSecs(g.maxTimeLagSeconds)),
        h('td', { class: 'num' }, fmtInt(g.leases)), h('td', { class: 'num' }, fmtInt(g.retrying)))), 'No group has read this queue.'));
    const lg = lagSeries(q.name);
    legend(ctx.lag.legend, lg, fmtInt);
    if (lg.length) chart(ctx.lag.box, lg, { label: 'lag', fmt: fmtNum });
    else ctx.lag.box.replaceChildren(h('p', { class: 'empty' }, 'No group yet.'));
    fill(ctx.opts, q.options, () => optionsGrid(q.options));
    fill(ctx.parts, q.partitions, () => {
      const rows = [];
      for (const p of q.partitions) {
        const n = Math.max(p.cursors.length, 1);
        const lead = [
          h('td', { rowspan: n }, h('b', null, p.name), h('div', { class: 'muted mono', title: 'partition id ' + p.id }, '…' + p.id.slice(-8))),
          h('td', { rowspan: n, class: 'num' }, p.next > p.low
            ? [`${fmtInt(p.low)}–${fmtInt(p.next - 1)}`, h('div', { class: 'muted' }, `next ${fmtInt(p.next)}`)]
            : h('span', { class: 'muted' }, 'empty')),
          h('td', { rowspan: n, class: 'num' }, fmtInt(p.stats.total)),
          h('td', { rowspan: n, class: 'hide-sm' }, ago(p.newestAt)),
        ];
        if (!p.cursors.length) {
          rows.push(h('tr', { 'data-partition': p.name }, lead, h('td', { colspan: 4, class: 'muted' }, 'no group has read it')));
          continue;
        }
        p.cursors.forEach((c, i) => rows.push(h('tr', { 'data-partition': p.name, 'data-group': c.group },
          i === 0 ? lead : null, h('td', null, groupName(c.group)),
          h('td', { class: 'num', 'data-col': 'cursor' }, fmtInt(c.cursor)),
          h('td', { class: 'num', 'data-col': 'lag' }, fmtInt(c.offsetLag), c.timeLagSeconds ? h('div', { class: 'muted' }, fmtSecs(c.timeLagSeconds)) : null),
          h('td', { 'data-col': 'lease' }, leaseCell(c), c.retrying ? h('div', { class: 'muted' }, `${c.retrying} retrying`) : null))));
      }
      const t = table(['Partition', { t: 'Offsets', cls: 'num' }, { t: 'Stored', cls: 'num' }, { t: 'Newest', cls: 'hide-sm' }, 'Group',
        { t: 'Cursor', cls: 'num' }, { t: 'Lag', cls: 'num' }, 'Lease'], rows, 'No partition yet.');
      return q.partitionsTotal > q.partitions.length
        ? [t, h('p', { class: 'muted' }, `Showing the ${q.partitions.length} partitions with the most lag of ${fmtInt(q.partitionsTotal)}.`)] : t;
    });
    fill(ctx.newest, q.newest, () => table(['Created', 'Partition', { t: 'Offset', cls: 'num' }, 'Transaction', 'Status', 'Payload', { t: 'Size', cls: 'num hide-sm' }],
      q.newest.map(m => h('tr', { 'data-message': m.transactionId },
        h('td', null, ago(m.createdAt)), h('td', null, m.partition), h('td', { class: 'num' }, fmtInt(m.offset)),
        h('td', { class: 'mono' }, h('a', { href: messageLink({ queue: q.name, partition: m.partition, offset: m.offset }), title: 'open the message' }, m.transactionId)),
        h('td', null, statusBadge(m.status), h('div', { class: 'muted' }, `${m.consumedBy}/${m.totalGroups} groups`)),
        h('td', null, h('div', { class: 'preview', title: m.preview }, m.preview + (m.truncated ? '…' : ''))),
        h('td', { class: 'num hide-sm' }, fmtBytes(m.size)))), 'No message yet.'));
  },
};

// Consumer groups: lag, state, and seek and delete (confirmed first).
pages.groups = {
  nav: 'groups',
  mount(root, ctx, args, query) {
    ctx.filter = h('input', { type: 'search', placeholder: 'Filter by group or queue', 'aria-label': 'Filter groups', value: query.get('q') || '' });
    ctx.filter.addEventListener('input', () => this.draw(root, ctx));
    ctx.lag = chartPanel('Lag (messages behind)', 'groups-lag');
    ctx.box = h('div');
    ctx.box.addEventListener('click', e => {
      const b = e.target.closest('button[data-action]');
      if (b) (b.dataset.action === 'seek' ? seekGroup : deleteGroup)(b.dataset.group, b.dataset.queue);
    });
    ctx.define = h('span', { 'data-define': 'lagging' });
    root.append(head('Consumer groups', 'One row per group and queue. ', ctx.define),
      ctx.lag.el, h('section', { class: 'panel' }, h('div', { class: 'filters' }, h('div', { class: 'field' }, ctx.filter)), ctx.box));
  },
  async refresh() {},
  draw(root, ctx) {
    const def = store.sys ? lagDefinition(store.sys.laggingAfterSeconds) : '';
    ctx.define.textContent = def;
    const f = ctx.filter.value.trim().toLowerCase();
    const gs = store.groups.filter(g => !f || g.name.toLowerCase().includes(f) || g.queueName.toLowerCase().includes(f));
    const lg = lagSeries(null).filter(s => gs.some(g => s.key === g.queueName + '\u0000' + g.name));
    legend(ctx.lag.legend, lg, fmtInt);
    if (lg.length) chart(ctx.lag.box, lg, { label: 'lag', fmt: fmtNum });
    else ctx.lag.box.replaceChildren(h('p', { class: 'empty' }, 'No consumer group yet.'));
    const rows = gs.map(g => {
      const hist = store.lag.get(g.queueName + '\u0000' + g.name) || [];
      return h('tr', { 'data-group': g.name, 'data-queue': g.queueName },
        h('td', null, groupName(g.name)), h('td', null, h('a', { href: '#/queue/' + enc(g.queueName) }, g.queueName)),
        h('td', { 'data-col': 'state', title: def }, statusBadge(g.state)),
        h('td', { class: 'num', 'data-col': 'lag' }, fmtInt(g.totalLag)),
        h('td', { class: 'num' }, fmtInt(g.partitionsWithLag)),
        h('td', { class: 'num' }, fmtSecs(g.maxTimeLag)),
        h('td', { class: 'num hide-sm' }, fmtInt(g.members)),
        h('td', { class: 'hide-sm' }, g.subscriptionMode, g.subscriptionTimestamp ? h('div', { class: 'muted' }, fmtStamp(g.subscriptionTimestamp)) : null),
        h('td', { class: 'hide-sm' }, spark(hist, 's' + (Number(g.totalLag) > 0 ? 2 : 1))),
        h('td', { class: 'actions' },
          h('button', { type: 'button', class: 'small', 'data-action': 'seek', 'data-group': g.name, 'data-queue': g.queueName, title: 'Move this group\'s cursors' }, 'Seek…'),
          h('button', { type: 'button', class: 'small danger', 'data-action': 'delete', 'data-group': g.name, 'data-queue': g.queueName, title: 'Delete this group from the queue' }, 'Delete…')));
    });
    fill(ctx.box, [def, gs, gs.map(g => (store.lag.get(g.queueName + '\u0000' + g.name) || []).length)], () =>
      table(['Group', 'Queue', 'State', { t: 'Lag', cls: 'num' }, { t: 'Partitions behind', cls: 'num' }, { t: 'Max time lag', cls: 'num' },
        { t: 'Leases', cls: 'num hide-sm' }, { t: 'Subscription', cls: 'hide-sm' }, { t: 'Trend', cls: 'hide-sm' }, ''], rows,
      f ? 'No group matches.' : 'No consumer group yet: a pop creates one.'));
  },
};

function seekGroup(group, queue) {
  const toEnd = h('input', { type: 'radio', name: 'to', value: 'end', checked: true });
  const toTime = h('input', { type: 'radio', name: 'to', value: 'time' });
  const time = h('input', { type: 'datetime-local', name: 'timestamp', step: 1, value: toLocalInput(Date.now() - 5 * 60000) });
  time.addEventListener('input', () => { toTime.checked = true; });
  dialog({
    title: 'Seek consumer group', ok: 'Seek',
    body: [h('p', null, 'Move the cursor of ', h('b', null, group === QUEUE_MODE ? 'queue mode' : group), ' on every partition of ',
      h('b', null, queue), '. Its leases there are released and its retry counts forgotten.'),
    h('label', { class: 'radio' }, toEnd, 'To the end: skip every message stored now'),
    h('label', { class: 'radio' }, toTime, 'To a time: skip the messages created at or before it'),
    h('div', { class: 'field' }, time)],
    action: async () => {
      let body = { toEnd: true };
      if (toTime.checked) {
        if (!time.value) throw new Error('Choose a time.');
        body = { timestamp: fromLocalInput(time.value) };
      }
      const r = await api(`api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}/seek`, { method: 'POST', body });
      toast(`Moved ${group === QUEUE_MODE ? 'queue mode' : group} on ${r.partitionsUpdated} partition${r.partitionsUpdated === 1 ? '' : 's'} of ${queue}.`);
    },
  }).then(done => done && hooks.refresh());
}

function deleteGroup(group, queue) {
  dialog({
    title: 'Delete consumer group', ok: 'Delete', danger: true,
    body: h('p', null, 'Delete ', h('b', null, group === QUEUE_MODE ? 'queue mode' : group), ' from queue ', h('b', null, queue),
      '? Its cursors, leases and retry counts are removed. If it reads again it starts over by its subscription. This cannot be undone.'),
    action: async () => {
      await api(`api/v1/consumer-groups/${enc(group)}/queues/${enc(queue)}`, { method: 'DELETE' });
      toast(`Deleted ${group === QUEUE_MODE ? 'queue mode' : group} from ${queue}.`);
    },
  }).then(done => done && hooks.refresh());
}

// Dead-letter queue: filters, each entry's error and payload, redrive and
// purge (enabled when the broker serves them).
const NO_REDRIVE = 'Not available yet: this broker cannot put dead letters back (the engine has no redrive). The button turns on when the broker serves it.';
const NO_PURGE = 'Not available yet: this broker cannot remove dead letters (the engine has no purge). The button turns on when the broker serves it.';
pages.dlq = {
  nav: 'dlq',
  mount(root, ctx, args, query) {
    const field = (label, el) => h('div', { class: 'field' }, h('label', null, label), el);
    ctx.f = {
      queue: h('select', { name: 'queue', 'aria-label': 'Queue' }, h('option', { value: '' }, 'every queue')),
      consumerGroup: h('input', { name: 'consumerGroup', list: 'dlq-groups', placeholder: 'any group' }),
      partition: h('input', { name: 'partition', placeholder: 'any partition' }),
      from: h('input', { name: 'from', type: 'datetime-local', step: 1 }),
      to: h('input', { name: 'to', type: 'datetime-local', step: 1 }),
      limit: h('select', { name: 'limit', 'aria-label': 'Page size' }, [25, 50, 100].map(n => h('option', { value: n, selected: n === 25 }, n))),
    };
    ctx.want = query.get('queue') || '';
    ctx.f.consumerGroup.value = query.get('consumerGroup') || '';
    ctx.offset = 0;
    ctx.groupsList = h('datalist', { id: 'dlq-groups' });
    for (const el of Object.values(ctx.f)) el.addEventListener('change', () => { ctx.offset = 0; hooks.refresh(); });
    ctx.redriveAll = h('button', { type: 'button', 'data-action': 'redrive-shown' }, 'Redrive shown');
    ctx.purgeAll = h('button', { type: 'button', class: 'danger', 'data-action': 'purge-shown' }, 'Purge shown');
    ctx.note = h('p', { class: 'muted', hidden: true });
    ctx.count = h('span', { class: 'muted' });
    ctx.box = h('div');
    ctx.pager = h('div', { class: 'pager' });
    const act = e => {
      const b = e.target.closest('button[data-action]');
      if (!b || b.disabled) return;
      const shown = ctx.list ? ctx.list.messages : [];
      if (b.dataset.action === 'prev') { ctx.offset = Math.max(0, ctx.offset - ctx.limit); hooks.refresh(); }
      if (b.dataset.action === 'next') { ctx.offset = ctx.next; hooks.refresh(); }
      if (b.dataset.action === 'redrive') dlqAction('redrive', shown.filter(m => m.entryId === b.dataset.id));
      if (b.dataset.action === 'purge') dlqAction('purge', shown.filter(m => m.entryId === b.dataset.id));
      if (b.dataset.action === 'redrive-shown') dlqAction('redrive', shown);
      if (b.dataset.action === 'purge-shown') dlqAction('purge', shown);
    };
    const wrap = h('div');
    wrap.addEventListener('click', act);
    root.append(wrap);
    wrap.append(head('Dead-letter queue', 'Messages a group gave up on: the error, the retries, and the payload.'),
      h('section', { class: 'panel' },
        h('div', { class: 'filters' }, field('Queue', ctx.f.queue), field('Consumer group', ctx.f.consumerGroup), field('Partition', ctx.f.partition),
          field('Failed from', ctx.f.from), field('Failed to', ctx.f.to), field('Page size', ctx.f.limit), ctx.groupsList),
        h('div', { class: 'bar' }, ctx.count, h('span', { class: 'grow' }), ctx.redriveAll, ctx.purgeAll), ctx.note),
      h('div', { class: 'spaced' }, ctx.box), ctx.pager);
  },
  async refresh(ctx) {
    const qs = (await apiAll('api/v1/dashboard/queues', 'queues')).map(q => q.name);
    const sel = ctx.f.queue;
    const cur = sel.value || ctx.want;
    const names = [...new Set([...qs, cur].filter(Boolean))];
    if ((sel._names || []).join('\u0000') !== names.join('\u0000')) {
      sel.replaceChildren(h('option', { value: '' }, 'every queue'), ...names.map(n => h('option', { value: n }, n)));
      sel._names = names;
    }
    sel.value = cur;
    ctx.want = '';
    const p = new URLSearchParams();
    for (const k of ['queue', 'consumerGroup', 'partition']) if (ctx.f[k].value.trim()) p.set(k, ctx.f[k].value.trim());
    if (ctx.f.from.value) p.set('from', fromLocalInput(ctx.f.from.value));
    if (ctx.f.to.value) p.set('to', fromLocalInput(ctx.f.to.value));
    ctx.limit = Number(ctx.f.limit.value);
    p.set('limit', ctx.limit);
    p.set('offset', ctx.offset);
    ctx.list = await api('api/v1/dlq?' + p);
  },
  draw(root, ctx) {
    const l = ctx.list, sys = store.sys;
    if (!l || !sys) return;
    const groups = [...new Set(store.groups.map(g => g.name))].sort();
    fill(ctx.groupsList, groups, () => groups.map(g => h('option', { value: g })));
    const feat = sys.features || {};
    const canRedrive = !!feat.dlqRedrive, canPurge = !!feat.dlqPurge;
    const ids = l.messages.every(m => m.entryId);
    ctx.redriveAll.disabled = !canRedrive || !ids || !l.messages.length;
    ctx.redriveAll.title = canRedrive ? 'Put every entry shown back at the end of its partition' : NO_REDRIVE;
    ctx.purgeAll.disabled = !canPurge || !ids || !l.messages.length;
    ctx.purgeAll.title = canPurge ? 'Remove every entry shown' : NO_PURGE;
    ctx.note.hidden = canRedrive && canPurge;
    ctx.note.textContent = !canRedrive && !canPurge ? 'Redrive and purge are not available on this broker yet.'
      : !canRedrive ? 'Redrive is not available on this broker yet.' : 'Purge is not available on this broker yet.';
    const total = l.total ?? l.messages.length;
    // A page may hold fewer than its size (the broker cuts pages of large
    // payloads): the next one starts where pagination.next says.
    ctx.next = (l.pagination && l.pagination.next) ?? ctx.offset + l.messages.length;
    ctx.count.textContent = total ? `${fmtInt(ctx.offset + 1)}–${fmtInt(ctx.offset + l.messages.length)} of ${fmtInt(total)} entries` : 'No entries';
    fill(ctx.pager, [ctx.offset, l.messages.length, total], () => total > l.messages.length || ctx.offset > 0 ? [
      h('button', { type: 'button', 'data-action': 'prev', disabled: ctx.offset === 0 }, '← Newer'),
      h('button', { type: 'button', 'data-action': 'next', disabled: ctx.offset + l.messages.length >= total }, 'Older →')] : []);
    fill(ctx.box, [l.messages, canRedrive, canPurge], () => l.messages.length ? l.messages.map(m => {
      const text = pretty(m.data), long = text.length > 400 || text.split('\n').length > 8;
      const pre = h('pre', { class: 'payload short' }, text);
      return h('article', { class: 'entry', 'data-dlq': m.transactionId, 'data-group': m.consumerGroup },
        h('div', { class: 'meta' },
          h('span', null, 'failed ', h('b', { title: m.failedAt }, fmtStamp(m.failedAt))),
          h('span', null, 'queue ', h('b', null, h('a', { href: '#/queue/' + enc(m.queue) }, m.queue)), ' / ', h('b', null, m.partition)),
          h('span', null, 'group ', h('b', null, groupName(m.consumerGroup))),
          h('span', { 'data-col': 'retries' }, 'retries ', h('b', null, fmtInt(m.retryCount))),
          h('span', null, 'transaction ', h('b', { class: 'mono' }, m.transactionId))),
        h('div', { class: 'err', 'data-col': 'error' }, m.errorMessage || h('span', { class: 'muted' }, 'no error text')),
        long ? h('details', { 'data-key': m.id + m.consumerGroup }, h('summary', null, `payload (${fmtBytes(text.length)})`), pre) : pre,
        h('div', { class: 'bar' },
          h('a', { href: messageLink({ queue: m.queue, partition: m.partition, transactionId: m.transactionId }) }, 'Open message'), h('span', { class: 'grow' }),
          h('button', { type: 'button', class: 'small', 'data-action': 'redrive', 'data-id': m.entryId || '', disabled: !canRedrive || !m.entryId,
            title: canRedrive ? (m.entryId ? 'Put it back at the end of its partition' : 'The broker gives no entry id') : NO_REDRIVE }, 'Redrive'),
          h('button', { type: 'button', class: 'small danger', 'data-action': 'purge', 'data-id': m.entryId || '', disabled: !canPurge || !m.entryId,
            title: canPurge ? (m.entryId ? 'Remove this entry' : 'The broker gives no entry id') : NO_PURGE }, 'Purge')));
    }) : h('p', { class: 'panel empty' }, 'No dead letters match.'));
  },
};

function dlqAction(kind, entries) {
  if (!entries.length) return;
  const n = entries.length, what = n === 1 ? 'this dead letter' : `these ${n} dead letters`;
  dialog({
    title: kind === 'redrive' ? 'Redrive dead letters' : 'Purge dead letters', ok: kind === 'redrive' ? 'Redrive' : 'Purge', danger: kind === 'purge',
    body: h('p', null, kind === 'redrive' ? `Put ${what} back, each as a new message at the end of its partition?`
      : `Remove ${what} for good? This cannot be undone.`),
    action: async () => {
      const r = await api(`api/v1/dlq/${kind}`, { method: 'POST', body: { ids: entries.map(m => m.entryId) } });
      const done = r && (r.redriven ?? r.purged ?? r.count);
      toast(`${kind === 'redrive' ? 'Redrove' : 'Purged'} ${done ?? n} dead letter${(done ?? n) === 1 ? '' : 's'}.`);
    },
  }).then(ok => ok && hooks.refresh());
}

// messageLink is the Message page's address for a message found by queue,
// partition and offset, or by transaction id (and where to look).
function messageLink(by) {
  const p = new URLSearchParams();
  for (const k of ['queue', 'partition', 'offset', 'transactionId']) if (by[k] != null && by[k] !== '') p.set(k, by[k]);
  return '#/message?' + p;
}

// A message: payload, status, which groups have passed it, its traces. It
// is found by queue, partition name and offset, or by transaction id (in
// the queue and partition given, or anywhere), through the dashboard's
// finder (GET /api/v1/dashboard/messages); several messages with one
// transaction id are listed to choose from.
pages.message = {
  nav: 'message',
  mount(root, ctx, args, query) {
    ctx.by = {};
    for (const k of ['queue', 'partition', 'offset', 'transactionId']) if (query.get(k)) ctx.by[k] = query.get(k);
    if (args.length === 2 && !ctx.by.transactionId) {
      // An address of the dashboard before the finder: #/message/PARTITION_ID/TXN.
      // It is the search by transaction id, narrowed to that partition.
      ctx.by.transactionId = args[1];
      ctx.partitionId = args[0];
      history.replaceState(null, '', messageLink(ctx.by));
    }
    const field = (label, name, attrs) => {
      const el = h('input', { name, value: ctx.by[name] || '', 'aria-label': label, ...attrs });
      return [el, h('div', { class: 'field' }, h('label', null, label), el)];
    };
    const [queue, qf] = field('Queue', 'queue', { placeholder: 'queue' });
    const [part, pf] = field('Partition', 'partition', { placeholder: 'Default' });
    const [off, of] = field('Offset', 'offset', { type: 'number', min: 0, step: 1, placeholder: 'offset' });
    const [txn, tf] = field('Transaction id', 'transactionId', { placeholder: 'transaction id (or message id)' });
    const err = h('p', { class: 'error', hidden: true });
    const form = h('form', { class: 'filters' }, qf, pf, of, h('span', { class: 'muted or' }, 'or'), tf,
      h('button', { type: 'submit', class: 'primary' }, 'Find'));
    form.addEventListener('submit', e => {
      e.preventDefault();
      const v = { queue: queue.value.trim(), partition: part.value.trim() || (off.value.trim() ? 'Default' : ''),
        offset: off.value.trim(), transactionId: txn.value.trim() };
      err.hidden = true;
      if (v.offset !== '' && v.queue) location.hash = messageLink({ queue: v.queue, partition: v.partition, offset: v.offset });
      else if (v.transactionId) location.hash = messageLink({ queue: v.queue, partition: v.partition, transactionId: v.transactionId });
      else { err.textContent = 'Name a queue, a partition and an offset, or a transaction id.'; err.hidden = false; }
    });
    ctx.box = h('div', { class: 'spaced' });
    root.append(head('Message', 'Find one by its queue, partition and offset, or by its transaction id; or open one from a queue\'s newest messages or a dead letter.'),
      h('section', { class: 'panel' }, form, err), ctx.box);
  },
  async refresh(ctx) {
    const by = ctx.by;
    if (!(by.offset != null && by.queue) && !by.transactionId) return;
    const where = by.offset != null ? `${by.queue} / ${by.partition || 'Default'} at offset ${by.offset}`
      : `transaction id ${by.transactionId}` + (by.queue ? ` in ${by.queue}` + (by.partition ? ` / ${by.partition}` : '') : '');
    const p = new URLSearchParams(by.offset != null ? { queue: by.queue, partition: by.partition || 'Default', offset: by.offset } : by);
    try {
      const f = await api('api/v1/dashboard/messages?' + p);
      ctx.found = f.messages;
      ctx.more = !f.complete;
      if (ctx.partitionId) {
        const there = ctx.found.filter(m => m.partitionId === ctx.partitionId);
        if (there.length) { ctx.found = there; ctx.more = false; }
      }
      ctx.err = null;
      if (ctx.found.length !== 1) { ctx.m = null; return; }
      const one = ctx.found[0];
      const [m, tr] = await Promise.all([api(`api/v1/messages/${enc(one.partitionId)}/${enc(one.id)}`),
        api(`api/v1/traces/${enc(one.partitionId)}/${enc(one.transactionId)}`)]);
      ctx.m = { ...m, offset: one.offset };
      ctx.traces = tr.traces || [];
    } catch (e) {
      if (e.status !== 404 && e.status !== 400) throw e;
      ctx.m = null; ctx.found = null;
      ctx.err = `${e.message}: ${where}` + (e.status === 404 ? ' (retention may have removed it).' : '.');
    }
  },
  draw(root, ctx) {
    if (ctx.err) { fill(ctx.box, ctx.err, () => h('p', { class: 'panel error', 'data-col': 'not-found' }, ctx.err)); return; }
    if (ctx.found && ctx.found.length > 1) {
      fill(ctx.box, [ctx.found, ctx.more], () => h('section', { class: 'panel' },
        h('h2', null, `${ctx.found.length} messages have this transaction id${ctx.more ? ' (the first found)' : ''}`),
        table(['Queue', 'Partition', { t: 'Offset', cls: 'num' }, 'Created'], ctx.found.map(f => h('tr', { 'data-found': `${f.queue}/${f.partition}/${f.offset}` },
          h('td', null, f.queue), h('td', null, f.partition),
          h('td', { class: 'num' }, h('a', { href: messageLink(f) }, fmtInt(f.offset))), h('td', null, when(f.createdAt)))))));
      return;
    }
    const m = ctx.m;
    if (!m) return;
    fill(ctx.box, [m, ctx.traces], () => {
      const passed = m.consumerGroups.filter(g => g.consumed).length;
      const kv = [['Status', statusBadge(m.status)], ['Queue', h('a', { href: '#/queue/' + enc(m.queue) }, m.queue)], ['Partition', m.partition],
        ['Offset', h('span', { 'data-col': 'offset' }, fmtInt(m.offset))],
        ['Message id', h('span', { class: 'mono' }, m.id)], ['Transaction id', h('span', { class: 'mono', 'data-col': 'transactionId' }, m.transactionId)],
        ['Partition id', h('span', { class: 'mono' }, m.partitionId)], ['Created', [when(m.createdAt), ' (', fmtAgo(m.createdAt), ')']],
        ['Trace id', m.traceId || '–'], ['Producer', m.producerSub || '–'], ['Encrypted at rest', m.isEncrypted ? 'yes' : 'no']];
      if (m.errorMessage) kv.push(['Error', h('span', { class: 'error' }, m.errorMessage)], ['Retries', fmtInt(m.retryCount)]);
      if (m.leaseExpiresAt) kv.push(['Lease expires', ago(m.leaseExpiresAt)]);
      return [
        h('div', { class: 'grid two' },
          h('section', { class: 'panel' }, h('h2', null, 'Details'), h('dl', { class: 'kv' }, kv.map(([k, v]) => [h('dt', null, k), h('dd', null, v)]))),
          h('section', { class: 'panel' }, h('h2', null, `Consumer groups · passed by ${passed} of ${m.consumerGroups.length}`),
            table(['Group', 'Passed', 'Lease'], m.consumerGroups.map(g => h('tr', { 'data-group': g.name },
              h('td', null, groupName(g.name)),
              h('td', { 'data-col': 'passed' }, g.consumed ? h('span', { class: 'badge ok' }, 'passed') : h('span', { class: 'badge' }, 'not yet')),
              h('td', null, g.leaseExpiresAt ? ['leased, expires ', ago(g.leaseExpiresAt)] : h('span', { class: 'muted' }, '–')))),
            'No group reads this partition yet.'))),
        h('section', { class: 'panel' }, h('h2', null, 'Payload'), h('pre', { class: 'payload', 'data-col': 'payload' }, pretty(m.payload))),
        h('section', { class: 'panel' }, h('h2', null, `Traces (${ctx.traces.length})`),
          ctx.traces.length ? h('ol', { class: 'timeline' }, ctx.traces.map(t => h('li', { class: t.event_type === 'error' ? 'error' : '', 'data-trace': t.id },
            h('div', null, h('b', null, t.event_type), ' · ', when(t.created_at), ' · ', groupName(t.consumer_group),
              t.trace_names && t.trace_names.length ? [' · ', t.trace_names.join(', ')] : null),
            h('pre', { class: 'payload short' }, pretty(t.data)))))
            : h('p', { class: 'muted' }, 'No trace recorded for this message.')),
      ];
    });
  },
};

pages.notfound = {
  nav: '',
  mount(root) { root.append(head('Not found'), h('p', null, 'No such page. ', h('a', { href: '#/' }, 'Back to the overview.'))); },
  async refresh() {},
  draw() {},
};
