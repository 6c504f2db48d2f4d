"""The tenants nemesis' checker (tests/nemesis/tenants.py): every tenant's
history on its own, and the unhurt tenants' progress while one was hurt.

Inputs, all plain data so a planted copy can be checked the same way:
  rows      {tenant: {"outbox": [[event_id, status, aggregate_id, version]],
                      "effects": [[id, event_id, order_id, version, created_at_epoch]],
                      "claims": [event_id, ...],
                      "ordered": effects of the ordered consumer, as "effects"}}
  audit     [[seq, event_id, tenant, subject, version]] in the order seen
  produced  {tenant: {event_id: outcome}} ("committed" | "unknown" | "failed")
  windows   [{"tenant": hurt, "fault": name, "start": t, "end": t}]
  dlq       [event_id, ...]
Returns {class: sorted ids} (empty lists when all is well) and a summary."""


def stall_label(w, t):
    """How a window where tenant t made no progress is named: the fault,
    its run time, t, and what came just before it."""
    return (f"{w['fault']}@{w.get('elapsed', w['start'])}s:{t}" +
            (f" (after {w['after']})" if w.get("after") else ""))


def check(tenants, rows, audit, produced, windows, dlq):
    bad = {k: set() for k in ("lost", "doubled", "misrouted", "stuck", "claims", "producer_lost",
                              "out_of_order", "dead_lettered", "stalled", "ordered_lost",
                              "ordered_doubled", "ordered_out_of_order")}
    owner = {}  # event id -> the tenant whose outbox holds it
    for t in tenants:
        for eid, status, _agg, _v in rows[t]["outbox"]:
            owner[eid] = t
    for t in tenants:
        r = rows[t]
        mine = {o[0] for o in r["outbox"]}
        for eid, status, _agg, _v in r["outbox"]:
            if status != "PUBLISHED":
                bad["stuck"].add(eid)
        n = {}
        for e in r["effects"]:
            n[e[1]] = n.get(e[1], 0) + 1
            if e[1] not in mine:
                # an effect in this tenant's database of an event some
                # other tenant (or nobody) wrote
                bad["misrouted"].add(e[1])
        for eid in mine:
            if n.get(eid, 0) == 0:
                bad["lost"].add(eid)
            elif n[eid] > 1:
                bad["doubled"].add(eid)
        claims = {}
        for eid in r["claims"]:
            claims[eid] = claims.get(eid, 0) + 1
        for eid in mine:
            if claims.get(eid, 0) != 1:
                bad["claims"].add(eid)
        # the ordered consumer: each event once, and per aggregate the
        # versions in the order they were applied (the effect's id) rising
        seen_o, top = {}, {}
        for e in sorted(r.get("ordered", []), key=lambda e: e[0]):
            seen_o[e[1]] = seen_o.get(e[1], 0) + 1
            if seen_o[e[1]] > 1:
                bad["ordered_doubled"].add(e[1])
                continue
            if e[2] in top and e[3] is not None and e[3] <= top[e[2]]:
                bad["ordered_out_of_order"].add(e[1])
            if e[3] is not None:
                top[e[2]] = max(top.get(e[2], e[3]), e[3])
        for eid in mine:
            if "ordered" in r and eid not in seen_o:
                bad["ordered_lost"].add(eid)
        for eid, outcome in produced.get(t, {}).items():
            if outcome == "committed" and eid not in mine:
                bad["producer_lost"].add(eid)
            if outcome == "failed" and eid in mine:
                bad["producer_lost"].add(eid)  # a definite failure that committed after all
    # per aggregate, the relay publishes in version order (per_aggregate):
    # the first copy of each version comes after the first of the version
    # before it
    first = {}
    for seq, eid, tenant, subject, version in sorted(audit, key=lambda a: a[0]):
        if eid not in first:
            first[eid] = (seq, tenant, subject, version)
    by_key = {}
    for eid, (seq, tenant, subject, version) in first.items():
        by_key.setdefault((tenant, subject), []).append((seq, version, eid))
    for seq_v in by_key.values():
        seq_v.sort()
        top = None
        for seq, version, eid in seq_v:
            if top is not None and version <= top:
                bad["out_of_order"].add(eid)
            top = version if top is None else max(top, version)
    bad["dead_lettered"] |= set(dlq)
    # isolation: while one tenant was hurt, every other tenant's effects
    # kept landing
    progress, rates = [], []
    for w in windows:
        span = max(0.001, w["end"] - w["start"])
        per = {t: sum(1 for e in rows[t]["effects"] if w["start"] <= e[4] <= w["end"]) for t in tenants}
        for t in tenants:
            if t == w["tenant"]:
                continue
            progress.append(per[t] / span)
            if per[t] == 0:
                bad["stalled"].add(stall_label(w, t))
        rates.append([w["fault"], w["tenant"], round(span, 1)] +
                     [round(per[t] / span, 2) for t in tenants])
    summary = {k: len(v) for k, v in bad.items()}
    summary["events"] = len(owner)
    summary["windows"] = len(windows)
    summary["min_unhurt_rate"] = round(min(progress), 2) if progress else None
    # [fault, hurt tenant, seconds, effects/s of each tenant in that window]
    summary["window_rates"] = rates
    return {k: sorted(v) for k, v in bad.items()}, summary


