/*
 * Fuzz target: the WATCH stream parser (ingressd/watch_parse.h), what the
 * Kubernetes API server (or anything answering on its address) sends.
 *
 * Input layout (cuts.h): byte 0 the number of cuts, their lengths, then the
 * stream. The stream is fed in those reads to a parser with a small line
 * bound (512 bytes, so the bound is reached often), and whole to a second
 * parser; checked:
 *   - both give the same events (type and the object's JSON text), or both
 *     fail, with the events before the failure the same;
 *   - the line buffer never grows past the bound;
 *   - the object given to the callback is a JSON object.
 * A broken property aborts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "ingressd/watch_parse.h"
#include "cuts.h"

#define MAX_LINE 512
#define MAX_EVENTS 64

typedef struct events {
    char *text[MAX_EVENTS];
    int type[MAX_EVENTS];
    size_t n;
} events_t;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

static int record(void *ctx, sws_watch_type_t type, json_t *obj)
{
    events_t *e = ctx;

    if (!json_is_object(obj))
        abort();
    if (e->n < MAX_EVENTS) {
        e->text[e->n] = json_dumps(obj, JSON_SORT_KEYS | JSON_COMPACT);
        e->type[e->n] = (int)type;
        e->n++;
    }
    return 0;
}

static void events_free(events_t *e)
{
    for (size_t i = 0; i < e->n; i++)
        free(e->text[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *in;
    size_t len, cuts[FUZZ_CUTS_MAX + 1], ncuts, at = 0;
    sws_watch_parser_t cut, whole;
    events_t ec = { 0 }, ew = { 0 };
    char err[256];
    int rc_cut = 0, rc_whole;

    if (fuzz_cuts(data, size, &in, &len, cuts, &ncuts) < 0)
        return 0;
    sws_watch_parser_init(&cut, MAX_LINE);
    sws_watch_parser_init(&whole, MAX_LINE);
    for (size_t i = 0; i <= ncuts && rc_cut == 0; i++) {
        rc_cut = sws_watch_feed(&cut, (const char *)in + at, cuts[i] - at, record, &ec, err,
                                sizeof(err));
        at = cuts[i];
        if (cut.cap > MAX_LINE)
            abort();
    }
    if (rc_cut == 0)
        rc_cut = sws_watch_finish(&cut, err, sizeof(err));
    rc_whole = sws_watch_feed(&whole, (const char *)in, len, record, &ew, err, sizeof(err));
    if (rc_whole == 0)
        rc_whole = sws_watch_finish(&whole, err, sizeof(err));
    if (rc_cut != rc_whole || ec.n != ew.n)
        abort();
    for (size_t i = 0; i < ec.n; i++)
        if (ec.type[i] != ew.type[i] || (ec.text[i] == NULL) != (ew.text[i] == NULL) ||
            (ec.text[i] != NULL && strcmp(ec.text[i], ew.text[i]) != 0))
            abort();
    events_free(&ec);
    events_free(&ew);
    sws_watch_parser_free(&cut);
    sws_watch_parser_free(&whole);
    return 0;
}
