/* RouteSets built in code, as a source other than the YAML file would
 * build them: heap messages throughout, so sws__route_set__free_unpacked()
 * frees the lot. Shared by test_table.c, test_routeset_check.c,
 * test_routeset_delta.c, test_ingress_merge.c, test_stream.c and
 * test_static.c. Include after <cmocka.h>. */
#ifndef SWS_TEST_ROUTESET_BUILD_H
#define SWS_TEST_ROUTESET_BUILD_H

#include <stdlib.h>
#include <string.h>

#include "proto/scalws.pb-c.h"
#include "shm/table.h"

#define PUSH(arr, n, item)                                        \
    do {                                                          \
        (arr) = realloc((arr), ((n) + 1) * sizeof(*(arr)));       \
        assert_non_null(arr);                                     \
        (arr)[(n)++] = (item);                                    \
    } while (0)

static inline void *dup_msg(const void *init, size_t size)
{
    void *m = malloc(size);
    assert_non_null(m);
    memcpy(m, init, size);
    return m;
}

#define NEW(type, INIT) ((type *)dup_msg(&(type)INIT, sizeof(type)))

static inline Sws__RouteSet *rs_new(void)
{
    Sws__RouteSet *rs = NEW(Sws__RouteSet, SWS__ROUTE_SET__INIT);
    rs->settings = NEW(Sws__Settings, SWS__SETTINGS__INIT);
    rs->settings->server_name = strdup("scalws");
    return rs;
}

/* names: space-separated */
static inline Sws__Host *rs_host(Sws__RouteSet *rs, const char *names)
{
    Sws__Host *h = NEW(Sws__Host, SWS__HOST__INIT);
    char *copy = strdup(names), *save = NULL;
    for (char *n = strtok_r(copy, " ", &save); n != NULL; n = strtok_r(NULL, " ", &save))
        PUSH(h->names, h->n_names, strdup(n));
    free(copy);
    PUSH(rs->hosts, rs->n_hosts, h);
    return h;
}

static inline Sws__Route *host_route(Sws__Host *h, Sws__Route__Match match, const char *path)
{
    Sws__Route *r = NEW(Sws__Route, SWS__ROUTE__INIT);
    r->match = match;
    r->path = strdup(path);
    PUSH(h->routes, h->n_routes, r);
    return r;
}

/* A respond route whose body names it, so a lookup shows which one won. */
static inline Sws__Route *host_respond(Sws__Host *h, Sws__Route__Match match, const char *path,
                                       const char *body)
{
    Sws__Route *r = host_route(h, match, path);
    Sws__Respond *rp = NEW(Sws__Respond, SWS__RESPOND__INIT);
    rp->status = 200;
    rp->body.data = (uint8_t *)strdup(body);
    rp->body.len = strlen(body);
    r->action_case = SWS__ROUTE__ACTION_RESPOND;
    r->respond = rp;
    return r;
}

/* A pool called name, no members yet. */
static inline Sws__Pool *rs_pool(Sws__RouteSet *rs, const char *name)
{
    Sws__Pool *p = NEW(Sws__Pool, SWS__POOL__INIT);
    p->name = strdup(name);
    PUSH(rs->pools, rs->n_pools, p);
    return p;
}

static inline Sws__Member *pool_member(Sws__Pool *p, const char *address, uint32_t weight)
{
    Sws__Member *m = NEW(Sws__Member, SWS__MEMBER__INIT);
    m->address = strdup(address);
    m->weight = weight;
    PUSH(p->members, p->n_members, m);
    return m;
}

/* A static route on root (index.html). */
static inline Sws__Route *host_static(Sws__Host *h, Sws__Route__Match match, const char *path,
                                      const char *root)
{
    Sws__Route *r = host_route(h, match, path);
    r->action_case = SWS__ROUTE__ACTION_STATIC;
    r->static_ = NEW(Sws__Static, SWS__STATIC__INIT);
    r->static_->root = strdup(root);
    r->static_->index = strdup("index.html");
    return r;
}

/* A redirect route to location with status. */
static inline Sws__Route *host_redirect(Sws__Host *h, Sws__Route__Match match, const char *path,
                                        unsigned status, const char *location)
{
    Sws__Route *r = host_route(h, match, path);
    r->action_case = SWS__ROUTE__ACTION_REDIRECT;
    r->redirect = NEW(Sws__Redirect, SWS__REDIRECT__INIT);
    r->redirect->status = status;
    r->redirect->location = strdup(location);
    return r;
}

static inline void respond_header(Sws__Route *r, const char *name, const char *value)
{
    Sws__Header *hd = NEW(Sws__Header, SWS__HEADER__INIT);
    hd->name = strdup(name);
    hd->value = strdup(value);
    PUSH(r->respond->headers, r->respond->n_headers, hd);
}

/* rs built as table generation gen in a heap arena (the caller frees it),
 * rs freed; *size gets the table's size. */
static inline void *rs_table(Sws__RouteSet *rs, uint64_t gen, size_t *size)
{
    char err[256] = "";
    *size = sws_table_size(rs);
    void *arena = aligned_alloc(8, (*size + 7) & ~(size_t)7);
    assert_non_null(arena);
    if (sws_table_build(arena, *size, gen, rs, err, sizeof(err)) != 0)
        fail_msg("table: %s", err);
    sws__route_set__free_unpacked(rs, NULL);
    return arena;
}

#endif
