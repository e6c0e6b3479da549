/* The limits and timeouts a configuration carries, asserted in one place:
 * the config parser's Sws__Settings (test_config.c) and the table's
 * sws_settings_t built from it (test_table.c) name these fields alike, so
 * one macro checks either against the other or against a settings_numbers_t
 * of expected values. Include after <cmocka.h>. */
#ifndef SWS_TEST_SETTINGS_ASSERT_H
#define SWS_TEST_SETTINGS_ASSERT_H

#include <stdint.h>

typedef struct settings_numbers {
    uint64_t max_request_line, max_header_size, max_headers, max_body_size;
    uint64_t header_timeout_ms, body_timeout_ms, keepalive_timeout_ms, send_timeout_ms;
    uint64_t keepalive_requests, shutdown_timeout_ms;
} settings_numbers_t;

/* A macro, not a function: got and want point to any of the three types. */
#define assert_settings_numbers(got, want)                                   \
    do {                                                                     \
        const __typeof__(*(want)) w_ = *(want);                              \
        assert_int_equal((got)->max_request_line, w_.max_request_line);      \
        assert_int_equal((got)->max_header_size, w_.max_header_size);        \
        assert_int_equal((got)->max_headers, w_.max_headers);                \
        assert_int_equal((got)->max_body_size, w_.max_body_size);            \
        assert_int_equal((got)->header_timeout_ms, w_.header_timeout_ms);    \
        assert_int_equal((got)->body_timeout_ms, w_.body_timeout_ms);        \
        assert_int_equal((got)->keepalive_timeout_ms, w_.keepalive_timeout_ms); \
        assert_int_equal((got)->send_timeout_ms, w_.send_timeout_ms);        \
        assert_int_equal((got)->keepalive_requests, w_.keepalive_requests);  \
        assert_int_equal((got)->shutdown_timeout_ms, w_.shutdown_timeout_ms); \
    } while (0)

#endif
