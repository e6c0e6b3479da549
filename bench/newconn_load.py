"""New plain connections, one request each with Connection: close, in three
shapes, to count a worker's system calls per connection (ADR 0057, 0058):

    /usr/bin/python3 bench/newconn_load.py PORT seq|par8|burst N

seq: one client, connections in turn; par8: 8 clients in parallel, N/8
each; burst: N/5 connections opened at once, then each sends and reads,
five times. Run under `perf stat -e raw_syscalls:sys_enter -p WORKER`
(or `strace -c -f -p WORKER`); the rate is not a figure (Python)."""

import socket
import sys
import threading

REQ = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def read_to_close(s):
    while s.recv(4096):
        pass
    s.close()


def one(port):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(REQ)
    read_to_close(s)


def main():
    port, mode, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    if mode == "seq":
        for _ in range(n):
            one(port)
    elif mode == "par8":
        ts = [threading.Thread(target=lambda: [one(port) for _ in range(n // 8)])
              for _ in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    elif mode == "burst":
        for _ in range(5):
            ss = [socket.create_connection(("127.0.0.1", port), timeout=10)
                  for _ in range(n // 5)]
            for s in ss:
                s.sendall(REQ)
            for s in ss:
                read_to_close(s)
    else:
        sys.exit("mode: seq, par8 or burst")


if __name__ == "__main__":
    main()
