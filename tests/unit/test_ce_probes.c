/* The CloudEvents probes (tests/fuzz/corpus/event/probe-*.msg, written by
 * tests/fuzz/probes.py): each is a message the consumer reads as a delivery
 * would be read, and says in its comments what must come of it: applied
 * with this id and data, an empty batch, or refused with a reason naming the
 * attribute and the rule. The same files seed the envelope fuzz target.
 *
 * usage: test_ce_probes CORPUS_DIR */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sidecar/admin/try_file.h"
#include "sidecar/envelope/message.h"
#include "tap.h"

/* The least number of probes: every rule with a valid counterpart. */
#define MIN_PROBES 42

struct want {
    char expect[16], fragment[256], id[64], log_id[80], original_id[256], datacontenttype[128];
    char data_json[256], data_bytes[256], data_bytes_hex[512];
    int has_data_json, has_data_bytes, has_hex, plain, has_dct;
};

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *t = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (t && fread(t, 1, (size_t)n, f) != (size_t)n) {
        free(t);
        t = NULL;
    }
    fclose(f);
    if (t) {
        t[n] = 0;
        *len = (size_t)n;
    }
    return t;
}

static void field(char *dst, size_t cap, const char *v)
{
    snprintf(dst, cap, "%s", v);
}

/* The "# key: value" lines before the blank line. */
static void expectations(const char *text, struct want *w, char *label, size_t label_len)
{
    memset(w, 0, sizeof *w);
    for (const char *line = text; *line && *line != '\n';) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        char l[1024];
        snprintf(l, sizeof l, "%.*s", (int)n, line);
        char *colon = strstr(l, ": ");
        if (l[0] == '#' && colon) {
            *colon = 0;
            const char *k = l + 2, *v = colon + 2;
            if (!strcmp(k, "probe"))
                field(label, label_len, v);
            else if (!strcmp(k, "expect")) {
                sscanf(v, "%15s", w->expect);
                const char *frag = strchr(v, ' ');
                if (frag)
                    field(w->fragment, sizeof w->fragment, frag + 1);
            } else if (!strcmp(k, "id"))
                field(w->id, sizeof w->id, v);
            else if (!strcmp(k, "log_id"))
                field(w->log_id, sizeof w->log_id, v);
            else if (!strcmp(k, "original_id"))
                field(w->original_id, sizeof w->original_id, v);
            else if (!strcmp(k, "datacontenttype"))
                w->has_dct = 1, field(w->datacontenttype, sizeof w->datacontenttype, v);
            else if (!strcmp(k, "data_json"))
                w->has_data_json = 1, field(w->data_json, sizeof w->data_json, v);
            else if (!strcmp(k, "data_bytes"))
                w->has_data_bytes = 1, field(w->data_bytes, sizeof w->data_bytes, v);
            else if (!strcmp(k, "data_bytes_hex"))
                w->has_hex = 1, field(w->data_bytes_hex, sizeof w->data_bytes_hex, v);
            else if (!strcmp(k, "consumer"))
                w->plain = strcmp(v, "plain") == 0;
        } else if (l[0] == '#' && !strcmp(l, "# data_bytes:")) {
            w->has_data_bytes = 1; /* empty bytes */
        }
        line = nl ? nl + 1 : line + n;
    }
}

static int same_bytes(const unsigned char *p, size_t n, const char *want)
{
    return p && n == strlen(want) && memcmp(p, want, n) == 0;
}

static int same_hex(const unsigned char *p, size_t n, const char *hex)
{
    if (!p || strlen(hex) != 2 * n)
        return 0;
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        if (sscanf(hex + 2 * i, "%2x", &v) != 1 || v != p[i])
            return 0;
    }
    return 1;
}

