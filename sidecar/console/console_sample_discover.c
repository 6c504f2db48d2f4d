/* tenants.discover in the console: the relay's listing (tenant_discover.c,
 * one information_schema query over a session of its own) made on the
 * tenants thread, at its start and then before the first sweep once
 * tenants.discover_ms has passed. A request never lists: it reads the
 * tenants the last listing left in the sampler's state
 * (console_sample.c). A listing that fails changes nothing (logged once
 * per change of its reason); a refused database name is logged once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "console_sampler.h"
#include "lifecycle.h"
#include "log.h"
#include "tenant.h"

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sc_console_discover_due(struct tenant_discovery *d, const struct sc_console *con,
                            struct sc_tenant_found *found)
{
    memset(found, 0, sizeof *found);
    int64_t now = sc_now_ms();
    if (d->next_ms && now < d->next_ms)
        return 0;
    /* Every discover_ms from one listing's start to the next. */
    d->next_ms = now + con->cfg->tenants.discover_ms;
    char why[sizeof d->why] = "";
    if (!d->compiled) {
        /* The config check compiled it already: this cannot fail there. */
        if (sc_tenant_names_compile(con->cfg->tenants.names, &d->names, why, sizeof why) == 0)
            d->compiled = 1;
    }
    /* cfg_short: the console's connect bound, so a server that swallows
     * connects holds this thread for 3 s a listing, not the daemon's
     * timeout. */
    if (d->compiled &&
        sc_tenant_discover(&con->cfg_short, &d->names, found, why, sizeof why) == 0) {
        if (d->why[0])
            sc_info("console: tenants.discover: listing works again");
        d->why[0] = 0;
        qsort(found->names, found->n, sizeof *found->names, by_name);
        sc_debug("console: tenants.discover: %zu tenant(s) found, %zu database(s) refused",
                 found->n, found->n_refused);
        for (size_t i = 0; i < found->n_refused; i++)
            if (sc_tenant_refused_first(&d->refused, &d->n_refused, found->refused[i]))
                sc_warn("console: tenants.discover: database %.64s ignored: its tenant part is "
                        "not a name tenants.names accepts (logged once)", found->refused[i]);
        return 1;
    }
    if (strcmp(why, d->why) != 0)
        sc_warn("console: tenants.discover: %s; the tenants known stay shown, listed again in %d "
                "ms (logged again when the reason changes)", why, con->cfg->tenants.discover_ms);
    snprintf(d->why, sizeof d->why, "%s", why);
    return 0;
}

void sc_console_discover_free(struct tenant_discovery *d)
{
    if (d->compiled)
        regfree(&d->names);
    sc_tenant_names_free(d->refused, d->n_refused);
    memset(d, 0, sizeof *d);
}
