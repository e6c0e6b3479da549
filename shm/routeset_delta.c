#include "shm/routeset_delta.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"

typedef const char *(*key_fn)(const void *entry);

static const char *host_key(const void *entry)
{
    const Sws__Host *h = entry;
    return h->n_names > 0 ? h->names[0] : "";
}

static const char *pool_key(const void *entry)
{
    return ((const Sws__Pool *)entry)->name;
}

static int cmp_host(const void *a, const void *b)
{
    return strcmp(host_key(*(void *const *)a), host_key(*(void *const *)b));
}

static int cmp_pool(const void *a, const void *b)
{
    return strcmp(pool_key(*(void *const *)a), pool_key(*(void *const *)b));
}

ProtobufCMessage *sws_routeset_copy_message(const ProtobufCMessage *m)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *buf = malloc(n > 0 ? n : 1);
    if (buf == NULL)
        return NULL;
    protobuf_c_message_pack(m, buf);
    ProtobufCMessage *copy = protobuf_c_message_unpack(m->descriptor, NULL, n, buf);
    free(buf);
    return copy;
}

Sws__RouteSet *sws_routeset_copy(const Sws__RouteSet *rs)
{
    return (Sws__RouteSet *)sws_routeset_copy_message(&rs->base);
}

void sws_routeset_canonicalize(Sws__RouteSet *rs)
{
    if (rs->n_hosts > 1)
        qsort(rs->hosts, rs->n_hosts, sizeof(rs->hosts[0]), cmp_host);
    if (rs->n_pools > 1)
        qsort(rs->pools, rs->n_pools, sizeof(rs->pools[0]), cmp_pool);
}

/* ---- make ---- */

/* Field by field would be a second copy of the schema. */
int sws_routeset_same_message(const ProtobufCMessage *a, const ProtobufCMessage *b)
{
    if (a == NULL || b == NULL)
        return a == b;
    size_t na = protobuf_c_message_get_packed_size(a);
    if (na != protobuf_c_message_get_packed_size(b))
        return 0;
    uint8_t stack[2][512];
    uint8_t *pa = na <= sizeof(stack[0]) ? stack[0] : malloc(na);
    uint8_t *pb = na <= sizeof(stack[1]) ? stack[1] : malloc(na);
    int same = 0;
    if (pa != NULL && pb != NULL) {
        protobuf_c_message_pack(a, pa);
        protobuf_c_message_pack(b, pb);
        same = memcmp(pa, pb, na) == 0;
    }
    if (pa != stack[0])
        free(pa);
    if (pb != stack[1])
        free(pb);
    return same;
}

/* One sorted list against another: entries of b that a lacks or holds
 * differently go to ups, keys of a that b lacks to rems. */
static int diff_lists(void *const *a, size_t na, void *const *b, size_t nb, key_fn key,
                      void ***ups, size_t *nups, char ***rems, size_t *nrems)
{
    *ups = malloc((nb + 1) * sizeof(**ups));
    *rems = malloc((na + 1) * sizeof(**rems));
    *nups = *nrems = 0;
    if (*ups == NULL || *rems == NULL)
        return -1;
    size_t i = 0, j = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(key(a[i]), key(b[j]));
        if (c < 0) {
            (*rems)[(*nrems)++] = (char *)key(a[i++]);
        } else if (c > 0) {
            (*ups)[(*nups)++] = b[j++];
        } else {
            if (!sws_routeset_same_message(a[i], b[j]))
                (*ups)[(*nups)++] = b[j];
            i++;
            j++;
        }
    }
    return 0;
}

void sws_routeset_delta_release(Sws__RouteDelta *d)
{
    free(d->upsert_pools);
    free(d->remove_pools);
    free(d->upsert_hosts);
    free(d->remove_hosts);
    d->upsert_pools = NULL;
    d->remove_pools = NULL;
    d->upsert_hosts = NULL;
    d->remove_hosts = NULL;
    d->n_upsert_pools = d->n_remove_pools = d->n_upsert_hosts = d->n_remove_hosts = 0;
}

int sws_routeset_delta_make(const Sws__RouteSet *prev, const Sws__RouteSet *next,
                            Sws__RouteDelta *d)
{
    static const Sws__RouteSet empty = SWS__ROUTE_SET__INIT;
    if (prev == NULL)
        prev = &empty;
    sws__route_delta__init(d);
    if (diff_lists((void *const *)prev->pools, prev->n_pools, (void *const *)next->pools,
                   next->n_pools, pool_key, (void ***)&d->upsert_pools, &d->n_upsert_pools,
                   &d->remove_pools, &d->n_remove_pools) < 0 ||
        diff_lists((void *const *)prev->hosts, prev->n_hosts, (void *const *)next->hosts,
                   next->n_hosts, host_key, (void ***)&d->upsert_hosts, &d->n_upsert_hosts,
                   &d->remove_hosts, &d->n_remove_hosts) < 0) {
        sws_routeset_delta_release(d);
        return -1;
    }
    int changes = (int)(d->n_upsert_pools + d->n_remove_pools + d->n_upsert_hosts +
                        d->n_remove_hosts);
    if (changes == 0)
        sws_routeset_delta_release(d);
    return changes;
}

/* ---- apply ---- */

static const char *str_key(const void *entry)
{
    return entry;
}

/* 0 when the keys of v[0..n) increase strictly, else -1 with err. The
 * publisher emits a delta's lists in key order (make walks two sorted
 * sets), so the apply is a merge; anything else, a key twice included, is
 * refused, not sorted. */
