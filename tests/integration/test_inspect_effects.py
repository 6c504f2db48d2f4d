"""`sidecar inspect` shows each consumer's effect where its
`consumers[].inspect_effects` says it is, and nothing for a consumer without
it: the sample handler's notification_job row, a table of the test's own with
another event-id column (integers, text, NULL, more rows than are shown), a
table that is not there and one the user may not read (each reported, exit
1). A name that is not a plain identifier is refused when the config is
loaded, by its key, before any query."""
import re
import uuid

from harness import *

NJ = {"table": "notification_job", "columns": ["order_id", "source_version", "status", "created_at"]}
sc = Sidecar(consumer_extra={"inspect_effects": [NJ]})
ok(sc.start(), "sidecar started")
clear_outbox()
eid = insert_outbox(1, status="PUBLISHED")[0]
publish_events(sc.exchange, [(eid, "5200")])
ok(wait_until(lambda: [l for l in sc.outcomes("applied") if l.get("event_id") == eid], timeout=30),
   "an event consumed")
is_eq(sc.stop(), 0, "clean stop")
admin_url = os.environ["SC_TEST_MYSQL_ADMIN_URL"]
cfg = dict(sc.config, mysql={"url": admin_url})


def inspect_json(config, event_id):
    rc, out = run_sidecar_cmd(["inspect", event_id, "--json"], config)
    try:
        return rc, json.JSONDecoder().raw_decode(out[out.index("{"):])[0], out
    except ValueError:
        return rc, {}, out


# --- the sample handler's effect, through the config ------------------------
rc, j, out = inspect_json(cfg, eid)
is_eq(rc, 0, "--json: exit 0")
eff = j.get("effects") or [{}]
ok(len(j.get("effects", [])) == 1 and eff[0].get("consumer") == sc.name
   and eff[0].get("table") == "notification_job" and eff[0].get("more") is False,
   "--json: one effect entry, named by consumer and table", detail=out)
row = (eff[0].get("rows") or [{}])[0]
ok(list(row) == NJ["columns"] and row["order_id"] == 5200 and row["source_version"] == 1
   and row["status"] == "PENDING" and re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d", row["created_at"] or ""),
   "--json: the row's columns in config order, integers as integers", detail=out)
ok("notification_job" not in j, "--json: no hard-coded notification_job key")
rc, out = run_sidecar_cmd(["inspect", eid], cfg)
ok(rc == 0 and f"effect:   notification_job ({sc.name}): order_id 5200, source_version 1, status PENDING, created_at "
   in out, "text: the effect line", detail=out)
other = str(uuid.uuid4())
query("INSERT INTO consumed_event (consumer_name, event_id, consumed_at) "
       "VALUES (%s, %s, UTC_TIMESTAMP(6))", (sc.name, other))
rc, out = run_sidecar_cmd(["inspect", other], cfg)
ok(rc == 0 and f"effect:   no notification_job row ({sc.name})" in out,
   "text: a consumed event without an effect row says so", detail=out)

# --- a consumer without inspect_effects shows no effect section ---------------
plain_cfg = json.loads(json.dumps(cfg))
del plain_cfg["consumers"][0]["inspect_effects"]
rc, j, out = inspect_json(plain_cfg, eid)
ok(rc == 0 and j.get("effects") == [], "--json without inspect_effects: effects is empty", detail=out)
rc, out = run_sidecar_cmd(["inspect", eid], plain_cfg)
ok(rc == 0 and "effect:" not in out and "consumed: by " + sc.name in out,
   "text without inspect_effects: no effect line, the rest as before", detail=out)

# --- a table of its own: another id column, types, NULL, many rows -------------
tbl = "t_effect_" + suffix()
query(f"CREATE TABLE {tbl} (n BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, ev CHAR(36) NOT NULL, "
      f"note VARCHAR(40) NULL, amount DECIMAL(10,2) NULL, KEY (ev))")
query(f"GRANT SELECT ON app.{tbl} TO 'sidecar_admin'@'%'")
many = str(uuid.uuid4())
query(f"INSERT INTO {tbl} (ev, note, amount) VALUES (%s, 'first', 12.50), (%s, NULL, NULL)", (eid, eid))
for i in range(25):
    query(f"INSERT INTO {tbl} (ev, note) VALUES (%s, %s)", (many, f"r{i}"))
