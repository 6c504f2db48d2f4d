// Drives the console's page in headless Chromium (Debian's /usr/bin/chromium)
// through puppeteer-core, as an operator would, for test_console.py. Reads
// the plan (a JSON file, argv[2]); prints one JSON line per check:
// {"ok": bool, "label": "...", "detail": "..."}; saves screenshots.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const puppeteer = require('puppeteer-core');

const plan = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
let failed = 0;

function check(ok, label, detail) {
  if (!ok) failed++;
  process.stdout.write(JSON.stringify({ok: !!ok, label, detail: detail === undefined ? '' : String(detail)}) + '\n');
}

async function waitFor(page, fn, arg, timeoutMs) {
  try {
    await page.waitForFunction(fn, {timeout: timeoutMs, polling: 200}, arg);
    return true;
  } catch (e) {
    return false;
  }
}

async function shot(page, name) {
  fs.mkdirSync(plan.screenshots, {recursive: true});
  const file = path.join(plan.screenshots, name);
  await page.screenshot({path: file, fullPage: true});
  check(fs.existsSync(file) && fs.statSync(file).size > 10000, `screenshot ${name} saved`, file);
}

async function mainPlan(page) {
  const t0 = Date.now();
  await page.goto(plan.url, {waitUntil: 'domcontentloaded'});
  check(await waitFor(page, () => document.body.dataset.ready === '1', null, 10000),
        'the page loads and renders the overview', `${Date.now() - t0} ms`);

  // The counts the database holds (the test took them with nothing running).
  const counted = await waitFor(page, (want) => Object.entries(want).every(([st, n]) => {
    const e = document.querySelector(`#outbox-cards [data-status="${st}"] .n`);
    return e && e.dataset.count === String(n);
  }), plan.counts, 15000);
  const shown = await page.evaluate(() => Object.fromEntries(
    [...document.querySelectorAll('#outbox-cards [data-status]')].map((c) =>
      [c.dataset.status, c.querySelector('.n').dataset.count])));
  check(counted, 'the page shows the outbox counts the database holds',
        `shown ${JSON.stringify(shown)}, database ${JSON.stringify(plan.counts)}`);
  const dlqShown = await waitFor(page, (want) => {
    const c = document.querySelector(`#consumer-table tr[data-consumer="${want.consumer}"] td[data-dlq]`);
    return c && c.dataset.dlq === String(want.n);
  }, {consumer: plan.consumer, n: plan.dlq_depth}, 15000);
  check(dlqShown, `the consumer table shows the DLQ depth (${plan.dlq_depth})`);

  // Charts: at least two samples drawn as polylines.
  for (const id of ['chart-backlog', 'chart-publish', 'chart-consumed', 'chart-dlq']) {
    const drawn = await waitFor(page, (sel) => {
      const p = document.querySelector(`#${sel} polyline`);
      return p && p.getAttribute('points').trim().split(/\s+/).length >= 2;
    }, id, 20000);
    const pts = await page.evaluate((sel) => {
      const p = document.querySelector(`#${sel} polyline`);
      return p ? p.getAttribute('points') : null;
    }, id);
    check(drawn, `chart ${id} draws its samples`, pts);
  }

  // Dead letters, hostile bodies among them, shown as text.
  check(await waitFor(page, (n) => document.querySelectorAll('#dlq tbody tr').length >= n, plan.dlq_depth, 15000),
        'the dead-letter table lists the messages');
  const texts = await page.evaluate(() => document.body.innerText);
  for (const h of plan.hostile) check(texts.includes(h), `hostile text shown as text: ${h}`);
  check(await waitFor(page, () => document.querySelectorAll('#failed tbody tr').length >= 2, null, 10000),
        'the FAILED table lists the rows');
  const reasons = await page.evaluate(() => [...document.querySelectorAll('#failed tbody tr')].map((r) => r.innerText));
  check(reasons.some((r) => r.includes('aggregate_type is not a URI-reference')),
        'a FAILED row shows its reason', JSON.stringify(reasons));
  const probe = await page.evaluate(() => [typeof window.__probe, document.querySelectorAll('img').length,
                                           document.querySelectorAll('script').length]);
  check(probe[0] === 'undefined' && probe[1] === 0 && probe[2] === 1,
        'hostile payloads execute nothing (probe unset, no img, one script)', JSON.stringify(probe));
  await shot(page, 'console-overview.png');

  // An action without the token is refused.
  const noToken = await page.evaluate(async (c) => {
    const r = await fetch('/api/dlq/replay', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                               body: JSON.stringify({consumer: c, all: true})});
    return r.status;
  }, plan.consumer);
  check(noToken === 401, 'a replay without the token is refused (401)', noToken);
  const badToken = await page.evaluate(async (c) => {
    const r = await fetch('/api/outbox/pending', {method: 'POST', headers: {'Content-Type': 'application/json',
      'Authorization': 'Bearer not-the-token-0000000000'}, body: JSON.stringify({event_id: c})});
    return r.status;
  }, plan.pending_event_id);
  check(badToken === 401, 'an action with a wrong token is refused (401)', badToken);

  // With the token: replay one dead letter, set a FAILED row PENDING.
  await page.type('#token', plan.token);
  await page.click('#token-form button[type=submit]');
  await page.click(`button[data-replay="${plan.replay_event_id}"]`);
  const replayed = await waitFor(page, () => /replay of event .* by \S+: done/.test(document.getElementById('action-log').textContent),
                                 null, 30000);
  check(replayed, 'a replay from the page replays (the command reports done)',
        await page.evaluate(() => document.getElementById('action-log').textContent.slice(0, 800)));
  await page.click(`button[data-pending="${plan.pending_event_id}"]`);
  const pended = await waitFor(page, (id) => document.getElementById('action-log').textContent.includes(`${id} set PENDING by`),
                               plan.pending_event_id, 15000);
  check(pended, 'a FAILED row is set PENDING from the page',
        await page.evaluate(() => document.getElementById('action-log').textContent.slice(0, 800)));

  // Find an event by another spelling of its id, then an aggregate.
  await page.type('#event-id', plan.lookup.query);
  await page.click('#event-form button[type=submit]');
  const found = await waitFor(page, (id) => document.getElementById('find-status').textContent.includes(id),
                              plan.lookup.event_id, 10000);
  check(found, `an event is found by the spelling ${plan.lookup.query}`,
        await page.evaluate(() => document.getElementById('find-result').innerText.slice(0, 400)));
  await page.type('#aggregate-type', plan.aggregate.type);
  await page.type('#aggregate-id', plan.aggregate.id);
  await page.click('#aggregate-form button[type=submit]');
  const agg = await waitFor(page, (n) => document.querySelectorAll('table.aggregate tbody tr').length === n,
                            plan.aggregate.n, 10000);
  const aggText = await page.evaluate(() => {
    const t = document.querySelector('table.aggregate');
    return t ? t.innerText : '';
  });
  check(agg, `an aggregate's ${plan.aggregate.n} events are listed in order`, aggText.slice(0, 600));
  check(aggText.includes('consumed') && aggText.includes('not consumed'),
        'each event shows per consumer whether it was consumed', aggText.slice(0, 600));
  await shot(page, 'console-find.png');
  const probe2 = await page.evaluate(() => typeof window.__probe);
  check(probe2 === 'undefined', 'the probe is still unset at the end', probe2);
}

