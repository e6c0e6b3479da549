/* Choosing an upstream member: see upstream_balance.h and ADR 0011. */
#include "worker/upstream_balance.h"

#include <string.h>

void sws_upstream_tried_add(sws_upstream_tried_t *t, uint64_t id)
{
    t->id[t->n % SWS_UPSTREAM_TRIED_MAX] = id;
    t->n++;
}

/* How much of `tried` a pick avoids, loosened in this order until a
 * member is found (the header's retry rule). */
enum avoid { AVOID_TRIED, AVOID_LAST, AVOID_NONE };

typedef struct pick {
    sws_upstream_balancer_t *b;
    const sws_upstream_tried_t *tried;
    enum avoid avoid;
    uint64_t now_ms;
} pick_t;

static int avoided(const pick_t *k, uint64_t id)
{
    const sws_upstream_tried_t *t = k->tried;
    if (t == NULL || t->n == 0 || k->avoid == AVOID_NONE)
        return 0;
    if (k->avoid == AVOID_LAST)
        return t->id[(t->n - 1) % SWS_UPSTREAM_TRIED_MAX] == id;
    uint32_t n = t->n < SWS_UPSTREAM_TRIED_MAX ? t->n : SWS_UPSTREAM_TRIED_MAX;
    for (uint32_t i = 0; i < n; i++)
        if (t->id[i] == id)
            return 1;
    return 0;
}

static int eligible(const pick_t *k, const sws_upstream_peer_t *p)
{
    const sws_upstream_balancer_t *b = k->b;
    return p->state == SWS_UPSTREAM_UP && p->weight > 0 &&
           (b->max_conns == 0 || p->active < b->max_conns) &&
           sws_upstream_health_available(&p->health, &b->health, k->now_ms) &&
           !avoided(k, p->id);
}

/* a carries less load than b relative to their weights: a.active / a.weight
 * < b.active / b.weight, in integers (weights are > 0 here). */
static int lighter(const sws_upstream_peer_t *a, const sws_upstream_peer_t *b)
{
    return (uint64_t)a->active * b->weight < (uint64_t)b->active * a->weight;
}

static int same_load(const sws_upstream_peer_t *a, const sws_upstream_peer_t *b)
{
    return (uint64_t)a->active * b->weight == (uint64_t)b->active * a->weight;
}

/* nginx's smooth weighted round robin over the eligible members (those
 * loaded like `tie` when given): each gains its weight, the highest is
 * picked and loses the total, so a heavy member's turns are spread between
 * the others' rather than taken in one run. */
static int smooth_round_robin(const pick_t *k, const sws_upstream_peer_t *tie)
{
    sws_upstream_peer_t *peers = k->b->peers;
    int best = -1;
    int64_t total = 0;
    for (uint32_t i = 0; i < k->b->npeers; i++) {
        sws_upstream_peer_t *p = &peers[i];
        if (!eligible(k, p) || (tie != NULL && !same_load(p, tie)))
            continue;
        p->current += p->weight;
        total += p->weight;
        if (best < 0 || p->current > peers[best].current)
            best = (int)i;
    }
    if (best >= 0)
        peers[best].current -= total;
    return best;
}

static int least_conn(const pick_t *k)
{
    const sws_upstream_peer_t *peers = k->b->peers;
    int best = -1;
    for (uint32_t i = 0; i < k->b->npeers; i++)
        if (eligible(k, &peers[i]) && (best < 0 || lighter(&peers[i], &peers[best])))
            best = (int)i;
    return best < 0 ? -1 : smooth_round_robin(k, &peers[best]);
}

/* splitmix64's finaliser: every input bit moves about half the output. */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t hash_key(sws_str_t key)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then mixed */
    for (size_t i = 0; i < key.len; i++)
        h = (h ^ (unsigned char)key.p[i]) * 0x100000001b3ull;
    return mix64(h ^ key.len);
}

/* ln(x) for x in (0, 1), without libm: x = m * 2^e with m in [sqrt(1/2),
 * sqrt(2)), and ln m = 2 atanh(z), z = (m - 1) / (m + 1), by its series:
 * |z| < 0.172, so six terms leave an error below 1e-9, far finer than any
 * weight. */
static double ln_unit(double x)
{
    uint64_t bits;
    memcpy(&bits, &x, sizeof(bits));
    int e = (int)((bits >> 52) & 0x7ff) - 1023;
    bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
    double m;
    memcpy(&m, &bits, sizeof(m));
    if (m >= 1.4142135623730951) {
        m *= 0.5;
        e++;
    }
    double z = (m - 1) / (m + 1), z2 = z * z;
    double series = 1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 + z2 / 11))));
    return e * 0.69314718055994530942 + 2 * z * series;
}

