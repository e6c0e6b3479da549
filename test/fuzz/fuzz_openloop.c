/*
 * Fuzz target: how bench/openloop.c reads answers (on_readable, parse_head),
 * the one parser of the benchmark's fixed-rate client.
 *
 * Byte 0 sets the size of the pieces (1 to 64 bytes) in which the rest goes
 * down a socket pair, the way a server's answers reach the client's recv;
 * after each piece the client reads what there is. Each answer it calls
 * complete must have a whole head (ending with the blank line, at most
 * HEAD_MAX bytes), a status and a Content-Length, and no body byte left to
 * read; the connection then takes the next answer as the client's next
 * request would. At the end of the input the writer closes, and the client
 * must drop the connection (a read error), never read past its buffers.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The client itself, its main renamed: this target has libFuzzer's. */
#define main openloop_main
#include "bench/openloop.c"
#undef main

static conn_t conn;

static void broken(const char *what)
{
    fprintf(stderr, "fuzz_openloop: %s (head_len %zu, length %lld, body_left %lld)\n", what,
            conn.head_len, (long long)conn.length, (long long)conn.body_left);
    abort();
}

static void next_answer(void)
{
    conn.due = 0;
    conn.head_len = 0;
    conn.length = -1;
}

static void check_complete(void)
{
    if (conn.head_len < 4 || conn.head_len > HEAD_MAX ||
        memcmp(conn.head + conn.head_len - 4, "\r\n\r\n", 4) != 0)
        broken("complete without a whole head");
    if (conn.length < 0 || conn.body_left > 0)
        broken("complete with body left");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int sv[2];
    size_t piece, off;

    if (size < 1 || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return 0;
    piece = 1 + data[0] % 64;
    conn.fd = sv[1];
    if (fcntl(conn.fd, F_SETFL, O_NONBLOCK) < 0)
        abort();
    next_answer();
    for (off = 1; off < size && conn.fd >= 0; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        if (write(sv[0], data + off, n) != (ssize_t)n)
            abort();
        if (on_readable(-1, &conn)) {
            check_complete();
            next_answer();
        }
    }
    close(sv[0]);
    if (conn.fd >= 0) {
        /* Only the end of the stream is left: the client must drop it. */
        if (on_readable(-1, &conn) || conn.fd >= 0)
            broken("the end of the stream kept the connection");
    }
    return 0;
}