async function deadPlan(page) {
  const t0 = Date.now();
  await page.goto(plan.url, {waitUntil: 'domcontentloaded'});
  const ready = await waitFor(page, () => document.body.dataset.ready === '1', null, 10000);
  check(ready, 'with a dead database and broker the page still loads', `${Date.now() - t0} ms`);
  const shown = await waitFor(page, () => {
    const d = document.querySelector('[data-server="database"]');
    const b = document.querySelector('[data-server="broker"]');
    return d && b && ['error', 'stalled'].includes(d.dataset.state) && ['error', 'stalled'].includes(b.dataset.state);
  }, null, 20000);
  const badges = await page.evaluate(() => document.getElementById('servers').innerText);
  check(shown, 'the page says the database and the broker do not answer', badges);
  const listErr = await waitFor(page, () => document.getElementById('failed-status').classList.contains('error')
                                && document.getElementById('dlq-status').classList.contains('error'), null, 20000);
  check(listErr, 'the lists say why they are empty instead of loading forever',
        await page.evaluate(() => document.getElementById('failed-status').textContent + ' | ' +
                                  document.getElementById('dlq-status').textContent));
  await shot(page, 'console-dead-servers.png');
}

// Tenants: the selector, the backlog table, one tenant selected, an
// unknown one refused, one whose database is gone shown as unreachable.
async function tenantsPlan(page) {
  await page.goto(plan.url, {waitUntil: 'domcontentloaded'});
  check(await waitFor(page, () => document.body.dataset.ready === '1', null, 10000), 'the page loads with tenants');
  const listed = await waitFor(page, (want) => {
    const opts = [...document.querySelectorAll('#tenant-select option')].map((o) => o.value).filter((v) => v);
    return !document.getElementById('tenant-pick').hidden && JSON.stringify(opts) === JSON.stringify(want);
  }, plan.tenants, 15000);
  check(listed, 'the selector lists every tenant',
        await page.evaluate(() => document.getElementById('tenant-pick').innerText));
  const rows = await waitFor(page, (p) => {
    const a = document.querySelector(`#tenant-table tr[data-tenant="acme"]`);
    const u = document.querySelector(`#tenant-table tr[data-tenant="${p.unreachable}"]`);
    return a && u && a.dataset.state === 'ok' && a.querySelector('[data-pending]').dataset.pending === String(p.acme.PENDING)
      && u.dataset.state === 'unreachable' && /unreachable/.test(u.innerText);
  }, plan, 15000);
  check(rows, `the table: acme with ${plan.acme.PENDING} PENDING, ${plan.unreachable} unreachable`,
        await page.evaluate(() => document.getElementById('tenant-table').innerText));
  await shot(page, 'console-tenants.png');
  await page.select('#tenant-select', 'acme');
  await page.waitForNavigation({waitUntil: 'domcontentloaded'}).catch(() => {});
  const selected = await waitFor(page, (want) => {
    const e = document.querySelector('#outbox-cards [data-status="PENDING"] .n');
    const f = document.querySelector('#outbox-cards [data-status="FAILED"] .n');
    return location.search === '?tenant=acme' && e && e.dataset.count === String(want.PENDING)
      && f && f.dataset.count === String(want.FAILED) && document.getElementById('tenant-select').value === 'acme'
      && document.getElementById('tenants-block').hidden
      && document.getElementById('lists-scope').textContent.includes("tenant acme's database");
  }, plan.acme, 15000);
  check(selected, "choosing acme shows acme's counts, the selector on acme",
        await page.evaluate(() => location.search + ' ' + document.getElementById('outbox-cards').innerText));
  const dlq = await waitFor(page, (want) => {
    const ids = [...document.querySelectorAll('#dlq tbody tr')].map((tr) => tr.dataset.event);
    return JSON.stringify(ids) === JSON.stringify(want)
      && /tenant acme's dead letters 1–3/.test(document.getElementById('dlq-status').textContent)
      && document.getElementById('dlq-replay-all').disabled;
  }, plan.dlq_acme, 15000);
  check(dlq, "with acme chosen the dead letters are acme's only, and replay all is off",
        await page.evaluate(() => document.getElementById('dlq-status').textContent + ' '
          + document.querySelector('#dlq tbody').innerText));
  const r = await page.goto(plan.url + '?tenant=initech', {waitUntil: 'domcontentloaded'});
  const text = await page.evaluate(() => document.body.innerText);
  check(r.status() === 404 && text.includes('not in tenants.list'), 'an unknown tenant gets a 404 page saying why',
        `${r.status()} ${text.slice(0, 200)}`);
}

