/* Passive health of an upstream member: see upstream_health.h. */
#include "worker/upstream_health.h"

/* At least ms have passed since since_ms (a clock that went back counts as
 * no time passed). */
static int elapsed(uint64_t since_ms, uint64_t now_ms, uint32_t ms)
{
    return now_ms >= since_ms && now_ms - since_ms >= ms;
}

int sws_upstream_health_available(const sws_upstream_health_t *h,
                                  const sws_upstream_health_conf_t *conf, uint64_t now_ms)
{
    if (h->state == SWS_UPSTREAM_HEALTH_UP)
        return 1;
    /* Down: a trial is due after the cooldown. Trial: its verdict is late,
     * so another request may try (at most one per cooldown). */
    return elapsed(h->since_ms, now_ms, conf->cooldown_ms);
}

void sws_upstream_health_picked(sws_upstream_health_t *h, const sws_upstream_health_conf_t *conf,
                                uint64_t now_ms)
{
    if (h->state == SWS_UPSTREAM_HEALTH_UP || !sws_upstream_health_available(h, conf, now_ms))
        return;
    h->state = SWS_UPSTREAM_HEALTH_TRIAL;
    h->since_ms = now_ms;
}

void sws_upstream_health_success(sws_upstream_health_t *h)
{
    if (h->state == SWS_UPSTREAM_HEALTH_DOWN)
        return;
    h->state = SWS_UPSTREAM_HEALTH_UP;
    h->fails = 0;
}

void sws_upstream_health_failure(sws_upstream_health_t *h, const sws_upstream_health_conf_t *conf,
                                 uint64_t now_ms)
{
    h->failures++;
    switch (h->state) {
    case SWS_UPSTREAM_HEALTH_DOWN:
        return;
    case SWS_UPSTREAM_HEALTH_TRIAL:
        h->state = SWS_UPSTREAM_HEALTH_DOWN;
        h->since_ms = now_ms;
        return;
    default:
        break;
    }
    if (conf->max_fails == 0)
        return;
    if (h->fails == 0 || elapsed(h->since_ms, now_ms, conf->fail_window_ms)) {
        h->since_ms = now_ms;
        h->fails = 0;
    }
    if (++h->fails < conf->max_fails)
        return;
    h->state = SWS_UPSTREAM_HEALTH_DOWN;
    h->since_ms = now_ms;
    h->fails = 0;
}
