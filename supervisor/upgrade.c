#include "supervisor/upgrade.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/chan.h"
#include "core/err.h"

/* ---- the blob ---- */

struct blob_head {
    uint32_t magic;
    uint32_t version;
    int32_t old_pid;
    uint32_t policy;
    uint32_t naddrs;
    uint32_t ngroups;
    uint32_t nadmin;
    uint32_t ntickets;
    uint32_t backlog;
    uint32_t pad;
    uint64_t ticket_period_ms;
    uint64_t routes_len;
};

struct blob_addr {
    char name[80];
    uint32_t len;
    uint32_t pad;
    unsigned char ss[sizeof(struct sockaddr_storage)];
};

_Static_assert(sizeof(((sws_listen_addr_t *)0)->name) == sizeof(((struct blob_addr *)0)->name),
               "a listen address's name crosses whole");

/* One computation of the blob's size for both directions. */
static size_t blob_fixed_len(size_t naddrs, size_t nadmin, size_t ntickets)
{
    return sizeof(struct blob_head) + naddrs * sizeof(struct blob_addr) +
           nadmin * SWS_UPGRADE_ADMIN_NAME + ntickets * sizeof(sws_ticket_key_t);
}

int sws_upgrade_blob_encode(const sws_upgrade_state_t *st, const uint8_t *routes,
                            size_t routes_len, uint8_t **out, size_t *outlen, char *err,
                            size_t errlen)
{
    const sws_listen_set_t *ls = &st->listen;
    if (ls->naddrs > SWS_UPGRADE_MAX_ADDRS || ls->ngroups > SWS_UPGRADE_MAX_GROUPS ||
        st->nadmin > SWS_UPGRADE_MAX_ADMIN || st->tickets.n > SWS_TICKETS_KEYS)
        return sws_errf(err, errlen, "upgrade state: more sockets or keys than the format holds");
    size_t fixed = blob_fixed_len(ls->naddrs, st->nadmin, st->tickets.n);
    if (routes_len > SWS_UPGRADE_MAX_BLOB - fixed)
        return sws_errf(err, errlen, "upgrade state: a %zu-byte RouteSet is too large",
                        routes_len);
    uint8_t *buf = calloc(1, fixed + routes_len);
    if (buf == NULL)
        return sws_errf(err, errlen, "upgrade state: out of memory");
    struct blob_head h = {
        .magic = SWS_UPGRADE_MAGIC,
        .version = SWS_UPGRADE_VERSION,
        .old_pid = (int32_t)st->old_pid,
        .policy = (uint32_t)ls->policy,
        .naddrs = ls->naddrs,
        .ngroups = ls->ngroups,
        .nadmin = st->nadmin,
        .ntickets = st->tickets.n,
        .backlog = st->backlog,
        .ticket_period_ms = st->tickets.period_ms,
        .routes_len = routes_len,
    };
    uint8_t *p = buf;
    memcpy(p, &h, sizeof(h));
    p += sizeof(h);
    for (unsigned i = 0; i < ls->naddrs; i++) {
        struct blob_addr a;
        memset(&a, 0, sizeof(a));
        memcpy(a.name, ls->addrs[i].name, sizeof(a.name));
        a.name[sizeof(a.name) - 1] = '\0';
        a.len = (uint32_t)ls->addrs[i].len;
        memcpy(a.ss, &ls->addrs[i].ss, sizeof(a.ss));
        memcpy(p, &a, sizeof(a));
        p += sizeof(a);
    }
    for (unsigned i = 0; i < st->nadmin; i++) {
        memcpy(p, st->admin_names[i], SWS_UPGRADE_ADMIN_NAME);
        p[SWS_UPGRADE_ADMIN_NAME - 1] = '\0';
        p += SWS_UPGRADE_ADMIN_NAME;
    }
    for (unsigned i = 0; i < st->tickets.n; i++) {
        memcpy(p, &st->tickets.keys[i], sizeof(sws_ticket_key_t));
        p += sizeof(sws_ticket_key_t);
    }
    if (routes_len > 0)
        memcpy(p, routes, routes_len);
    *out = buf;
    *outlen = fixed + routes_len;
    return 0;
}

