/*
 * The build id, the one thing that differs between build/scalwsd and
 * build/scalwsd-alt (core/version.h). The Makefile passes SWS_BUILD_ID.
 */
#include "core/version.h"

#ifndef SWS_BUILD_ID
#define SWS_BUILD_ID "unknown"
#endif

const char *sws_build_id(void)
{
    return SWS_BUILD_ID;
}