def self_check(tenants, rows, audit, produced, windows, dlq):
    """The checker on a copy of this run's data with one of each failure
    planted: a lost effect, a doubled one, an effect moved to another
    tenant's database, a stuck row, two versions seen out of order, a dead
    letter and a window where an unhurt tenant made no progress. Returns
    (each found, what was found)."""
    import copy
    r = copy.deepcopy(rows)
    a = copy.deepcopy(audit)
    t1, t2, t3 = tenants[0], tenants[1], tenants[2]
    if min(len(r[t]["effects"]) for t in tenants) < 3 or not windows:
        return False, "too few effects or no fault window to plant in"
    want = {}
    # first, so that the plants below are not inside the emptied window
    w = windows[0]
    unhurt = next(t for t in tenants if t != w["tenant"])
    r[unhurt]["effects"] = [e for e in r[unhurt]["effects"] if not (w["start"] <= e[4] <= w["end"])]
    want["stalled"] = {stall_label(w, unhurt)}
    if min(len(r[t]["effects"]) for t in tenants) < 3:
        return False, "too few effects outside the first fault window"
    lost = r[t1]["effects"].pop(0)
    want["lost"] = {lost[1]}
    twin = r[t2]["effects"][0]
    r[t2]["effects"].append([-1] + twin[1:])
    want["doubled"] = {twin[1]}
    # from outside the emptied window: it lands in t1's database
    k = next((i for i, e in enumerate(r[t3]["effects"]) if not (w["start"] <= e[4] <= w["end"])), None)
    if k is None:
        return False, f"no effect of {t3} outside the first fault window"
    moved = r[t3]["effects"].pop(k)
    r[t1]["effects"].append(moved)
    want["misrouted"] = {moved[1]}
    want["lost"].add(moved[1])
    r[t2]["outbox"][-1][1] = "PENDING"
    want["stuck"] = {r[t2]["outbox"][-1][0]}
    # two versions of one aggregate: their first copies swapped
    # (the first copies only: a republished copy swapped with its own
    # first would change nothing)
    by_key, seen = {}, set()
    for x in sorted(a):
        if x[1] not in seen:
            seen.add(x[1])
            by_key.setdefault((x[2], x[3]), []).append(x)
    pair = next((v[:2] for v in by_key.values() if len(v) > 1), None)
    if pair is None:
        return False, "no aggregate with two versions"
    pair[0][0], pair[1][0] = pair[1][0], pair[0][0]
    want["out_of_order"] = {pair[0][1]}
    # the ordered consumer: two versions of one aggregate applied swapped
    o = sorted(r[t1].get("ordered", []), key=lambda e: e[0])
    opair = None
    for i, e in enumerate(o):
        later = next((f for f in o[i + 1:] if f[2] == e[2] and f[3] > e[3]), None)
        if later:
            opair = (e, later)
            break
    if opair:
        opair[0][0], opair[1][0] = opair[1][0], opair[0][0]
        want["ordered_out_of_order"] = {opair[0][1]}
    d = list(dlq) + [r[t3]["outbox"][0][0]]
    want["dead_lettered"] = {r[t3]["outbox"][0][0]}
    got, _ = check(tenants, r, a, produced, windows, d)
    good = all(want[k] <= set(got[k]) for k in want)
    return good, ", ".join(f"{k} {len(want[k] & set(got[k]))}/{len(want[k])}" for k in want)
