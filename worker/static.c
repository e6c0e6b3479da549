/* Placeholder until the static handler lands: answers 501. */
#include "worker/static.h"

void sws_static_handle(sws_request_t *r)
{
    sws_response_error(r, 501);
}
