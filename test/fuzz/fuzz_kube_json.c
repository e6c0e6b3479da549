/*
 * Fuzz target: Kubernetes objects as an API server (or anything posing as
 * one) could send them, through ingressd's object store and translation
 * (ingressd/store.c, ingressd/translate.c).
 *
 * The input is lines "KEJSON" ("3u{...}"): K a digit, the kind (sws_kube_kind_t,
 * modulo the count), E one of u (UPSERT), d (DELETE), b (LIST_BEGIN), e
 * (LIST_END); JSON the object (ignored for b and e). Each line is parsed
 * with jansson (what does not parse is skipped, as the client would) and
 * delivered to a fresh store; after each line the store is translated for
 * class "scalws" and the RouteSet must pass sws_routeset_check: whatever
 * the objects hold, ingressd never publishes a RouteSet scalwsd refuses
 * (a refusal aborts with its path and message on stderr). And as the
 * daemon does, a translation is kept: after a line that changed
 * EndpointSlices alone it is brought up incrementally and must be the
 * full translation, byte for byte (else an abort).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "ingressd/store.h"
#include "ingressd/translate.h"
#include "shm/routeset_check.h"
#include "shm/routeset_delta.h"

#define MAX_LINES 32

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

/* *kept: the translation the daemon would hold (NULL at first). */
static void translate_and_check(sws_ingress_store_t *st, sws_ingress_translation_t **kept,
                                uint64_t version)
{
    sws_routeset_refusal_t why;
    unsigned changed = sws_ingress_store_take_changes(st);
    Sws__RouteSet *rs = sws_ingress_translate(st, "scalws", version, 0, NULL);
    if (rs == NULL)
        abort(); /* only out of memory */
    if (sws_routeset_check(rs, &why) != 0) {
        fprintf(stderr, "RouteSet refused: %s: %s\n", why.path, why.msg);
        abort();
    }
    if (*kept != NULL && (changed & ~SWS_INGRESS_CHANGED(SWS_KUBE_ENDPOINTSLICE)) == 0) {
        if (sws_ingress_translation_endpoints(*kept, st, version) < 0)
            abort();
        if (!sws_routeset_same_message(&sws_ingress_translation_routes(*kept)->base, &rs->base)) {
            fprintf(stderr, "the incremental translation is not the full one\n");
            abort();
        }
    } else {
        sws_ingress_translation_free(*kept);
        if ((*kept = sws_ingress_translation_new(st, "scalws", version, 1)) == NULL)
            abort();
    }
    sws_ingress_store_clear_touched(st);
    sws_ingress_translate_free(rs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    sws_ingress_store_t st;
    sws_ingress_translation_t *kept = NULL;
    char *text = malloc(size + 1), *save = NULL;
    int lines = 0;
    if (text == NULL)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    sws_ingress_store_init(&st);
    for (char *line = strtok_r(text, "\n", &save); line != NULL && lines < MAX_LINES;
         line = strtok_r(NULL, "\n", &save), lines++) {
        if (strlen(line) < 3 || line[0] < '0' || line[0] > '9')
            continue;
        sws_kube_kind_t kind = (sws_kube_kind_t)((line[0] - '0') % SWS_KUBE_KINDS);
        json_t *obj = NULL;
        switch (line[1]) {
        case 'b':
            sws_ingress_store_event(&st, kind, SWS_KUBE_LIST_BEGIN, NULL);
            break;
        case 'e':
            sws_ingress_store_event(&st, kind, SWS_KUBE_LIST_END, NULL);
            break;
        case 'u':
        case 'd':
            obj = json_loads(line + 2, JSON_REJECT_DUPLICATES, NULL);
            if (obj == NULL)
                continue;
            sws_ingress_store_event(&st, kind, line[1] == 'u' ? SWS_KUBE_UPSERT : SWS_KUBE_DELETE,
                                    obj);
            json_decref(obj);
            break;
        default:
            continue;
        }
        translate_and_check(&st, &kept, (uint64_t)lines + 1);
    }
    sws_ingress_translation_free(kept);
    sws_ingress_store_free(&st);
    free(text);
    return 0;
}