static void run(const char *dir, const char *file)
{
    char path[1024], label[512] = "";
    snprintf(path, sizeof path, "%s/%s", dir, file);
    size_t len = 0;
    char *text = slurp(path, &len);
    if (!ok(text != NULL, "%s: readable", file))
        return;
    struct want w;
    expectations(text, &w, label, sizeof label);
    struct sc_try_message tm;
    char why[512] = "";
    if (!ok(sc_try_message_parse(text, len, "", &tm, why, sizeof why) == 0, "%s: a message file (%s)",
            file, why))
        return;
    const struct sc_message m = {.props = &tm.props, .body = tm.body, .exchange = tm.exchange,
                                 .routing_key = tm.routing_key};
    const struct sc_envelope_opts o = {.plain = w.plain};
    struct sc_message_events evs;
    struct sc_parsed_event e;
    memset(&e, 0, sizeof e);
    int opened = sc_message_open(&m, &o, &evs, why, sizeof why) == 0;
    int rc = -1;
    if (opened && evs.n > 0)
        rc = sc_message_event(&m, &o, &evs, 0, &e, why, sizeof why);
    if (!strcmp(w.expect, "empty")) {
        ok(opened && evs.n == 0 && evs.mode == SC_MODE_BATCH, "%s (%s): an empty batch, nothing to do (%s)",
           file, label, opened ? "opened" : why);
    } else if (!strcmp(w.expect, "refused")) {
        ok(rc != 0 && strstr(why, w.fragment), "%s (%s): refused, naming \"%s\" (%s)", file, label,
           w.fragment, rc ? why : "accepted");
        if (w.log_id[0])
            is_str(e.log_id, w.log_id, "%s: the log still names it", file);
    } else if (ok(rc == 0, "%s (%s): accepted (%s)", file, label, rc ? why : "ok")) {
        if (w.id[0])
            is_str(e.ev.id, w.id, "%s: id", file);
        ok(e.ev.struct_size == sizeof e.ev && SC_EVENT_HAS(&e.ev, original_id), "%s: the appended fields are set", file);
        if (w.original_id[0])
            is_str(e.ev.original_id, w.original_id, "%s: original_id", file);
        if (w.has_dct)
            is_str(e.ev.datacontenttype, w.datacontenttype, "%s: datacontenttype", file);
        if (w.has_data_json && !strcmp(w.data_json, "none"))
            ok(e.ev.data_json == NULL, "%s: no data_json (the data is not JSON)", file);
        else if (w.has_data_json)
            ok(e.ev.data_json && e.ev.data_json_len == strlen(w.data_json) &&
                   !strcmp(e.ev.data_json, w.data_json),
               "%s: data_json %s (got %s)", file, w.data_json, e.ev.data_json ? e.ev.data_json : "NULL");
        if (w.has_data_json && strcmp(w.data_json, "none"))
            ok(same_bytes(e.ev.data_bytes, e.ev.data_bytes_len, w.data_json),
               "%s: data_bytes are data_json's text", file);
        if (w.has_data_bytes)
            ok(same_bytes(e.ev.data_bytes, e.ev.data_bytes_len, w.data_bytes), "%s: data_bytes '%s'",
               file, w.data_bytes);
        if (w.has_hex)
            ok(same_hex(e.ev.data_bytes, e.ev.data_bytes_len, w.data_bytes_hex),
               "%s: data_bytes %s", file, w.data_bytes_hex);
        sc_event_free(&e);
    }
    sc_message_events_free(&evs);
    sc_try_message_free(&tm);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        printf("Bail out! usage: test_ce_probes CORPUS_DIR\n");
        return 1;
    }
    DIR *d = opendir(argv[1]);
    if (!d) {
        printf("Bail out! cannot open %s\n", argv[1]);
        return 1;
    }
    char *names[512];
    int n = 0;
    for (struct dirent *de; (de = readdir(d)) && n < 512;)
        if (!strncmp(de->d_name, "probe-", 6))
            names[n++] = strdup(de->d_name);
    closedir(d);
    qsort(names, (size_t)n, sizeof *names, by_name);
    ok(n >= MIN_PROBES, "%d probes (at least %d)", n, MIN_PROBES);
    for (int i = 0; i < n; i++) {
        run(argv[1], names[i]);
        free(names[i]);
    }
    return done();
}