static void state_init(sws_upgrade_state_t *st)
{
    memset(st, 0, sizeof(*st));
    for (unsigned i = 0; i < SWS_UPGRADE_MAX_ADMIN; i++)
        st->admin_fds[i] = -1;
}

int sws_upgrade_blob_decode(const uint8_t *buf, size_t len, sws_upgrade_state_t *st, char *err,
                            size_t errlen)
{
    state_init(st);
    struct blob_head h;
    if (len < sizeof(h))
        return sws_errf(err, errlen, "upgrade state: %zu bytes, shorter than its head", len);
    memcpy(&h, buf, sizeof(h));
    if (h.magic != SWS_UPGRADE_MAGIC || h.version != SWS_UPGRADE_VERSION)
        return sws_errf(err, errlen, "upgrade state: format %08x version %u, expected %08x "
                        "version %u", h.magic, h.version, SWS_UPGRADE_MAGIC, SWS_UPGRADE_VERSION);
    if (h.naddrs == 0 || h.naddrs > SWS_UPGRADE_MAX_ADDRS || h.ngroups == 0 ||
        h.ngroups > SWS_UPGRADE_MAX_GROUPS || h.nadmin > SWS_UPGRADE_MAX_ADMIN ||
        h.ntickets > SWS_TICKETS_KEYS ||
        (h.policy != SWS_ACCEPT_SHARED && h.policy != SWS_ACCEPT_REUSEPORT) ||
        (h.policy == SWS_ACCEPT_SHARED && h.ngroups != 1))
        return sws_errf(err, errlen, "upgrade state: a layout out of bounds (%u addresses, %u "
                        "groups, %u admin listeners, %u keys)", h.naddrs, h.ngroups, h.nadmin,
                        h.ntickets);
    size_t fixed = blob_fixed_len(h.naddrs, h.nadmin, h.ntickets);
    if (len < fixed || h.routes_len != len - fixed)
        return sws_errf(err, errlen, "upgrade state: %zu bytes, %zu expected", len,
                        fixed + (size_t)(h.routes_len < SWS_UPGRADE_MAX_BLOB ? h.routes_len : 0));

    sws_listen_set_t *ls = &st->listen;
    size_t nfds = (size_t)h.naddrs * h.ngroups;
    ls->addrs = calloc(h.naddrs, sizeof(*ls->addrs));
    ls->fds = malloc(nfds * sizeof(*ls->fds));
    if (ls->addrs == NULL || ls->fds == NULL) {
        sws_upgrade_state_free(st);
        return sws_errf(err, errlen, "upgrade state: out of memory");
    }
    for (size_t i = 0; i < nfds; i++)
        ls->fds[i] = -1;
    ls->policy = (sws_accept_policy_t)h.policy;
    ls->naddrs = h.naddrs;
    ls->ngroups = h.ngroups;
    st->old_pid = (pid_t)h.old_pid;
    st->backlog = h.backlog;
    const uint8_t *p = buf + sizeof(h);
    for (unsigned i = 0; i < h.naddrs; i++) {
        struct blob_addr a;
        memcpy(&a, p, sizeof(a));
        p += sizeof(a);
        if (a.name[sizeof(a.name) - 1] != '\0' || a.len == 0 || a.len > sizeof(a.ss)) {
            sws_upgrade_state_free(st);
            return sws_errf(err, errlen, "upgrade state: listen address %u is malformed", i);
        }
        memcpy(ls->addrs[i].name, a.name, sizeof(a.name));
        memcpy(&ls->addrs[i].ss, a.ss, sizeof(a.ss));
        ls->addrs[i].len = (socklen_t)a.len;
    }
    st->nadmin = h.nadmin;
    for (unsigned i = 0; i < h.nadmin; i++) {
        memcpy(st->admin_names[i], p, SWS_UPGRADE_ADMIN_NAME);
        p += SWS_UPGRADE_ADMIN_NAME;
        if (st->admin_names[i][SWS_UPGRADE_ADMIN_NAME - 1] != '\0') {
            sws_upgrade_state_free(st);
            return sws_errf(err, errlen, "upgrade state: admin listener %u is malformed", i);
        }
    }
    st->tickets.n = h.ntickets;
    st->tickets.period_ms = h.ticket_period_ms;
    for (unsigned i = 0; i < h.ntickets; i++) {
        memcpy(&st->tickets.keys[i], p, sizeof(sws_ticket_key_t));
        p += sizeof(sws_ticket_key_t);
    }
    st->routes = sws__route_set__unpack(NULL, (size_t)h.routes_len, p);
    if (st->routes == NULL) {
        sws_upgrade_state_free(st);
        return sws_errf(err, errlen, "upgrade state: the RouteSet does not decode");
    }
    return 0;
}