mine = {"table": tbl, "event_id_column": "ev", "columns": ["n", "note", "amount"]}
cfg2 = json.loads(json.dumps(cfg))
cfg2["consumers"].append({"name": "second-" + suffix(), "handler": HANDLER, "inspect_effects": [mine]})
rc, j, out = inspect_json(cfg2, eid)
effs = j.get("effects", [])
ok(rc == 0 and [e.get("table") for e in effs] == ["notification_job", tbl],
   "two consumers: an entry each, in config order", detail=out)
rows = effs[1].get("rows", []) if len(effs) > 1 else []
ok(len(rows) == 2 and isinstance(rows[0]["n"], int) and rows[0]["note"] == "first"
   and rows[0]["amount"] == "12.50" and rows[1]["note"] is None and rows[1]["amount"] is None,
   "the event-id column named ev; BIGINT an integer, DECIMAL the server's text, NULL null", detail=out)
rc, j, out = inspect_json(cfg2, many)
e = next((x for x in j.get("effects", []) if x.get("table") == tbl), {})
ok(len(e.get("rows", [])) == 20 and e.get("more") is True, "25 rows: 20 shown, more: true", detail=out)
rc, out = run_sidecar_cmd(["inspect", many], cfg2)
ok(out.count(f"effect:   {tbl} (") == 21 and "more rows than the 20 shown" in out and "note r0" in out,
   "text: 20 rows and the line saying there are more", detail=out)

# --- the statement: names backtick-quoted, the id a bound parameter -----------
rc, out = run_sidecar_cmd(["inspect", eid], cfg2, env={"SIDECAR_LOG_LEVEL": "debug"})
ok(f"sql: SELECT `n`, `note`, `amount` FROM `{tbl}` WHERE `ev` = ?" in out and eid not in
   "".join(l for l in out.splitlines() if "sql: SELECT `n`" in l),
   "the statement as prepared: quoted names, the id bound (never in its text)", detail=out)

# --- a table that is not there, a table the user may not read ------------------
gone_cfg = json.loads(json.dumps(cfg))
gone_cfg["consumers"][0]["inspect_effects"] = [{"table": "no_such_table_" + suffix(), "columns": ["x"]}, NJ]
rc, j, out = inspect_json(gone_cfg, eid)
errs = j.get("errors", [])
# (a user with no grant on it is told 1142, as for any table it may not read)
ok(rc == 1 and any(x.get("code") in (1142, 1146) for x in errs)
   and (j.get("effects") or [{}, {}])[1].get("rows", [{}])[0].get("order_id") == 5200,
   "a missing table: error 1146 (or 1142) reported, exit 1, the next effect still read", detail=out)
rc, out = run_sidecar_cmd(["inspect", eid], gone_cfg)
ok(rc == 1 and re.search(r"effect:   no_such_table_\w+ \(.*\) not read: mysql error 114[26]", out)
   and "the report above is incomplete" in out, "text: the missing table named with its error", detail=out)
query(f"REVOKE SELECT ON app.{tbl} FROM 'sidecar_admin'@'%'")
rc, j, out = inspect_json(cfg2, eid)
ok(rc == 1 and any(x.get("table") == tbl and x.get("code") == 1142 for x in j.get("errors", [])),
   "a table the user may not read: 1142 named with its table", detail=out)
query(f"DROP TABLE {tbl}")

# --- bad identifiers: refused at config time, by key ----------------------------
for eff, key in [({"table": "notification_job`; DROP TABLE orders; --", "columns": ["x"]}, "table"),
                 ({"table": "notification_job", "columns": ["order_id", "status FROM mysql.user"]}, "columns[1]"),
                 ({"table": "notification_job", "event_id_column": "event_id`=event_id OR `1", "columns": ["x"]},
                  "event_id_column"),
                 ({"table": "app.notification_job", "columns": ["x"]}, "table")]:
    bad = json.loads(json.dumps(cfg))
    bad["consumers"][0]["inspect_effects"] = [eff]
    rc, out = run_sidecar_cmd(["inspect", eid], bad)
    ok(rc == 2 and f"consumers[0].inspect_effects[0].{key}: " in out and "not a plain SQL identifier" in out
       and "event " + eid not in out, f"inspect refuses a bad {key} before any query", detail=out)
    rc, out = run_sidecar_cmd(["check"], bad)
    ok(rc == 2 and f"consumers[0].inspect_effects[0].{key}: " in out, f"check refuses it too ({key})", detail=out)
ok(query("SELECT COUNT(*) FROM orders")[0][0] >= 0, "the orders table is still there")
done()