/* Weighted rendezvous: member i scores w_i / -ln(u_i) with u_i uniform in
 * (0, 1) from (key, id); the highest wins, and is picked with probability
 * w_i / sum(w). A member's score depends on the key and itself only, so
 * adding or removing one moves only the keys it wins or had (ADR 0011).
 * When every member weighs the same the score orders as u itself, so the
 * logarithm is skipped: the same winner, at a fraction of the cost. */
static double rendezvous_score(uint64_t key_hash, const sws_upstream_peer_t *p, int weighted)
{
    uint64_t h = mix64(key_hash ^ p->id_hash);
    double u = ((double)(h >> 11) + 0.5) * 0x1p-53;
    return weighted ? p->weight / -ln_unit(u) : u;
}

void sws_upstream_balance_prepare(sws_upstream_balancer_t *b)
{
    b->weighted = 0;
    for (uint32_t i = 0; i < b->npeers; i++) {
        b->peers[i].id_hash = mix64(b->peers[i].id);
        if (b->peers[i].weight != b->peers[0].weight)
            b->weighted = 1;
    }
}

static int rendezvous(const pick_t *k, sws_str_t key)
{
    const sws_upstream_peer_t *peers = k->b->peers;
    uint32_t n = k->b->npeers;
    int weighted = k->b->weighted;
    uint64_t kh = hash_key(key);
    int best = -1;
    double best_score = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (!eligible(k, &peers[i]))
            continue;
        double s = rendezvous_score(kh, &peers[i], weighted);
        /* An exact tie goes by id, so that the members' order in the table
         * does not matter. */
        if (best < 0 || s > best_score || (s == best_score && peers[i].id > peers[best].id)) {
            best = (int)i;
            best_score = s;
        }
    }
    return best;
}

static int choose(const pick_t *k, const sws_str_t *key)
{
    switch (k->b->kind) {
    case SWS_UPSTREAM_LEAST_CONN:
        return least_conn(k);
    case SWS_UPSTREAM_HASH:
        if (key != NULL && key->len > 0)
            return rendezvous(k, *key);
        return smooth_round_robin(k, NULL);
    default:
        return smooth_round_robin(k, NULL);
    }
}

int sws_upstream_balance_pick(sws_upstream_balancer_t *b, const sws_str_t *key,
                              const sws_upstream_tried_t *tried, uint64_t now_ms)
{
    pick_t k = { .b = b, .tried = tried, .now_ms = now_ms };
    int last_level = tried != NULL && tried->n > 0 ? AVOID_NONE : AVOID_TRIED;
    for (int level = AVOID_TRIED; level <= last_level; level++) {
        k.avoid = (enum avoid)level;
        int i = choose(&k, key);
        if (i < 0)
            continue;
        sws_upstream_peer_t *p = &b->peers[i];
        p->active++;
        sws_upstream_health_picked(&p->health, &b->health, now_ms);
        return i;
    }
    return -1;
}

static int find(const sws_upstream_peer_t *peers, uint32_t n, uint64_t id, int hint)
{
    if (hint >= 0 && (uint32_t)hint < n && peers[hint].id == id)
        return hint;
    for (uint32_t i = 0; i < n; i++)
        if (peers[i].id == id)
            return (int)i;
    return -1;
}

int sws_upstream_balance_find(const sws_upstream_balancer_t *b, uint64_t id, int hint)
{
    return find(b->peers, b->npeers, id, hint);
}

void sws_upstream_balance_done(sws_upstream_balancer_t *b, uint64_t id, int hint,
                               sws_upstream_outcome_t outcome, uint64_t now_ms)
{
    int i = sws_upstream_balance_find(b, id, hint);
    if (i < 0)
        return;
    sws_upstream_peer_t *p = &b->peers[i];
    if (p->active > 0)
        p->active--;
    p->requests++;
    if (outcome == SWS_UPSTREAM_OK)
        sws_upstream_health_success(&p->health);
    else if (outcome == SWS_UPSTREAM_FAILED)
        sws_upstream_health_failure(&p->health, &b->health, now_ms);
}

void sws_upstream_balance_carry(sws_upstream_peer_t *next, uint32_t nnext,
                                const sws_upstream_peer_t *prev, uint32_t nprev)
{
    for (uint32_t i = 0; i < nnext; i++) {
        sws_upstream_peer_t *p = &next[i];
        /* A generation usually keeps the members' order: same index first. */
        static const sws_upstream_peer_t fresh;
        int j = find(prev, nprev, p->id, (int)i);
        const sws_upstream_peer_t *from = j < 0 ? &fresh : &prev[j];
        p->active = from->active;
        p->current = from->current;
        p->requests = from->requests;
        p->health = from->health;
    }
}
