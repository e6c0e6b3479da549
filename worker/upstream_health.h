/*
 * Passive health of one upstream member, as one worker sees it.
 *
 * No probes: the proxy reports how each request it sent to a member ended,
 * and max_fails failures within fail_window mark the member down for
 * cooldown. When the cooldown is over the member gets one trial request;
 * its success makes the member up again, its failure marks it down for
 * another cooldown. Any success while up forgets the failures counted.
 *
 * What counts as a failure is the proxy's decision (the retry
 * causes: connect failure, reset or close after the request was written,
 * read timeout before the response, a 502/503/504 answer); a request that
 * ends for another reason (the client went away) is reported as nothing.
 *
 * The window is counted from its first failure: max_fails failures less
 * than fail_window after the first one mark the member down; a failure
 * later than that begins a new window (nginx's fail_timeout does the same).
 * Failures reported while the member is down (requests sent before it was
 * marked) change nothing: the cooldown is not stretched by its own past.
 *
 * A trial that gets no verdict within a cooldown (its request is still
 * running, or was abandoned without a report) lets the next request try:
 * at most one trial per cooldown, and no member stays out for good because
 * a report was lost.
 *
 * Time is the caller's loop time in ms (sws_loop_now_ms); nothing here
 * reads a clock, so tests drive it with a fake one. Pure and per worker:
 * single-threaded, no allocation. Zero-initialised memory is a member that
 * is up with no failures.
 */
#ifndef SWS_WORKER_UPSTREAM_HEALTH_H
#define SWS_WORKER_UPSTREAM_HEALTH_H

#include <stdint.h>

/* A pool's `health` keys (docs/configuration.md). */
typedef struct sws_upstream_health_conf {
    uint32_t max_fails;      /* 0: never marked down */
    uint32_t fail_window_ms;
    uint32_t cooldown_ms;
} sws_upstream_health_conf_t;

#define SWS_UPSTREAM_MAX_FAILS 3u
#define SWS_UPSTREAM_FAIL_WINDOW_MS 10000u
#define SWS_UPSTREAM_COOLDOWN_MS 10000u

typedef enum sws_upstream_health_state {
    SWS_UPSTREAM_HEALTH_UP = 0,
    SWS_UPSTREAM_HEALTH_DOWN,  /* until until_ms; then a trial may be picked */
    SWS_UPSTREAM_HEALTH_TRIAL, /* the trial request is out since since_ms */
} sws_upstream_health_state_t;

typedef struct sws_upstream_health {
    uint64_t since_ms;     /* UP: start of the failure window; DOWN: when marked;
                            * TRIAL: when the trial was picked */
    uint32_t fails;        /* UP: failures in the window */
    uint8_t state;         /* sws_upstream_health_state_t */
    uint64_t failures;     /* every failure reported, for the admin API */
} sws_upstream_health_t;

/* May a new request go to this member at now_ms? Up, or down with the
 * cooldown over (a trial is due), or a trial without a verdict for a
 * cooldown. */
int sws_upstream_health_available(const sws_upstream_health_t *h,
                                  const sws_upstream_health_conf_t *conf, uint64_t now_ms);

/* A request was sent to the member (it was available): when a trial was
 * due, this request is the trial, and the member is not available again
 * until its verdict (or a cooldown). */
void sws_upstream_health_picked(sws_upstream_health_t *h, const sws_upstream_health_conf_t *conf,
                                uint64_t now_ms);

/* A request to the member succeeded: up, failures forgotten. Ignored while
 * down (a request older than the marking says nothing of now). */
void sws_upstream_health_success(sws_upstream_health_t *h);

/* A request to the member failed (see above for what counts). */
void sws_upstream_health_failure(sws_upstream_health_t *h, const sws_upstream_health_conf_t *conf,
                                 uint64_t now_ms);

/* The state the admin API shows ("up", "down"; a trial is still down). */
static inline int sws_upstream_health_is_down(const sws_upstream_health_t *h)
{
    return h->state != SWS_UPSTREAM_HEALTH_UP;
}

#endif