void sws_upgrade_state_free(sws_upgrade_state_t *st)
{
    size_t nfds = (size_t)st->listen.naddrs * st->listen.ngroups;
    for (size_t i = 0; st->listen.fds != NULL && i < nfds; i++) {
        if (st->listen.fds[i] >= 0)
            close(st->listen.fds[i]);
    }
    free(st->listen.fds);
    free(st->listen.addrs);
    for (unsigned i = 0; i < SWS_UPGRADE_MAX_ADMIN; i++) {
        if (st->admin_fds[i] >= 0)
            close(st->admin_fds[i]);
    }
    if (st->routes != NULL)
        sws__route_set__free_unpacked(st->routes, NULL);
    sws_tickets_forget(&st->tickets);
    state_init(st);
}

/* ---- messages ---- */

static int send_fds(int fd, uint32_t kind, const int *fds, size_t n, char *err, size_t errlen)
{
    for (size_t first = 0; first < n; first += SWS_CHAN_MAX_FDS) {
        size_t count = n - first < SWS_CHAN_MAX_FDS ? n - first : SWS_CHAN_MAX_FDS;
        struct sws_upgrade_fds_msg m = { kind, (uint32_t)first, (uint32_t)count };
        if (sws_chan_send(fd, SWS_UPGRADE_FDS, &m, sizeof(m), fds + first, (unsigned)count, err,
                          errlen) < 0)
            return -1;
    }
    return 0;
}

int sws_upgrade_send_state(int fd, const sws_upgrade_state_t *st, const uint8_t *routes,
                           size_t routes_len, char *err, size_t errlen)
{
    uint8_t *blob;
    size_t len;
    if (sws_upgrade_blob_encode(st, routes, routes_len, &blob, &len, err, errlen) < 0)
        return -1;
    /* A file, not datagrams: a large RouteSet needs no framing, and the
     * queue (a few datagrams) never fills with it. */
    int mfd = memfd_create("scalws-upgrade", MFD_CLOEXEC);
    int rc = 0;
    if (mfd < 0) {
        rc = sws_errf(err, errlen, "upgrade state: memfd_create: %s", strerror(errno));
    } else {
        for (size_t off = 0; off < len && rc == 0;) {
            ssize_t n = write(mfd, blob + off, len - off);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                rc = sws_errf(err, errlen, "upgrade state: write: %s", strerror(errno));
            else
                off += (size_t)n;
        }
    }
    free(blob);
    struct sws_upgrade_state_msg head = { SWS_UPGRADE_MAGIC, SWS_UPGRADE_VERSION, len };
    if (rc == 0)
        rc = sws_chan_send(fd, SWS_UPGRADE_STATE, &head, sizeof(head), &mfd, 1, err, errlen);
    if (mfd >= 0)
        close(mfd);
    if (rc == 0)
        rc = send_fds(fd, SWS_UPGRADE_FD_LISTEN, st->listen.fds,
                      (size_t)st->listen.naddrs * st->listen.ngroups, err, errlen);
    if (rc == 0)
        rc = send_fds(fd, SWS_UPGRADE_FD_ADMIN, st->admin_fds, st->nadmin, err, errlen);
    return rc;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int sws_upgrade_recv_one(int fd, int timeout_ms, sws_chan_msg_t *m, char *err, size_t errlen)
{
    uint64_t deadline = now_ms() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int rc = sws_chan_recv(fd, m, err, errlen);
        if (rc != 0)
            return rc;
        uint64_t now = now_ms();
        if (now >= deadline)
            return 0;
        struct pollfd pfd = { .fd = fd, .events = POLLIN };
        if (poll(&pfd, 1, (int)(deadline - now)) < 0 && errno != EINTR)
            return sws_errf(err, errlen, "upgrade socket: poll: %s", strerror(errno));
    }
}

