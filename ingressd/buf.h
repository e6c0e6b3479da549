/*
 * A bounded growing buffer for what the API server sends: a LIST page
 * (ingressd/kube.c) and a watch stream's partial line
 * (ingressd/watch_parse.c). The bound is what keeps a broken or hostile
 * server from taking the memory. ingressd's one thread; pure.
 */
#ifndef SWS_INGRESSD_BUF_H
#define SWS_INGRESSD_BUF_H

#include <stddef.h>

#define SWS_BUF_TOO_LARGE (-1)
#define SWS_BUF_NO_MEMORY (-2)

/* Append data[0..n) to *buf (*len bytes used, *cap allocated; all 0 and
 * NULL at first), growing from first_cap by doubling, never past max.
 * 0; SWS_BUF_TOO_LARGE when *len + n would pass max, SWS_BUF_NO_MEMORY:
 * nothing appended then, the buffer as it was. */
int sws_ingress_buf_append(char **buf, size_t *len, size_t *cap, size_t first_cap, size_t max,
                           const char *data, size_t n);

#endif
