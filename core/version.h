/*
 * The version of ScalWS, printed by `scalwsd --version`, logged at startup
 * and sent in the default Server header.
 */
#ifndef SWS_CORE_VERSION_H
#define SWS_CORE_VERSION_H

#define SWS_VERSION "0.1.0"

#endif