/* The blob in the memfd of a STATE message. */
static int take_blob(const sws_chan_msg_t *m, sws_upgrade_state_t *st, char *err, size_t errlen)
{
    struct sws_upgrade_state_msg head;
    struct stat sb;
    if (m->len != sizeof(head) || m->nfds != 1)
        return sws_errf(err, errlen, "upgrade socket: a malformed state message");
    memcpy(&head, m->body, sizeof(head));
    if (head.magic != SWS_UPGRADE_MAGIC || head.version != SWS_UPGRADE_VERSION)
        return sws_errf(err, errlen, "upgrade socket: state version %u, expected %u",
                        head.version, SWS_UPGRADE_VERSION);
    if (fstat(m->fds[0], &sb) < 0 || head.blob_len > SWS_UPGRADE_MAX_BLOB ||
        (uint64_t)sb.st_size != head.blob_len || head.blob_len == 0)
        return sws_errf(err, errlen, "upgrade socket: the state file does not hold %llu bytes",
                        (unsigned long long)head.blob_len);
    void *map = mmap(NULL, (size_t)head.blob_len, PROT_READ, MAP_PRIVATE, m->fds[0], 0);
    if (map == MAP_FAILED)
        return sws_errf(err, errlen, "upgrade socket: mmap the state: %s", strerror(errno));
    int rc = sws_upgrade_blob_decode(map, (size_t)head.blob_len, st, err, errlen);
    munmap(map, (size_t)head.blob_len);
    return rc;
}

/* The descriptors of an FDS message, in their places: they must come in
 * order, each kind's after the state. */
static int take_fds(sws_chan_msg_t *m, sws_upgrade_state_t *st, size_t *nlisten, size_t *nadmin,
                    char *err, size_t errlen)
{
    struct sws_upgrade_fds_msg h;
    if (m->len != sizeof(h))
        return sws_errf(err, errlen, "upgrade socket: a malformed descriptor message");
    memcpy(&h, m->body, sizeof(h));
    int *slots;
    size_t *got, total;
    if (h.kind == SWS_UPGRADE_FD_LISTEN) {
        slots = st->listen.fds;
        got = nlisten;
        total = (size_t)st->listen.naddrs * st->listen.ngroups;
    } else if (h.kind == SWS_UPGRADE_FD_ADMIN) {
        slots = st->admin_fds;
        got = nadmin;
        total = st->nadmin;
    } else {
        return sws_errf(err, errlen, "upgrade socket: descriptors of an unknown kind %u", h.kind);
    }
    if (h.first != *got || h.count != m->nfds || h.count > total - *got)
        return sws_errf(err, errlen, "upgrade socket: descriptors %u..+%u out of order or "
                        "missing (%zu of %zu received)", h.first, h.count, *got, total);
    for (unsigned i = 0; i < h.count; i++) {
        slots[*got + i] = m->fds[i];
        m->fds[i] = -1;
    }
    *got += h.count;
    return 0;
}

