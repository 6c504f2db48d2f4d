// The sidecar console's page: plain JavaScript, no dependencies, served
// from the binary. Everything that comes from the database or the broker
// is put on the page as text (textContent, text nodes, SVG attributes of
// numbers), never parsed as markup: a dead-lettered body that holds
// <script> or an onerror attribute is shown, not run.
'use strict';
(() => {
  const REQUEST_TIMEOUT_MS = 8000;
  const TOKEN_KEY = 'sidecar-console-token';
  const COLORS = ['#0b5cad', '#cf222e', '#1a7f37', '#9a6700', '#8250df', '#bf3989', '#1b7c83'];

  const $ = (id) => document.getElementById(id);
  // ?tenant=NAME: every request of the page reads that tenant's database
  // (the console refuses a name that is not one of its tenants).
  const TENANT = new URLSearchParams(location.search).get('tenant');

  // el('td', {class: 'num'}, 'text', otherNode): attributes set one by one
  // with setAttribute (never an event handler), children as text nodes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null && !k.startsWith('on')) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c === undefined || c === null) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs) {
    const e = document.createElementNS('http://www.w3.org/2000/svg', tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    return e;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function setStatus(id, text, isError) {
    const s = $(id);
    s.textContent = text || '';
    s.className = 'status' + (isError ? ' error' : '');
  }

  function token() { return sessionStorage.getItem(TOKEN_KEY) || ''; }

  // One request with a time bound: a server that does not answer shows as
  // such instead of a page that waits. Resolves to {status, body}; rejects
  // with an Error whose message says what happened.
  async function api(path, options) {
    const ctl = new AbortController();
    const timer = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
    if (TENANT !== null && path.startsWith('/api/')) {
      path += (path.includes('?') ? '&' : '?') + 'tenant=' + encodeURIComponent(TENANT);
    }
    try {
      const r = await fetch(path, Object.assign({signal: ctl.signal, credentials: 'same-origin',
                                                 cache: 'no-store'}, options || {}));
      let body = null;
      try { body = await r.json(); } catch (e) { body = null; }
      if (!r.ok && !(body && typeof body === 'object')) {
        throw new Error(`HTTP ${r.status}`);
      }
      return {status: r.status, body};
    } catch (e) {
      if (e.name === 'AbortError') throw new Error(`no answer within ${REQUEST_TIMEOUT_MS / 1000} s`);
      throw e;
    } finally {
      clearTimeout(timer);
    }
  }

  async function getJson(path) {
    const r = await api(path);
    if (r.status >= 400) throw new Error(r.body && r.body.error ? r.body.error : `HTTP ${r.status}`);
    return r.body;
  }

  async function post(path, payload) {
    return api(path, {method: 'POST', headers: {'Content-Type': 'application/json',
                                                'Authorization': 'Bearer ' + token()},
                      body: JSON.stringify(payload)});
  }

  // ---- formatting --------------------------------------------------------

  function fmtCount(c) {
    if (!c || c.n === null || c.n === undefined) return '—';
    if (c.capped) return '> ' + Number(c.n - 1).toLocaleString('en');
    return (c.exact ? '' : '≈ ') + Number(c.n).toLocaleString('en');
  }

  function fmtNum(v, digits) {
    if (v === null || v === undefined) return '—';
    return Number(v).toLocaleString('en', {maximumFractionDigits: digits === undefined ? 0 : digits});
  }

  function fmtAge(s) {
    if (s === null || s === undefined) return '—';
    if (s < 60) return `${s.toFixed(1)} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min ${Math.floor(s % 60)} s`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  function fmtTime(ms) {
    return ms ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—';
  }

  function logAction(text) {
    const log = $('action-log');
    log.textContent = `${new Date().toISOString()}  ${text}\n` + log.textContent;
  }

  // ---- charts --------------------------------------------------------------

  // Draws series ([{name, values}]) against times t (ms) in an SVG: one
  // polyline per series, its points numbers only; the axis labels as text.
  function drawChart(svgEl, t, series, unit) {
    clear(svgEl);
    const W = 600, H = 160, L = 48, R = 8, T = 8, B = 20;
    let max = 0;
    for (const s of series) for (const v of s.values) if (v !== null && v > max) max = v;
    max = max > 0 ? max * 1.1 : 1;
    svgEl.append(svg('line', {x1: L, y1: H - B, x2: W - R, y2: H - B, class: 'axis'}));
    svgEl.append(svg('line', {x1: L, y1: T, x2: L, y2: H - B, class: 'axis'}));
    const top = svg('text', {x: 2, y: T + 10, class: 'label'});
    top.textContent = fmtNum(max, max < 10 ? 1 : 0) + (unit ? ' ' + unit : '');
    svgEl.append(top);
    const zero = svg('text', {x: 2, y: H - B, class: 'label'});
    zero.textContent = '0';
    svgEl.append(zero);
    if (!t.length) {
      const none = svg('text', {x: L + 10, y: H / 2, class: 'label'});
      none.textContent = 'no samples yet';
      svgEl.append(none);
      return;
    }
    const t0 = t[0], t1 = t[t.length - 1], span = Math.max(t1 - t0, 1);
    const first = svg('text', {x: L, y: H - 4, class: 'label'});
    first.textContent = fmtTime(t0).slice(11);
    const last = svg('text', {x: W - R - 64, y: H - 4, class: 'label'});
    last.textContent = fmtTime(t1).slice(11);
    svgEl.append(first, last);
    series.forEach((s, i) => {
      const pts = [];
      s.values.forEach((v, k) => {
        if (v === null || v === undefined) return;
        const x = L + ((t[k] - t0) / span) * (W - L - R);
        const y = H - B - (v / max) * (H - B - T);
        pts.push(`${x.toFixed(1)},${y.toFixed(1)}`);
      });
      if (pts.length === 1) pts.push(pts[0]);
      svgEl.append(svg('polyline', {points: pts.join(' '), stroke: COLORS[i % COLORS.length],
                                     'data-series': i}));
    });
  }

  function legend(id, names) {
    const box = $(id);
    clear(box);
    names.forEach((n, i) => {
      const s = el('span', {}, n);
      s.style.setProperty('--swatch', COLORS[i % COLORS.length]);
      box.append(s);
    });
  }

  // ---- overview ------------------------------------------------------------

  let overview = null;
  let sampleMs = 10000;

  function serverBadge(label, s) {
    let text = `${label}: ${s.state}`;
    if (s.state === 'stalled') text = `${label}: not answering for ${s.busy_s.toFixed(0)} s`;
    else if (s.state === 'error') text = `${label}: ${s.error}`;
    else if (s.state === 'unknown') text = `${label}: waiting for the first sample`;
    const b = el('span', {class: 'badge ' + s.state, title: s.endpoint, 'data-server': label,
                          'data-state': s.state}, text);
    return b;
  }

  function renderOverview(o) {
    overview = o;
    sampleMs = o.sample_ms || sampleMs;
    const servers = $('servers');
    clear(servers);
    servers.append(serverBadge('database', o.database), serverBadge('broker', o.broker));
    $('mode').textContent = o.read_only
      ? 'read-only (console.token_file is not set)'
      : 'actions need a bearer token';
    $('actions-note').textContent = o.read_only
      ? 'This console is read-only: console.token_file is not set in its config.'
      : 'Replays and setting FAILED rows PENDING need one of the tokens of console.token_file. '
        + 'The token stays in this tab only (sessionStorage).';
    for (const b of document.querySelectorAll('button.action')) b.disabled = o.read_only;
    // `dlq replay --all` is every tenant's: not offered while one is chosen.
    const all = $('dlq-replay-all');
    if (TENANT !== null) {
      all.disabled = true;
      all.title = "Replay all replays every tenant's dead letters of the consumer: choose every tenant to use it";
    }

    const cards = $('outbox-cards');
    clear(cards);
    for (const st of ['PENDING', 'PUBLISHING', 'PUBLISHED', 'FAILED']) {
      const c = o.outbox.counts[st];
      const card = el('div', {class: 'card' + (st === 'FAILED' && c && c.n > 0 ? ' alert' : ''),
                              'data-status': st},
                      el('div', {class: 'n', 'data-count': c && c.n !== null ? c.n : ''}, fmtCount(c)),
                      el('div', {class: 'label'}, st));
      cards.append(card);
    }
    cards.append(el('div', {class: 'card', 'data-metric': 'oldest-pending'},
                    el('div', {class: 'n'}, fmtAge(o.outbox.oldest_pending_age_s)),
                    el('div', {class: 'label'}, 'oldest PENDING')));
    cards.append(el('div', {class: 'card' + (o.outbox.expired_leases > 0 ? ' alert' : '')},
                    el('div', {class: 'n'}, fmtNum(o.outbox.expired_leases)),
                    el('div', {class: 'label'}, 'expired leases')));
    cards.append(el('div', {class: 'card'},
                    el('div', {class: 'n'}, fmtNum(o.outbox.published_per_min, 1)),
                    el('div', {class: 'label'}, 'published / min')));

    const tbody = document.querySelector('#consumer-table tbody');
    clear(tbody);
    const sel = $('dlq-consumer');
    const chosen = sel.value;
    if (sel.options.length !== o.consumers.length) {
      clear(sel);
      for (const c of o.consumers) sel.append(el('option', {value: c.name}, c.name));
      if (chosen) sel.value = chosen;
    }
    for (const c of o.consumers) {
      const row = el('tr', {'data-consumer': c.name},
        el('td', {}, c.name),
        el('td', {class: 'mono'}, c.queue),
        el('td', {class: 'num'}, fmtNum(c.queue_messages)),
        el('td', {class: 'num'}, fmtNum(c.queue_consumers)),
        el('td', {class: 'num'}, fmtNum(c.consumed_per_min, 1)),
        el('td', {class: 'num', 'data-dlq': c.dlq_messages === null ? '' : c.dlq_messages},
           fmtNum(c.dlq_messages)));
      if (c.queue_error) row.append(el('td', {class: 'no'}, c.queue_error));
      tbody.append(row);
    }
    renderTenants(o);
    $('updated').textContent = 'updated ' + fmtTime(o.time);
  }

  function renderTenants(o) {
    const pick = $('tenant-pick'), sel = $('tenant-select');
    const names = o.tenants_list || [];
    pick.hidden = names.length === 0;
    // With tenants.discover the names change between two overviews: a
    // tenant found joins the selector, one gone leaves it.
    const shown = Array.from(sel.options).slice(1).map((op) => op.value);
    if (shown.join('\n') !== names.join('\n')) {
      while (sel.options.length > 1) sel.remove(1);
      for (const n of names) sel.append(el('option', {value: n}, n));
    }
    sel.value = o.tenant || '';
    const disc = o.tenants_discover;
    const found = !disc ? '' : !disc.listed ? ', not listed yet' : ', found on the server';
    const failing = disc && disc.error ? `; listing the tenants fails: ${disc.error}` : '';
    $('scope').textContent = (o.scope === 'tenant' ? `of tenant ${o.tenant}`
      : o.scope === 'totals' ? `of every tenant (${names.length}${found})` : '') + failing;
    $('lists-scope').textContent = o.scope === 'tenant'
      ? `The lists, Find and the actions below read tenant ${o.tenant}'s database.`
      : o.scope === 'totals' ? "The lists and Find below read mysql.url's database: choose a tenant to read its own." : '';
    const block = $('tenants-block');
    block.hidden = !o.tenants;
    if (!o.tenants) return;
    const tbody = document.querySelector('#tenant-table tbody');
    clear(tbody);
    for (const r of o.tenants.rows) {
      const pending = r.counts.PENDING, failed = r.counts.FAILED;
      const db = r.state === 'ok' ? 'ok' : r.state === 'unknown' ? 'waiting for the first sample'
        : `unreachable (${r.error_class || 'error'}): ${r.error || ''}`;
      // An unreachable tenant keeps its last counts, greyed: they are old.
      const num = r.state === 'ok' ? 'num' : 'num muted';
      const old = r.state === 'ok' ? undefined : 'last known, ' + fmtTime(r.last_ok);
      tbody.append(el('tr', {'data-tenant': r.tenant, 'data-state': r.state},
        el('td', {}, el('a', {href: '?tenant=' + encodeURIComponent(r.tenant)}, r.tenant)),
        el('td', {class: num, title: old, 'data-pending': pending.n === null ? '' : pending.n}, fmtCount(pending)),
        el('td', {class: num, title: old}, fmtAge(r.oldest_pending_age_s)),
        el('td', {class: num, title: old, 'data-failed': failed.n === null ? '' : failed.n}, fmtCount(failed)),
        el('td', {class: r.state === 'ok' ? '' : 'no'}, db)));
    }
    const t = o.tenants.total, foot = document.querySelector('#tenant-table tfoot');
    clear(foot);
    foot.append(el('tr', {'data-total': '1'},
      el('td', {}, `total of ${t.tenants}`),
      el('td', {class: 'num', 'data-pending': t.counts.PENDING.n}, fmtCount(t.counts.PENDING)),
      el('td', {class: 'num'}, fmtAge(t.oldest_pending_age_s)),
      el('td', {class: 'num', 'data-failed': t.counts.FAILED.n}, fmtCount(t.counts.FAILED)),
      el('td', {}, t.unreachable ? `${t.unreachable} unreachable (not in the total)` : '')));
    $('tenants-more').textContent = o.tenants.more > 0 ? `${o.tenants.more} more` : '';
  }

  function renderHistory(h) {
    const db = h.database || {t: []}, br = h.broker || {t: []};
    drawChart($('chart-backlog'), db.t, [{name: 'backlog', values: db.backlog || []}], 'rows');
    drawChart($('chart-publish'), db.t, [{name: 'published', values: db.published_per_min || []}], '/min');
    const names = overview ? overview.consumers.map((c) => c.name) : [];
    drawChart($('chart-consumed'), db.t,
              names.map((n) => ({name: n, values: db['consumed_per_min:' + n] || []})), '/min');
    drawChart($('chart-dlq'), br.t, names.map((n) => ({name: n, values: br['dlq_messages:' + n] || []})), '');
    legend('chart-consumed-legend', names);
    legend('chart-dlq-legend', names);
  }

  async function refreshOverview() {
    try {
      renderOverview(await getJson('/api/overview'));
      renderHistory(await getJson('/api/history'));
    } catch (e) {
      const servers = $('servers');
      clear(servers);
      servers.append(el('span', {class: 'badge error'}, 'console: ' + e.message));
    }
  }

  // ---- outbox lists ----------------------------------------------------------

  const cursors = {PUBLISHING: [null], FAILED: [null]};

  function eventLink(id) {
    const b = el('button', {type: 'button', class: 'mono link', title: 'look this event up'}, id);
    b.addEventListener('click', () => { $('event-id').value = id; findEvent(id); });
    return b;
  }

  async function loadOutbox(status, page) {
    const key = status.toLowerCase();
    const cur = cursors[status][page] || null;
    setStatus(`${key}-status`, 'loading…');
    let r;
    try {
      r = await getJson(`/api/outbox?status=${status}&limit=50` + (cur ? '&after=' + encodeURIComponent(cur) : ''));
    } catch (e) {
      setStatus(`${key}-status`, e.message, true);
      return;
    }
    const tbody = document.querySelector(`#${key} tbody`);
    clear(tbody);
    for (const row of r.rows) {
      const agg = `${row.aggregate_type} ${row.aggregate_id}`;
      if (status === 'PUBLISHING') {
        tbody.append(el('tr', {'data-event': row.event_id},
          el('td', {}, eventLink(row.event_id)), el('td', {}, row.event_type), el('td', {}, agg),
          el('td', {class: 'mono'}, row.lease_owner), el('td', {class: 'mono'}, row.lease_until),
          el('td', {class: 'num'}, row.publish_attempts)));
      } else {
        const btn = el('button', {type: 'button', class: 'action', 'data-pending': row.event_id}, 'Set PENDING');
        btn.disabled = !overview || overview.read_only;
        btn.addEventListener('click', () => setPending(row.event_id));
        tbody.append(el('tr', {'data-event': row.event_id},
          el('td', {}, eventLink(row.event_id)), el('td', {}, row.event_type), el('td', {}, agg),
          el('td', {class: 'mono'}, row.created_at), el('td', {}, row.reason),
          el('td', {}, el('pre', {class: 'body'}, row.payload + (row.payload_truncated ? ' …' : ''))),
          el('td', {}, btn)));
      }
    }
    cursors[status] = cursors[status].slice(0, page + 1);
    if (r.next) cursors[status][page + 1] = r.next;
    $(`${key}-next`).disabled = !r.next;
    $(`${key}-next`).dataset.page = page + 1;
    setStatus(`${key}-status`, r.rows.length ? `page ${page + 1}: ${r.rows.length} row(s)` : 'none');
  }

  // ---- dead letters ---------------------------------------------------------

  let dlqOffset = 0;
  const DLQ_PAGE = 20;

  async function loadDlq(offset) {
    const consumer = $('dlq-consumer').value;
    if (!consumer) return;
    dlqOffset = Math.max(0, offset);
    setStatus('dlq-status', 'loading…');
    let r;
    try {
      r = await getJson(`/api/dlq?consumer=${encodeURIComponent(consumer)}&offset=${dlqOffset}&limit=${DLQ_PAGE}`);
    } catch (e) {
      setStatus('dlq-status', e.message, true);
      return;
    }
    const tbody = document.querySelector('#dlq tbody');
    clear(tbody);
    for (const m of r.messages) {
      const btn = el('button', {type: 'button', class: 'action', 'data-replay': m.event_id || ''}, 'Replay');
      btn.disabled = !overview || overview.read_only || !m.event_id;
      btn.addEventListener('click', () => replay(consumer, m.event_id));
      tbody.append(el('tr', {'data-event': m.event_id || ''},
        el('td', {class: 'num'}, m.position + 1),
        el('td', {class: 'mono'}, m.event_id),
        el('td', {}, m.reason),
        el('td', {class: 'num'}, m.attempts),
        el('td', {class: 'mono'}, m.failed_at),
        el('td', {}, el('pre', {class: 'body', 'data-body': ''},
                        m.body + (m.body_truncated ? ` … (${m.body_bytes} bytes)` : ''))),
        el('td', {}, btn)));
    }
    const shown = r.messages.length;
    // With a tenant: only its dead letters (x-sidecar-tenant), counted
    // among the first r.looked_at of the queue; the depth is every tenant's.
    if (r.tenant) {
      setStatus('dlq-status', shown
        ? `${r.queue}: tenant ${r.tenant}'s dead letters ${dlqOffset + 1}–${dlqOffset + shown}${r.more ? ' (more follow)' : ''}, among the first ${r.looked_at} of ${r.depth} (every tenant's)`
        : `${r.queue}: none of tenant ${r.tenant}'s${dlqOffset ? ' past ' + dlqOffset : ''} among the first ${r.looked_at} of ${r.depth} (every tenant's)`);
    } else {
      setStatus('dlq-status', shown
        ? `${r.queue}: ${dlqOffset + 1}–${dlqOffset + shown} of ${r.depth}`
        : `${r.queue}: empty (${r.depth} messages)`);
    }
    $('dlq-prev').disabled = dlqOffset === 0;
    $('dlq-next').disabled = r.tenant ? !r.more : dlqOffset + shown >= Math.min(r.depth, r.window);
  }

  // ---- find ----------------------------------------------------------------

  function kv(rows) {
    const t = el('table', {class: 'kv'});
    for (const [k, v] of rows) t.append(el('tr', {}, el('th', {}, k), el('td', {class: 'mono'}, v === null || v === undefined ? '—' : v)));
    return t;
  }

  async function findEvent(id) {
    const out = $('find-result');
    clear(out);
    setStatus('find-status', 'looking…');
    let r;
    try {
      r = await getJson('/api/event?id=' + encodeURIComponent(id));
    } catch (e) {
      setStatus('find-status', e.message, true);
      return;
    }
    setStatus('find-status', r.known ? `event ${r.event_id}` : (r.note || 'nothing is known of this id in the database'));
    if (r.uuid) {
      const o = r.outbox;
      out.append(el('h3', {}, 'Outbox'));
      out.append(o ? kv([['status', o.status], ['type', `${o.event_type} v${o.event_version}`],
                         ['aggregate', `${o.aggregate_type} ${o.aggregate_id}`], ['created', o.created_at],
                         ['published', o.published_at], ['lease', o.lease_owner ? `${o.lease_owner} until ${o.lease_until}` : null],
                         ['publish attempts', o.publish_attempts], ['payload', o.payload]])
                   : el('p', {}, 'no outbox row (not produced here, or purged)'));
      out.append(el('h3', {}, 'Consumed'));
      const rows = Object.entries(r.consumed || {}).map(([name, at]) =>
        [name, at ? `consumed at ${at}` : 'not consumed']);
      out.append(rows.length ? kv(rows) : el('p', {}, 'no consumer known'));
      // each consumer's effect, where its inspect_effects names it
      for (const x of r.effects || []) {
        out.append(el('h3', {}, `Effect: ${x.table} (${x.consumer})`));
        if (x.error) out.append(el('p', {class: 'no'}, `not read: mysql error ${x.error.code}: ${x.error.message}`));
        else if (!x.rows.length) out.append(el('p', {}, `no ${x.table} row`));
        for (const row of x.rows || []) out.append(kv(Object.entries(row).map(([k, v]) => [k, v === null ? 'NULL' : String(v)])));
        if (x.more) out.append(el('p', {class: 'muted'}, 'more rows than those shown'));
      }
    }
    const dl = el('div', {}, el('h3', {}, 'In dead-letter queues'), el('p', {class: 'muted'}, 'looking…'));
    out.append(dl);
    try {
      const f = await getJson('/api/dlq/find?id=' + encodeURIComponent(id));
      dl.removeChild(dl.lastChild);
      if (!f.hits.length) {
        dl.append(el('p', {}, f.tenant
          ? `not among tenant ${f.tenant}'s in the first ${f.window} dead letters of any consumer`
          : `not among the first ${f.window} dead letters of any consumer`));
      }
      for (const m of f.hits) {
        dl.append(kv([['consumer', m.dlq_consumer], ['position', m.position + 1], ['reason', m.reason],
                      ['attempts', m.attempts], ['failed at', m.failed_at], ['body', m.body]]));
      }
      for (const e of f.errors) dl.append(el('p', {class: 'no'}, e));
    } catch (e) {
      dl.removeChild(dl.lastChild);
      dl.append(el('p', {class: 'no'}, e.message));
    }
  }

  async function findAggregate(type, id, after) {
    const out = $('find-result');
    if (!after) clear(out);
    setStatus('find-status', 'looking…');
    let r;
    try {
      r = await getJson(`/api/aggregate?type=${encodeURIComponent(type)}&id=${encodeURIComponent(id)}&limit=100`
                        + (after ? '&after=' + encodeURIComponent(after) : ''));
    } catch (e) {
      setStatus('find-status', e.message, true);
      return;
    }
    let table = out.querySelector('table.aggregate');
    if (!table) {
      const head = el('tr', {}, el('th', {}, 'created'), el('th', {}, 'event id'), el('th', {}, 'type'),
                      el('th', {}, 'status'));
      for (const c of r.consumers) head.append(el('th', {}, c));
      table = el('table', {class: 'aggregate'}, el('thead', {}, head), el('tbody', {}));
      out.append(el('h3', {}, `${type} ${id}`), table);
    }
    const tbody = table.querySelector('tbody');
    for (const ev of r.events) {
      const row = el('tr', {'data-event': ev.event_id},
        el('td', {class: 'mono'}, ev.created_at), el('td', {}, eventLink(ev.event_id)),
        el('td', {}, `${ev.event_type} v${ev.event_version}`),
        el('td', {class: 'state-' + ev.status}, ev.status));
      for (const c of r.consumers) {
        const at = ev.consumed[c];
        row.append(el('td', {class: at ? 'yes' : 'no', title: at || ''}, at ? 'consumed' : 'not consumed'));
      }
      tbody.append(row);
    }
    const old = out.querySelector('button.more');
    if (old) old.remove();
    if (r.next) {
      const more = el('button', {type: 'button', class: 'more'}, 'More events');
      more.addEventListener('click', () => findAggregate(type, id, r.next));
      out.append(more);
    }
    const n = tbody.children.length;
    setStatus('find-status', n ? `${n} event(s) of ${type} ${id}${r.next ? ' so far' : ''}` : `no events of ${type} ${id}`);
  }

  // ---- actions ---------------------------------------------------------------

  async function replay(consumer, eventId) {
    const what = eventId ? `event ${eventId}` : `every dead letter of ${consumer}`;
    if (!token()) { logAction(`replay of ${what}: no token (enter one under Actions)`); return; }
    logAction(`replaying ${what}…`);
    try {
      const r = await post('/api/dlq/replay', eventId ? {consumer, event_id: eventId} : {consumer, all: true});
      const b = r.body || {};
      logAction(r.status === 200
        ? `replay of ${what} by ${b.by}: ${b.ok ? 'done' : 'failed'} (exit ${b.exit_status})\n${b.output || ''}`
        : `replay of ${what} refused (${r.status}): ${b.error || ''}`);
    } catch (e) {
      logAction(`replay of ${what}: ${e.message}`);
    }
    loadDlq(dlqOffset);
    refreshOverview();
  }

  async function setPending(eventId) {
    if (!token()) { logAction(`set ${eventId} PENDING: no token (enter one under Actions)`); return; }
    try {
      const r = await post('/api/outbox/pending', {event_id: eventId});
      const b = r.body || {};
      logAction(r.status === 200 ? `${eventId} set PENDING by ${b.by}`
                                 : `set ${eventId} PENDING refused (${r.status}): ${b.error || ''}`);
    } catch (e) {
      logAction(`set ${eventId} PENDING: ${e.message}`);
    }
    loadOutbox('FAILED', 0);
    refreshOverview();
  }

  // ---- wiring -----------------------------------------------------------------

  function wire() {
    $('tenant-select').addEventListener('change', (e) => {
      location.search = e.target.value ? '?tenant=' + encodeURIComponent(e.target.value) : '';
    });
    $('publishing-refresh').addEventListener('click', () => loadOutbox('PUBLISHING', 0));
    $('publishing-first').addEventListener('click', () => loadOutbox('PUBLISHING', 0));
    $('publishing-next').addEventListener('click', (e) => loadOutbox('PUBLISHING', Number(e.target.dataset.page || 1)));
    $('failed-refresh').addEventListener('click', () => loadOutbox('FAILED', 0));
    $('failed-first').addEventListener('click', () => loadOutbox('FAILED', 0));
    $('failed-next').addEventListener('click', (e) => loadOutbox('FAILED', Number(e.target.dataset.page || 1)));
    $('dlq-refresh').addEventListener('click', () => loadDlq(dlqOffset));
    $('dlq-prev').addEventListener('click', () => loadDlq(dlqOffset - DLQ_PAGE));
    $('dlq-next').addEventListener('click', () => loadDlq(dlqOffset + DLQ_PAGE));
    $('dlq-consumer').addEventListener('change', () => loadDlq(0));
    $('dlq-replay-all').addEventListener('click', () => replay($('dlq-consumer').value, null));
    $('event-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const id = $('event-id').value.trim();
      if (id) findEvent(id);
    });
    $('aggregate-form').addEventListener('submit', (e) => {
      e.preventDefault();
      const type = $('aggregate-type').value.trim(), id = $('aggregate-id').value.trim();
      if (type && id) findAggregate(type, id, null);
    });
    $('token-form').addEventListener('submit', (e) => {
      e.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $('token').value.trim());
      $('token').value = '';
      logAction('token set for this tab');
    });
    $('token-forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      logAction('token forgotten');
    });
  }

  async function start() {
    wire();
    await refreshOverview();
    loadOutbox('PUBLISHING', 0);
    loadOutbox('FAILED', 0);
    loadDlq(0);
    const tick = async () => {
      await refreshOverview();
      setTimeout(tick, Math.max(2000, sampleMs));
    };
    setTimeout(tick, Math.max(2000, sampleMs));
    document.body.dataset.ready = '1';
  }

  document.addEventListener('DOMContentLoaded', start);
})();
