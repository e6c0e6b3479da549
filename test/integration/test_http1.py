"""HTTP/1.1 behaviour of a worker: keep-alive, pipelining, HEAD, Date and
Server, Connection: close, HTTP/1.0, request bodies, 100-continue, routing,
redirects."""

import datetime
import email.utils
import json
import os
import socket

from harness import (Client, ServerTestCase, free_port, make_config, request, segs_in,
                     static_hosts, syscr, HELLO_HOSTS)

ROUTING_HOSTS = """
- names: ["example.com"]
  routes:
    - path: /
      respond: {status: 200, body: "exact host"}
- names: ["*.example.com"]
  routes:
    - path: /
      respond: {status: 200, body: "wildcard host"}
- name: "only.test"
  routes:
    - path: /only
      match: exact
      respond: {status: 200, body: "only"}
- names: ["secure.test"]
  https_redirect: true
  routes:
    - path: /
      respond: {status: 200, body: "must not be served over http"}
- name: "*"
  routes:
    - path: /
      respond: {status: 200, headers: {Content-Type: text/plain, X-Route: root}, body: "catch-all"}
    - path: /x
      match: exact
      respond: {status: 200, body: "x exact"}
    - path: /x/
      respond: {status: 200, body: "x prefix"}
    - path: /x/y/
      respond: {status: 200, body: "xy prefix"}
    - path: /one
      match: exact
      respond: {status: 200, body: "one"}
    - path: /two
      match: exact
      respond: {status: 201, body: "two!"}
    - path: /old
      redirect: {status: 301, location: "https://example.com/new"}
    - path: /temp
      match: exact
      redirect: {status: 307, location: "/elsewhere"}
"""


