/*
 * Fuzz target: the routing table, from what the supervisor does not
 * control.
 *
 * Input byte 0 picks the path:
 *   even  the rest is a RouteSet (protobuf): what ingressd and the admin API
 *         will send. sws_table_size(), sws_table_build() into an arena of
 *         exactly that size (ASan sees a byte written past it), then
 *         lookups of every host name and route path of the set, and of
 *         variants (case, ":port", longer and shorter paths). Every string a
 *         lookup returns must lie inside the arena.
 *   odd   the rest is the head of a shared-memory region, as a new binary
 *         finds it on upgrade: sws_shm_attach() of a memfd whose first
 *         bytes are the input (the header, then slots and arena headers),
 *         its size the header's total_size adjusted by the next input byte.
 *         An attached region must then take a publication and a reader.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/log.h"
#include "shm/shm.h"
#include "shm/table.h"

#define MAX_ARENA (1u << 20)
#define MAX_REGION (16u << 20)

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    sws_log_init("fuzz", 2, SWS_LOG_CRIT);
    return 0;
}

static const sws_table_t *table_base;
static size_t table_bytes;

/* A string of the table: inside the arena, NUL after it. */
static void check_str(sws_tstr_t s)
{
    if ((size_t)s.off + s.len >= table_bytes)
        abort();
    if (sws_table_str(table_base, s)[s.len] != '\0')
        abort();
}

static void lookup(const char *host, size_t hlen, const char *path, size_t plen)
{
    const sws_route_t *r = sws_table_lookup(table_base, host, hlen, path, plen);
    if (r == NULL)
        return;
    if ((const char *)r < (const char *)table_base ||
        (const char *)(r + 1) > (const char *)table_base + table_bytes)
        abort();
    check_str(r->path);
    const sws_tfield_t *tf = sws_table_fields(table_base, r);
    if (r->nfields > 0 && ((const char *)tf < (const char *)table_base ||
                           (const char *)(tf + r->nfields) > (const char *)table_base + table_bytes))
        abort();
    for (unsigned i = 0; i < r->nfields; i++) {
        check_str(tf[i].name);
        check_str(tf[i].value);
    }
    check_str(r->body);
    check_str(r->location);
    check_str(r->root);
    check_str(r->index);
    check_str(r->host_header);
    if (r->action == SWS_ACTION_PROXY && r->pool >= sws_table_pool_count(table_base))
        abort();
}

/* host and path as given, then variants of each. */
static void lookups(const char *host, const char *path)
{
    char h[300], p[300];
    size_t hl = strnlen(host, 200), pl = strnlen(path, 200);
    lookup(host, hl, path, pl);
    lookup(host, hl, path, pl ? pl - 1 : 0);
    memcpy(h, host, hl);
    for (size_t i = 0; i < hl; i++)
        h[i] = (char)((h[i] >= 'a' && h[i] <= 'z') ? h[i] - 32 : h[i]);
    memcpy(h + hl, ":80", 3);
    memcpy(p, path, pl);
    memcpy(p + pl, "/x", 2);
    lookup(h, hl + 3, p, pl + 2);
    lookup(h + (hl > 2 ? 2 : 0), hl > 2 ? hl - 2 : hl, "/", 1);
    lookup("", 0, path, pl);
}

