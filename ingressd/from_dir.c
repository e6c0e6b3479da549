/* Kubernetes objects from DIR/NAME.json (ingressd/from_dir.h). */
#include "ingressd/from_dir.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "ingressd/store.h"

#define MAX_FILES 4096

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The kind of o ("kind": "Ingress", ...), or SWS_KUBE_KINDS. */
static sws_kube_kind_t kind_of(const json_t *o)
{
    const char *k = json_string_value(json_object_get(o, "kind"));
    for (int i = 0; k != NULL && i < SWS_KUBE_KINDS; i++)
        if (strcmp(k, sws_ingress_kind_name((sws_kube_kind_t)i)) == 0)
            return (sws_kube_kind_t)i;
    return SWS_KUBE_KINDS;
}

/* The file names, sorted; each and the array are free()d by the caller. */
static int list_json(const char *dir, char ***names, size_t *n, char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    *names = NULL;
    *n = 0;
    if (d == NULL)
        return sws_errf(err, errlen, "%s: cannot open the directory: %m", dir);
    if ((*names = calloc(MAX_FILES, sizeof(**names))) == NULL) {
        closedir(d);
        return sws_errf(err, errlen, "out of memory");
    }
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (e->d_name[0] == '.' || len < 6 || strcmp(e->d_name + len - 5, ".json") != 0)
            continue;
        if (*n == MAX_FILES) {
            closedir(d);
            return sws_errf(err, errlen, "%s: more than %d .json files", dir, MAX_FILES);
        }
        if (asprintf(&(*names)[*n], "%s/%s", dir, e->d_name) < 0) {
            closedir(d);
            return sws_errf(err, errlen, "out of memory");
        }
        (*n)++;
    }
    closedir(d);
    qsort(*names, *n, sizeof(**names), by_name);
    return 0;
}

static void deliver(json_t *doc, int kind, sws_kube_event_fn fn, void *ctx, size_t *count)
{
    const json_t *items = json_object_get(doc, "items");
    if (json_is_array(items)) { /* a List: its items, whatever the List's own kind */
        for (size_t i = 0; i < json_array_size(items); i++)
            deliver(json_array_get(items, i), kind, fn, ctx, count);
        return;
    }
    if (kind_of(doc) == (sws_kube_kind_t)kind) {
        fn(ctx, (sws_kube_kind_t)kind, SWS_KUBE_UPSERT, doc);
        (*count)++;
    }
}

int sws_ingress_from_dir(const char *dir, sws_kube_event_fn fn, void *ctx, size_t *nobjects,
                         char *err, size_t errlen)
{
    char **names;
    size_t n;
    json_t **docs = NULL;
    int rc = -1;

    *nobjects = 0;
    if (list_json(dir, &names, &n, err, errlen) < 0)
        goto out;
    if ((docs = calloc(n ? n : 1, sizeof(*docs))) == NULL) {
        sws_errf(err, errlen, "out of memory");
        goto out;
    }
    /* Every file parsed before any object is delivered: a broken file
     * leaves the store as it was. */
    for (size_t i = 0; i < n; i++) {
        json_error_t je;
        if ((docs[i] = json_load_file(names[i], JSON_REJECT_DUPLICATES, &je)) == NULL) {
            sws_errf(err, errlen, "%s:%d:%d: %s", names[i], je.line, je.column, je.text);
            goto out;
        }
    }
    for (int k = 0; k < SWS_KUBE_KINDS; k++) {
        fn(ctx, (sws_kube_kind_t)k, SWS_KUBE_LIST_BEGIN, NULL);
        for (size_t i = 0; i < n; i++)
            deliver(docs[i], k, fn, ctx, nobjects);
        fn(ctx, (sws_kube_kind_t)k, SWS_KUBE_LIST_END, NULL);
    }
    rc = 0;
out:
    for (size_t i = 0; i < n; i++) {
        if (docs != NULL)
            json_decref(docs[i]);
        free(names[i]);
    }
    free(docs);
    free(names);
    return rc;
}