class Http1(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.srv = self.server(make_config(ROUTING_HOSTS))

    def conn(self, **kw):
        return self.client(self.srv, **kw)

    def test_first_request_is_acknowledged_by_its_answer(self):
        """A new connection's first request gets no pure ACK of its own
        before the answer: the answer carries the acknowledgement, one
        loopback packet less per connection (ADR 0068). The kernel's
        delayed-ACK timer (40 ms or more) still sends one when the worker is
        slower than that, so a few connections are tried and one must show
        it; without the rule every one gets the extra ACK."""
        received = []
        for _ in range(5):
            with self.conn() as c:
                before = segs_in(c.sock)
                self.assertEqual(c.get("/one").body, b"one")
                received.append(segs_in(c.sock) - before)
            if received[-1] == 1:
                break
        self.assertIn(1, received, "segments received per first request and its answer")

    def test_keepalive_several_requests_one_connection(self):
        c = self.conn()
        for i in range(5):
            r = c.get("/one" if i % 2 else "/two")
            self.assertEqual(r.body, b"one" if i % 2 else b"two!")
            self.assertNotEqual((r.header("Connection") or "").lower(), "close")
        self.assertEqual(r.version, "HTTP/1.1")

    def test_pipelining_answers_in_order(self):
        c = self.conn()
        paths = ["/one", "/two", "/x", "/nothing-special", "/one", "/two"] * 4
        reqs = b"".join(request("GET", p) for p in paths)
        c.send(reqs + request("GET", "/one", headers=[("Connection", "close")]))
        expect = {"/one": b"one", "/two": b"two!", "/x": b"x exact",
                  "/nothing-special": b"catch-all"}
        for p in paths:
            self.assertEqual(c.read_response().body, expect[p], "response to %s" % p)
        last = c.read_response()
        self.assertEqual(last.body, b"one")
        self.assertTrue(c.wait_closed(), "no close after Connection: close")

    def test_head_has_content_length_and_no_body(self):
        c = self.conn()
        get = c.get("/two")
        # A GET pipelined behind the HEAD: any body bytes after the HEAD
        # response would corrupt the next response.
        c.send(request("HEAD", "/two") + request("GET", "/one"))
        head = c.read_response("HEAD")
        self.assertEqual(head.status, 201)
        self.assertEqual(head.header("Content-Length"), str(len(get.body)))
        self.assertEqual(c.read_response().body, b"one")

    def test_date_and_server_headers(self):
        r = self.conn().get("/")
        self.assertEqual(r.header("Server"), "scalws")
        date = r.header("Date")
        self.assertRegex(date or "", r"^(Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d "
                         r"(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
                         r"\d\d:\d\d:\d\d GMT$")
        when = email.utils.parsedate_to_datetime(date)
        now = datetime.datetime.now(datetime.timezone.utc)
        self.assertLess(abs((now - when).total_seconds()), 3600, "Date far from now")
        self.assertEqual(len(r.header_all("Date")), 1)

    def test_respond_headers_and_body(self):
        r = self.conn().get("/")
        self.assertEqual((r.status, r.body), (200, b"catch-all"))
        self.assertEqual(r.header("Content-Type"), "text/plain")
        self.assertEqual(r.header("X-Route"), "root")
        self.assertEqual(r.header("Content-Length"), "9")

    def test_client_connection_close(self):
        c = self.conn()
        r = c.get("/one", headers=[("Connection", "close")])
        self.assertEqual(r.body, b"one")
        self.assertEqual((r.header("Connection") or "").lower(), "close")
        self.assertTrue(c.wait_closed())

    def test_http10_closes_by_default(self):
        c = self.conn()
        c.send(request("GET", "/one", host=None, version="HTTP/1.0"))
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"one"))
        self.assertNotEqual((r.header("Connection") or "").lower(), "keep-alive")
        self.assertTrue(c.wait_closed())

    def reads_until_answered(self, act):
        """The worker's read(2) calls while act() runs and then a request on
        another, idle connection is answered: the worker is single-threaded,
        so by then it has handled every event act() caused (the clients'
        FINs among them)."""
        (worker,) = self.srv.worker_pids()
        sync = self.conn()
        self.assertEqual(sync.get("/one").body, b"one")
        before = syscr(worker)
        act()
        self.assertEqual(sync.get("/one").body, b"one")
        return syscr(worker) - before - 1  # sync's request

    def test_last_request_closes_without_a_lingering_read(self):
        # A client that said its request is its last (Connection: close, or
        # HTTP/1.0 without keep-alive) sends nothing more: the connection
        # closes at once after the answer, with no shutdown and no read of
        # the client's FIN (ADR 0057): one read(2) per connection.
        def last_requests():
            for i in range(20):
                with self.conn() as c:
                    if i % 2:
                        c.send(request("GET", "/one", version="HTTP/1.0"))
                        r = c.read_response()
                    else:
                        r = c.get("/one", headers=[("Connection", "close")])
                    self.assertEqual((r.status, r.body), (200, b"one"))
                    self.assertEqual((r.header("Connection") or "").lower(), "close")
                    self.assertTrue(c.wait_closed())
        reads = self.reads_until_answered(last_requests)
        # With the lingering close: 2 or more per connection (40).
        self.assertLessEqual(reads, 22, "read(2) calls for 20 connections")

    def test_input_after_a_close_we_chose_is_still_read(self):
        # We end the connection (an upgrade we do not take) where the client
        # did not ask to: it may be sending already, and what arrives after
        # our answer must still be read (the lingering close), or closing
        # with it unread would reset the connection and could destroy the
        # answer before the client read it.
        c = self.conn()
        r = c.get("/one", headers=[("Upgrade", "websocket"), ("Connection", "Upgrade")])
        self.assertEqual((r.body, r.header("Connection")), (b"one", "close"))
        self.assertTrue(c.read_until_close())

        def more_input():
            c.sock.sendall(os.urandom(100000))
            c.sock.shutdown(socket.SHUT_WR)
        self.assertGreaterEqual(self.reads_until_answered(more_input), 1,
                                "read(2) calls for input after the close")
        c.close()

    def test_http10_keepalive_when_asked(self):
        c = self.conn()
        c.send(request("GET", "/one", version="HTTP/1.0", headers=[("Connection", "keep-alive")]))
        r = c.read_response()
        self.assertEqual(r.body, b"one")
        self.assertEqual((r.header("Connection") or "").lower(), "keep-alive")
        c.send(request("GET", "/two", version="HTTP/1.0", headers=[("Connection", "keep-alive")]))
        self.assertEqual(c.read_response().body, b"two!")
        c.send(request("GET", "/one", version="HTTP/1.0"))
        self.assertEqual(c.read_response().body, b"one")
        self.assertTrue(c.wait_closed())

    def test_content_length_body(self):
        c = self.conn()
        body = b"a=1&b=" + b"z" * 5000
        c.send(request("POST", "/one", headers=[("Content-Length", str(len(body)))], body=body)
               + request("GET", "/two"))
        self.assertEqual(c.read_response().body, b"one")
        self.assertEqual(c.read_response().body, b"two!")

    def test_chunked_body_then_next_request(self):
        c = self.conn()
        chunked = b"5\r\nhello\r\n1a;name=value\r\n" + b"q" * 26 + b"\r\n0\r\nX-Trailer: t\r\n\r\n"
        c.send(request("POST", "/one", headers=[("Transfer-Encoding", "chunked")]) + chunked
               + request("GET", "/two"))
        self.assertEqual(c.read_response().body, b"one")
        self.assertEqual(c.read_response().body, b"two!")

    def test_chunked_body_in_pieces(self):
        c = self.conn()
        c.send(request("POST", "/one", headers=[("Transfer-Encoding", "chunked")]))
        for piece in (b"4\r\nab", b"cd\r", b"\n0\r\n", b"\r\n"):
            c.send(piece)
        self.assertEqual(c.read_response().body, b"one")

    def test_expect_100_continue(self):
        c = self.conn()
        c.send(request("POST", "/one", headers=[("Content-Length", "5"), ("Expect", "100-continue")]))
        interim = c.read_response(allow_1xx=True)
        self.assertEqual(interim.status, 100)
        c.send(b"hello")
        r = c.read_response()
        self.assertEqual((r.status, r.body), (200, b"one"))
        self.assertEqual(c.get("/two").body, b"two!")

    def test_routing_exact_host_case_insensitive_port_ignored(self):
        c = self.conn()
        self.assertEqual(c.get("/", host="example.com").body, b"exact host")
        self.assertEqual(c.get("/", host="EXAMPLE.Com:8080").body, b"exact host")

    def test_routing_wildcard_host(self):
        c = self.conn()
        self.assertEqual(c.get("/", host="a.example.com").body, b"wildcard host")
        self.assertEqual(c.get("/", host="A.B.Example.COM:1234").body, b"wildcard host")
        self.assertEqual(c.get("/", host="notexample.com").body, b"catch-all")

    def test_routing_catch_all_host(self):
        c = self.conn()
        self.assertEqual(c.get("/", host="example.org").body, b"catch-all")
        self.assertEqual(c.get("/", host="127.0.0.1:%d" % self.srv.port).body, b"catch-all")

    def test_routing_exact_and_longest_prefix(self):
        c = self.conn()
        for path, body in [("/x", b"x exact"), ("/x?q=1", b"x exact"), ("/x/", b"x prefix"),
                           ("/x/a", b"x prefix"), ("/x/y", b"x prefix"),
                           ("/x/y/", b"xy prefix"), ("/x/y/z/w", b"xy prefix"),
                           ("/xa", b"catch-all"), ("/one/more", b"catch-all")]:
            self.assertEqual(c.get(path).body, body, path)

    def test_404_when_no_route(self):
        c = self.conn()
        r = c.get("/other", host="only.test")
        self.assertEqual(r.status, 404)
        self.assertEqual(c.get("/only", host="only.test").body, b"only")
        # Exact: a longer path does not match.
        self.assertEqual(c.get("/only/", host="only.test").status, 404)

    def test_redirect_action(self):
        c = self.conn()
        r = c.get("/old/page")
        self.assertEqual(r.status, 301)
        self.assertEqual(r.header("Location"), "https://example.com/new")
        r = c.get("/temp")
        self.assertEqual(r.status, 307)
        self.assertEqual(r.header("Location"), "/elsewhere")

    def test_https_redirect(self):
        c = self.conn()
        r = c.get("/a/b?q=1", host="secure.test")
        self.assertEqual(r.status, 308)
        self.assertEqual(r.header("Location"), "https://secure.test/a/b?q=1")
        self.assertNotIn(b"must not be served", r.body)


