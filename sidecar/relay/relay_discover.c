/* tenants.discover in the relay: the listing of tenant_discover.c, made at
 * start and every tenants.discover_ms, turned into tenants joining and
 * leaving the round. A listing that fails changes nothing (logged once per
 * change of its reason); a refused database name is logged once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lifecycle.h"
#include "log.h"
#include "relay_tenants.h"
#include "tenant.h"
#include "tenant_discover.h"

/* Refused names remembered so each is logged once; past this many the
 * rest are not logged (the set must not grow with every database). */
#define REFUSED_LOGGED_MAX 1024

static int found_has(const struct sc_tenant_found *f, const char *name)
{
    for (size_t i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return 1;
    return 0;
}

static void log_refused(struct sc_relay_tenants *ts, const char *db)
{
    for (size_t i = 0; i < ts->n_refused; i++)
        if (strcmp(ts->refused[i], db) == 0)
            return;
    if (ts->n_refused >= REFUSED_LOGGED_MAX)
        return;
    char **a = realloc(ts->refused, (ts->n_refused + 1) * sizeof *a);
    if (!a)
        return;
    ts->refused = a;
    if (!(a[ts->n_refused] = strdup(db)))
        return;
    ts->n_refused++;
    sc_warn("relay: tenants.discover: database %.64s ignored: its tenant part is not a name "
            "tenants.names accepts (logged once)", db);
}

void sc_relay_discover_refresh(struct sc_relay_tenants *ts, int64_t now)
{
    if (now < ts->next_discover_ms)
        return;
    ts->next_discover_ms = now + ts->discover_ms;
    char why[768];
    if (!ts->names_ok) {
        if (sc_tenant_names_compile(ts->cfg->tenants.names, &ts->names, why, sizeof why))
            return; /* the config check compiled it already */
        ts->names_ok = 1;
    }
    struct sc_tenant_found f;
    if (sc_tenant_discover(ts->cfg, &ts->names, &f, why, sizeof why)) {
        unsigned code = 1 + (unsigned)strlen(why);
        if (code != ts->discover_err)
            sc_warn("relay: tenants.discover: %s; the tenants known go on, listed again in %d ms "
                    "(logged again when the reason changes)", why, ts->discover_ms);
        ts->discover_err = code;
        return;
    }
    if (ts->discover_err)
        sc_info("relay: tenants.discover: listing works again");
    ts->discover_err = 0;
    for (size_t i = 0; i < f.n_refused; i++)
        log_refused(ts, f.refused[i]);
    for (int i = 0; i < ts->n; i++) {
        struct sc_relay_tenant *t = ts->t[i];
        if (t && !t->gone && !found_has(&f, t->name)) {
            sc_info("relay: tenant %s: its database is no longer found: dropped from the round%s",
                    t->name, t->held ? " once its batch in hand is settled" : "");
            sc_relay_tenants_drop(ts, i);
        }
    }
    for (size_t i = 0; i < f.n; i++) {
        int known = 0;
        for (int j = 0; j < ts->n && !known; j++)
            known = ts->t[j] && !ts->t[j]->gone && strcmp(ts->t[j]->name, f.names[i]) == 0;
        if (known)
            continue;
        if (sc_relay_tenants_add(ts, f.names[i])) {
            sc_warn("relay: tenant %s: out of memory: not added, tried at the next listing",
                    f.names[i]);
            continue;
        }
        sc_info("relay: tenant %s: database found, joins the round", f.names[i]);
    }
    atomic_store(&ts->m->tenants, ts->live);
    sc_tenant_found_free(&f);
}

void sc_relay_discover_free(struct sc_relay_tenants *ts)
{
    for (size_t i = 0; i < ts->n_refused; i++)
        free(ts->refused[i]);
    free(ts->refused);
    ts->refused = NULL;
    ts->n_refused = 0;
    if (ts->names_ok)
        regfree(&ts->names);
    ts->names_ok = 0;
}