static int check_order(void *const *v, size_t n, key_fn key, const char *verb, const char *what,
                       char *err, size_t errlen)
{
    for (size_t k = 1; k < n; k++) {
        const char *prev = key(v[k - 1]), *cur = key(v[k]);
        int c = strcmp(prev, cur);
        if (c == 0)
            return sws_errf(err, errlen, "the delta %s the %s \"%s\" twice", verb, what, cur);
        if (c > 0)
            return sws_errf(err, errlen, "the delta %s the %s \"%s\" out of key order (after "
                            "\"%s\")", verb, what, cur, prev);
    }
    return 0;
}

/* base with ups and rems, each in strictly increasing key order, into out,
 * in key order; base entries replaced or removed go to garbage. */
static int apply_list(void *const *base, size_t nb, void *const *ups, size_t nu,
                      char *const *rems, size_t nr, key_fn key, const char *what, void ***out,
                      size_t *nout, ProtobufCMessage **garbage, size_t *ngarbage, char *err,
                      size_t errlen)
{
    if (check_order(ups, nu, key, "upserts", what, err, errlen) < 0 ||
        check_order((void *const *)rems, nr, str_key, "removes", what, err, errlen) < 0)
        return -1;
    *out = malloc((nb + nu + 1) * sizeof(**out));
    *nout = 0;
    if (*out == NULL)
        return sws_errf(err, errlen, "out of memory applying a delta");
    size_t i = 0, u = 0, r = 0;
    while (i < nb || u < nu || r < nr) {
        const char *k = NULL;
        if (i < nb)
            k = key(base[i]);
        if (u < nu && (k == NULL || strcmp(key(ups[u]), k) < 0))
            k = key(ups[u]);
        if (r < nr && (k == NULL || strcmp(rems[r], k) < 0))
            k = rems[r];
        int in_base = i < nb && strcmp(key(base[i]), k) == 0;
        int upsert = u < nu && strcmp(key(ups[u]), k) == 0;
        int remove = r < nr && strcmp(rems[r], k) == 0;
        if (upsert && remove)
            return sws_errf(err, errlen, "the delta both upserts and removes the %s \"%s\"",
                            what, k);
        if (remove && !in_base)
            return sws_errf(err, errlen, "the delta removes the %s \"%s\", which is not there",
                            what, k);
        if (in_base && (upsert || remove))
            garbage[(*ngarbage)++] = base[i];
        else if (in_base)
            (*out)[(*nout)++] = base[i];
        if (upsert)
            (*out)[(*nout)++] = ups[u++];
        i += in_base;
        r += remove;
    }
    return 0;
}

void sws_routeset_applied_abort(sws_routeset_applied_t *a)
{
    if (a->next != NULL) {
        free(a->next->hosts);
        free(a->next->pools);
        free(a->next);
    }
    free(a->garbage);
    memset(a, 0, sizeof(*a));
}

int sws_routeset_delta_apply(const Sws__RouteSet *base, const Sws__RouteDelta *d,
                             sws_routeset_applied_t *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof(*out));
    for (size_t k = 0; k < d->n_upsert_hosts; k++) {
        if (d->upsert_hosts[k]->n_names == 0)
            return sws_errf(err, errlen, "the delta upserts a host without names");
    }
    out->next = malloc(sizeof(*out->next));
    out->garbage = malloc((base->n_hosts + base->n_pools + 1) * sizeof(*out->garbage));
    if (out->next == NULL || out->garbage == NULL) {
        sws_routeset_applied_abort(out);
        return sws_errf(err, errlen, "out of memory applying a delta");
    }
    sws__route_set__init(out->next);
    Sws__RouteSet *n = out->next;
    n->version = base->version;
    if (apply_list((void *const *)base->pools, base->n_pools, (void *const *)d->upsert_pools,
                   d->n_upsert_pools, d->remove_pools, d->n_remove_pools, pool_key, "pool",
                   (void ***)&n->pools, &n->n_pools, out->garbage, &out->ngarbage, err,
                   errlen) < 0 ||
        apply_list((void *const *)base->hosts, base->n_hosts, (void *const *)d->upsert_hosts,
                   d->n_upsert_hosts, d->remove_hosts, d->n_remove_hosts, host_key, "host",
                   (void ***)&n->hosts, &n->n_hosts, out->garbage, &out->ngarbage, err,
                   errlen) < 0) {
        sws_routeset_applied_abort(out);
        return -1;
    }
    n->settings = base->settings;
    n->tls = base->tls;
    return 0;
}

Sws__RouteSet *sws_routeset_applied_commit(sws_routeset_applied_t *a, Sws__RouteSet *base,
                                           Sws__RouteDelta *d)
{
    for (size_t k = 0; k < a->ngarbage; k++)
        protobuf_c_message_free_unpacked(a->garbage[k], NULL);
    free(base->hosts);
    free(base->pools);
    free(base);
    /* The entries moved: the delta's arrays stay, holding nothing
     * (free_unpacked skips NULL entries). */
    for (size_t k = 0; k < d->n_upsert_pools; k++)
        d->upsert_pools[k] = NULL;
    for (size_t k = 0; k < d->n_upsert_hosts; k++)
        d->upsert_hosts[k] = NULL;
    Sws__RouteSet *next = a->next;
    free(a->garbage);
    memset(a, 0, sizeof(*a));
    return next;
}