class Http1Config(ServerTestCase):
    def test_server_connection_close_after_keepalive_requests(self):
        srv = self.server(make_config(HELLO_HOSTS, "keepalive_requests: 3"))
        with Client(srv.port) as c:
            for i in range(2):
                r = c.get("/")
                self.assertNotEqual((r.header("Connection") or "").lower(), "close")
            r = c.get("/")
            self.assertEqual(r.status, 200)
            self.assertEqual((r.header("Connection") or "").lower(), "close")
            self.assertTrue(c.wait_closed())

    def test_server_header_setting(self):
        srv = self.server(make_config(HELLO_HOSTS, 'server_header: "testsrv/1"'))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").header("Server"), "testsrv/1")

    def test_listen_list_ipv4_and_ipv6(self):
        srv = self.server(make_config(HELLO_HOSTS), start=False)
        port6 = free_port(socket.AF_INET6)
        srv.write_config(make_config(HELLO_HOSTS).replace(
            'listen: "127.0.0.1:@PORT@"', 'listen: ["127.0.0.1:@PORT@", "[::1]:%d"]' % port6))
        srv.start()
        srv.wait_ready(port=port6, family=socket.AF_INET6)
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").body, b"hello, world\n")
        with Client(port6, host="::1") as c:
            self.assertEqual(c.get("/").body, b"hello, world\n")

    def test_directory_redirect_stays_on_this_host(self):
        # "//docs" names the directory docs; "Location: //docs/" would send
        # the browser to the host "docs".
        srv = self.server(make_config(static_hosts('"@DIR@/www"')), start=False)
        os.makedirs(os.path.join(srv.dir, "www", "docs"))
        srv.start()
        with Client(srv.port) as c:
            r = c.get("//docs")
            self.assertEqual(r.status, 301, r)
            self.assertEqual(r.header("Location"), "/docs/")
            r = c.get("/docs?q=1")
            self.assertEqual(r.header("Location"), "/docs/?q=1")

    def test_access_log_combined(self):
        srv = self.server(make_config(HELLO_HOSTS, "logging: {access_log: combined}"))
        with Client(srv.port) as c:
            c.get("/logged-path?x=1", headers=[("User-Agent", "it-agent/1")])
        srv.stop()  # the log may be buffered until exit
        self.assertRegex(srv.access_log(), r'127\.0\.0\.1 .*"GET /logged-path\?x=1 HTTP/1\.1" 200 13 .*"it-agent/1"')

    def test_access_log_json_lines(self):
        srv = self.server(make_config(HELLO_HOSTS, "logging: {access_log: json}"))
        with Client(srv.port) as c:
            c.get("/json-path")
            c.get("/second")
        srv.stop()
        lines = [json.loads(line) for line in srv.access_log().splitlines()]
        self.assertEqual([(x["method"], x["path"], x["status"], x["remote"]) for x in lines],
                         [("GET", "/json-path", 200, "127.0.0.1"), ("GET", "/second", 200, "127.0.0.1")],
                         lines)
        self.assertEqual(lines[0]["bytes"], 13, lines[0])

    def test_access_log_off(self):
        srv = self.server(make_config(HELLO_HOSTS, "logging: {access_log: off}"))
        with Client(srv.port) as c:
            self.assertEqual(c.get("/").status, 200)
        srv.stop()
        self.assertEqual(srv.access_log(), "")


