"""The tenants nemesis' faults (tests/nemesis/tenants.py): each hits one
tenant's database (or, with NEMESIS_TENANTS_HURT=all, every tenant's), or
kills a sidecar process; tenant faults are kept as windows for the check
that the other tenants kept flowing."""

import os
import time

import pymysql

import nemesis as nm
from tenants_db import CONSUMER_TABLES, DB, HURT_ALL, SIDECAR_USERS, TABLES, TENANTS, grants, root, sql

class Faults:
    def __init__(self, procs, rng, seconds):
        self.procs, self.rng, self.seconds = procs, rng, seconds
        self.out = nm.JsonlWriter(os.path.join(nm.RUN_DIR, "faults.jsonl"))
        self.windows = []  # tenant faults: who was hurt, when
        self.count = 0
        self.by_kind = {}
        self.errors = []
        self.last = None  # (fault, when it ended)

    def log(self, fault, phase, **detail):
        self.out.write({"t": nm.now(), "elapsed": round(nm.now() - nm.T0, 3), "fault": fault, "phase": phase,
                        **detail})
        nm.say(f"fault {fault} {phase} " + " ".join(f"{k}={v}" for k, v in detail.items()))

    def run(self):
        catalog = [("tenant-lock", 1.0, self.f_lock), ("tenant-kill-sessions", 1.0, self.f_kill_sessions),
                   ("tenant-revoke", 1.0, self.f_revoke), ("kill-relay", 0.4, self.f_kill),
                   ("kill-consumer", 0.4, self.f_kill), ("tenant-lock-outbox", 0.6, self.f_lock),
                   ("tenant-revoke-kill", 0.6, self.f_revoke)]
        only = [f for f in os.environ.get("NEMESIS_FAULTS", "").split(",") if f]
        if only:
            unknown = sorted(set(only) - {c[0] for c in catalog})
            if unknown:
                raise SystemExit(f"NEMESIS_FAULTS names no fault of the tenants topology: {unknown}")
            catalog = [c for c in catalog if c[0] in only]
        end = nm.T0 + self.seconds
        while nm.now() < end - 4:
            name, _, fn = self.rng.choices(catalog, weights=[c[1] for c in catalog])[0]
            t = self.rng.choice(TENANTS)
            secs = min(self.rng.uniform(5.0, 10.0), max(4.0, end - nm.now()))
            try:
                fn(name, t, secs)
                self.count += 1
                self.by_kind[name] = self.by_kind.get(name, 0) + 1
            except Exception as e:  # noqa: BLE001 - recorded, the run goes on
                self.errors.append(f"{name}: {e!r}")
                self.log(name, "error", error=repr(e)[:300])
            self.last = (name, nm.now())
            time.sleep(self.rng.uniform(1.0, 3.0))

    def _hurt(self, t):
        return list(TENANTS) if HURT_ALL else [t]

    def _window(self, name, t, start):
        # what came just before, for a window that goes wrong to be read
        before = f"{self.last[0]} {start - self.last[1]:.1f} s before" if self.last else "first"
        self.windows.append({"tenant": t, "fault": name, "start": start, "end": nm.now(), "after": before,
                             "elapsed": round(start - nm.T0, 1)})

    def _sessions(self, t):
        users = ",".join(f"'{u}'" for u in SIDECAR_USERS)
        dbs = ",".join(f"'{DB.format(x)}'" for x in self._hurt(t))
        return [r[0] for r in sql(f"SELECT id FROM information_schema.processlist WHERE user IN ({users})"
                                  f" AND db IN ({dbs})")]

    def _kill(self, t):
        n = 0
        for i in self._sessions(t):
            try:
                sql(f"KILL CONNECTION {int(i)}")
                n += 1
            except pymysql.err.MySQLError:
                pass  # gone already
        return n

    def f_lock(self, name, t, secs):
        held = []
        try:
            for x in self._hurt(t):
                c = root(DB.format(x), timeout=60)
                held.append(c)
                with c.cursor() as cur:
                    cur.execute("SET SESSION lock_wait_timeout = 20")
                    tables = ["outbox_event"] if name == "tenant-lock-outbox" else CONSUMER_TABLES
                    cur.execute("LOCK TABLES " + ", ".join(f"{tb} WRITE" for tb in tables))
            start = nm.now()
            self.log(name, "start", tenant=t, seconds=round(secs, 1))
            time.sleep(secs)
        finally:
            for c in held:
                try:
                    with c.cursor() as cur:
                        cur.execute("UNLOCK TABLES")
                    c.close()
                except Exception:  # noqa: BLE001
                    pass
        self._window(name, t, start)
        self.log(name, "end", tenant=t)

    def f_kill_sessions(self, name, t, secs):
        start = nm.now()
        self.log(name, "start", tenant=t, seconds=round(secs, 1))
        n = 0
        while nm.now() < start + secs:
            n += self._kill(t)
            time.sleep(0.2)
        self._window(name, t, start)
        self.log(name, "end", tenant=t, killed=n)

    def f_revoke(self, name, t, secs):
        try:
            # with the relay's grants kept, t's events keep coming while the
            # consumer cannot take them: deliveries to hold and send round
            users = ("sidecar_consumer",) if name == "tenant-revoke-kill" else SIDECAR_USERS
            for x in self._hurt(t):
                db = DB.format(x)
                for u in users:
                    for tb in TABLES:
                        try:
                            sql(f"REVOKE ALL PRIVILEGES ON `{db}`.`{tb}` FROM '{u}'@'%'")
                        except pymysql.err.MySQLError:
                            pass  # no grant on that table
            start = nm.now()
            n = self._kill(t)
            self.log(name, "start", tenant=t, seconds=round(secs, 1), killed=n)
            if name == "tenant-revoke-kill":
                # the ordered consumer's deliveries of t out through its
                # delay queue (past db_outage_hold_ms) when the process dies:
                # killed once a row of one is written, or late in the window
                p = self.procs["consume"]
                while True:
                    rows = sql("SELECT COUNT(*) FROM app.consumer_tenant_copy WHERE tenant = %s", (t,))[0][0]
                    if rows or nm.now() - start > secs * 0.7:
                        break
                    time.sleep(0.1)
                p.kill9()
                self.log(name, "kill", target=p.name, copies_out=rows)
                time.sleep(self.rng.uniform(0.2, 2.0))
                p.start()
            time.sleep(max(0.0, start + secs - nm.now()))
        finally:
            for x in self._hurt(t):
                for g in grants(x):
                    sql(g)
        self._window(name, t, start)
        self.log(name, "end", tenant=t)

    def f_kill(self, name, t, secs):
        p = self.procs["relay" if name == "kill-relay" else "consume"]
        self.log(name, "start", target=p.name)
        p.kill9()
        time.sleep(self.rng.uniform(0.2, 2.0))
        p.start()
        self.log(name, "end", target=p.name, run=p.runs)