(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sc-chromium-'));
  const browser = await puppeteer.launch({
    executablePath: plan.chromium,
    headless: true,
    // As root, with no network but loopback: no sandbox, none of
    // Chromium's own connections (they are refused here).
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-dev-shm-usage', `--user-data-dir=${dir}`],
  });
  try {
    const page = await browser.newPage();
    await page.setViewport({width: 1400, height: 1000});
    const problems = [];
    page.on('pageerror', (e) => problems.push('pageerror: ' + e.message));
    page.on('console', (m) => { if (m.type() === 'error') problems.push('console: ' + m.text()); });
    if (plan.mode === 'dead') await deadPlan(page);
    else if (plan.mode === 'tenants') await tenantsPlan(page);
    else await mainPlan(page);
    // Errors the page logged: a CSP violation would be one (a 4xx/5xx
    // answer Chromium logs as a failed resource is expected in these tests).
    const csp = problems.filter((p) => /Content Security Policy|pageerror/.test(p));
    check(csp.length === 0, 'no script error and no CSP violation on the page', csp.join('\n'));
  } catch (e) {
    check(false, 'the browser run finished', e.stack);
  } finally {
    await browser.close();
    fs.rmSync(dir, {recursive: true, force: true});
  }
  process.exit(failed ? 1 : 0);
})();