PARSER_HOSTS = """
- name: "*"
  routes:
    - path: /
      respond: {status: 200, body: "ok"}
""" + "".join("""    - path: /%d
      match: exact
      respond: {status: %d}
""" % (s, s) for s in (418, 422, 425, 426, 451, 507, 511))


class Http1Parser(ServerTestCase):
    """The parser's edges an operator sees: the request-line limit at its
    boundary, a request cut short by EOF in the error log, reason phrases."""

    def setUp(self):
        super().setUp()
        self.srv = self.server(make_config(
            PARSER_HOSTS, "limits: {max_request_line: 64}\nlogging: {level: info}"))

    def test_request_line_limit_excludes_crlf(self):
        # "GET " + path + " HTTP/1.1": 64 bytes with a 51-byte path
        with self.client(self.srv) as c:
            self.assertEqual(c.get("/" + "a" * 50).status, 200)
        c = self.client(self.srv)
        c.send(request("GET", "/" + "a" * 51))
        responses, closed = c.responses_until_close()
        self.assertEqual([r.status for r in responses], [414], responses)
        self.assertTrue(closed)

    def test_truncated_head_then_eof_logged(self):
        c = self.client(self.srv)
        c.send(b"GET / HTTP/1.1\r\nHo")
        c.sock.shutdown(socket.SHUT_WR)
        self.assertTrue(c.wait_closed(), "connection left open")
        self.srv.wait_log(r"\[info\] worker .*: client 127\.0\.0\.1: connection closed in the "
                          r"request head")

    def test_reason_phrases_of_the_registry(self):
        phrases = {418: "I'm a teapot", 422: "Unprocessable Content", 425: "Too Early",
                   426: "Upgrade Required", 451: "Unavailable For Legal Reasons",
                   507: "Insufficient Storage", 511: "Network Authentication Required"}
        c = self.client(self.srv)
        for status, reason in phrases.items():
            r = c.get("/%d" % status)
            self.assertEqual((r.status, r.reason), (status, reason))
