/*
 * The version of ScalWS, printed by `scalwsd --version`, logged at startup
 * and, with server_tokens, sent in the Server header.
 *
 * SWS_VERSION is the release; the build id tells two builds of one release
 * apart (git describe of the checkout, or `make BUILD_ID=...`), so that an
 * operator, and a test of a binary upgrade, can see which binary serves.
 * It lives in core/version.c alone: the Makefile compiles that one object
 * per id, so build/scalwsd-alt (the id + "-alt") costs a compile and a link.
 */
#ifndef SWS_CORE_VERSION_H
#define SWS_CORE_VERSION_H

#define SWS_VERSION "0.1.0"

/* The build id: a static string, never NULL ("unknown" outside a git
 * checkout when none was given). Any process, any thread. */
const char *sws_build_id(void);

#endif