int sws_upgrade_recv_state(int fd, int timeout_ms, sws_upgrade_state_t *st, char *err,
                           size_t errlen)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    size_t nlisten = 0, nadmin = 0;
    int have_state = 0, rc = 0;
    state_init(st);
    while (rc == 0 && (!have_state || nlisten < (size_t)st->listen.naddrs * st->listen.ngroups ||
                       nadmin < st->nadmin)) {
        uint64_t now = now_ms();
        sws_chan_msg_t m;
        int got = sws_upgrade_recv_one(fd, now < deadline ? (int)(deadline - now) : 0, &m, err,
                                       errlen);
        if (got == 0)
            rc = sws_errf(err, errlen, "upgrade socket: the hand-off did not arrive in %d ms",
                          timeout_ms);
        if (got <= 0) {
            rc = -1;
            break;
        }
        if (m.type == SWS_UPGRADE_STATE && !have_state) {
            rc = take_blob(&m, st, err, errlen);
            have_state = rc == 0;
        } else if (m.type == SWS_UPGRADE_FDS && have_state) {
            rc = take_fds(&m, st, &nlisten, &nadmin, err, errlen);
        } else {
            rc = sws_errf(err, errlen, "upgrade socket: message %u out of place", m.type);
        }
        sws_chan_msg_close_fds(&m);
    }
    if (rc < 0)
        sws_upgrade_state_free(st);
    return rc;
}

void sws_upgrade_send_failed(int fd, const char *why)
{
    char err[128];
    size_t len = strlen(why);
    (void)sws_chan_send(fd, SWS_UPGRADE_FAILED, why, len < SWS_CHAN_MAX_BODY ? len :
                        SWS_CHAN_MAX_BODY, NULL, 0, err, sizeof(err));
}

void sws_upgrade_exec_failed(int fd, const char *why)
{
    char err[128];
    sws_chan_msg_t m;
    for (unsigned i = 0; i < 64 && sws_chan_recv(fd, &m, err, sizeof(err)) > 0; i++)
        sws_chan_msg_close_fds(&m);
    sws_upgrade_send_failed(fd, why);
}

/* ---- the binary ---- */

static char *join(const char *dir, const char *name)
{
    size_t len = strlen(dir) + 1 + strlen(name) + 1;
    char *out = malloc(len);
    if (out != NULL)
        snprintf(out, len, "%s/%s", dir, name);
    return out;
}

char *sws_upgrade_binary_path(const char *argv0, char *err, size_t errlen)
{
    char *out = NULL;
    if (argv0[0] == '/') {
        out = strdup(argv0);
    } else if (strchr(argv0, '/') != NULL) {
        char cwd[PATH_MAX];
        if (getcwd(cwd, sizeof(cwd)) == NULL) {
            sws_errf(err, errlen, "getcwd: %s", strerror(errno));
            return NULL;
        }
        out = join(cwd, argv0);
    } else {
        /* As the shell found it: the first executable of that name. */
        const char *path = getenv("PATH");
        char *copy = strdup(path != NULL ? path : "/usr/local/bin:/usr/bin:/bin");
        char *save = NULL;
        for (char *dir = copy != NULL ? strtok_r(copy, ":", &save) : NULL;
             dir != NULL && out == NULL; dir = strtok_r(NULL, ":", &save)) {
            char *cand = join(dir[0] != '\0' ? dir : ".", argv0);
            if (cand != NULL && cand[0] == '/' && access(cand, X_OK) == 0)
                out = cand;
            else
                free(cand);
        }
        free(copy);
        if (out == NULL) {
            sws_errf(err, errlen, "\"%s\" is not in PATH as an absolute path", argv0);
            return NULL;
        }
    }
    if (out == NULL)
        sws_errf(err, errlen, "out of memory");
    return out;
}

int sws_upgrade_check_binary(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return sws_errf(err, errlen, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sws_errf(err, errlen, "%s: not a regular file", path);
    if (access(path, X_OK) < 0)
        return sws_errf(err, errlen, "%s: not executable (mode %04o): %s", path,
                        (unsigned)(st.st_mode & 07777), strerror(errno));
    return 0;
}