static void fuzz_routeset(const uint8_t *data, size_t size)
{
    Sws__RouteSet *rs = sws__route_set__unpack(NULL, size, data);
    if (rs == NULL)
        return;
    size_t need = sws_table_size(rs);
    if (need == 0 || need > MAX_ARENA) {
        sws__route_set__free_unpacked(rs, NULL);
        return;
    }
    void *arena = malloc(need);
    char err[256];
    if (arena == NULL)
        abort();
    if (sws_table_build(arena, need, 7, rs, err, sizeof(err)) == 0) {
        table_base = arena;
        table_bytes = need;
        if (sws_table_generation(table_base) != 7)
            abort();
        const sws_settings_t *st = sws_table_settings(table_base);
        check_str(st->server_name);
        check_str(st->access_log_path);
        for (size_t i = 0; i < rs->n_hosts; i++) {
            const Sws__Host *host = rs->hosts[i];
            for (size_t n = 0; n < host->n_names; n++) {
                lookups(host->names[n], "/");
                for (size_t r = 0; r < host->n_routes; r++)
                    lookups(host->names[n], host->routes[r]->path);
            }
        }
        lookups("unknown.example", "/");
        for (uint32_t i = 0; i < sws_table_pool_count(table_base); i++) {
            const sws_pool_t *pool = sws_table_pool(table_base, i);
            check_str(pool->name);
            check_str(pool->hash_name);
            /* What the checker promises the balancer and the proxy. */
            if (pool->balance > SWS_BALANCE_HASH ||
                (pool->balance == SWS_BALANCE_HASH) != (pool->hash_kind != SWS_HASH_NONE) ||
                pool->connect_timeout_ms == 0 || pool->read_timeout_ms == 0)
                abort();
            const sws_member_t *m = sws_table_members(table_base, pool);
            for (uint32_t j = 0; j < pool->nmembers; j++) {
                check_str(m[j].address);
                check_str(m[j].host);
                if (m[j].id == 0 || m[j].port == 0 || m[j].weight == 0 || m[j].host.len == 0)
                    abort();
            }
        }
    } else if (err[0] == '\0') {
        abort(); /* a refusal says why */
    }
    free(arena);
    sws__route_set__free_unpacked(rs, NULL);
}

static void fuzz_region(const uint8_t *data, size_t size)
{
    /* The header's total_size, where a region's header keeps it. */
    enum { TOTAL_OFF = 48 };
    if (size < TOTAL_OFF + 8 + 1)
        return;
    uint64_t total;
    memcpy(&total, data + TOTAL_OFF, sizeof(total));
    size_t len = size - 1;
    size_t region = total <= MAX_REGION ? (size_t)total + (size_t)(int8_t)data[len] : len;
    if (region > MAX_REGION + 128 || region < len)
        region = len;

    int fd = memfd_create("fuzz-shm", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)region) != 0 || write(fd, data, len) != (ssize_t)len)
        abort();
    sws_shm_t shm;
    char err[256];
    if (sws_shm_attach(&shm, fd, err, sizeof(err)) != 0) {
        if (err[0] == '\0')
            abort();
        close(fd);
        return;
    }
    /* What a new binary does next: publish its table, serve from it. */
    Sws__RouteSet rs = SWS__ROUTE_SET__INIT;
    Sws__Host host = SWS__HOST__INIT;
    Sws__Route route = SWS__ROUTE__INIT;
    Sws__Respond respond = SWS__RESPOND__INIT;
    Sws__Host *hosts[] = { &host };
    Sws__Route *routes[] = { &route };
    char *names[] = { "*" };
    respond.status = 200;
    route.path = "/";
    route.action_case = SWS__ROUTE__ACTION_RESPOND;
    route.respond = &respond;
    host.n_names = 1;
    host.names = names;
    host.n_routes = 1;
    host.routes = routes;
    rs.n_hosts = 1;
    rs.hosts = hosts;
    uint64_t gen;
    if (sws_shm_publish(&shm, &rs, &gen, err, sizeof(err)) == 0) {
        if (sws_shm_current_generation(&shm) != gen)
            abort();
        const sws_table_t *t = sws_shm_reader_acquire(&shm, 0, getpid());
        if (t == NULL || sws_table_lookup(t, "a", 1, "/", 1) == NULL)
            abort();
        sws_shm_reader_clear(&shm, 0);
    }
    sws_shm_close(&shm);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if ((data[0] & 1) == 0)
        fuzz_routeset(data + 1, size - 1);
    else
        fuzz_region(data + 1, size - 1);
    return 0;
}
