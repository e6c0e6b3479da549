#include "shm/ingress_zmq.h"

#include <stddef.h>

#include <zmq.h>

int sws_ingress_zmq_readable(void *sock)
{
    int events = 0;
    size_t len = sizeof(events);
    return zmq_getsockopt(sock, ZMQ_EVENTS, &events, &len) == 0 && (events & ZMQ_POLLIN);
}

void sws_ingress_zmq_skip_rest(void *sock, unsigned max)
{
    int more = 1;
    for (unsigned n = 0; more && n < max; n++) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        more = zmq_msg_recv(&part, sock, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&part);
        zmq_msg_close(&part);
    }
}
