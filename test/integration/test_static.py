"""The static action against a temp docroot: types, index, redirects,
conditional requests, ranges, and no escape from the root. Some tests use
curl, others raw sockets (curl would normalise the paths they need)."""

import os
import re
import resource

from harness import Client, ServerTestCase, curl, make_config, poll, socket_inodes, static_hosts

ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyz\n"  # 37 bytes
SECRET = b"TOP-SECRET-outside-the-root"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

FILES = {
    "index.html": b"<h1>home</h1>\n",
    "hello.txt": ALPHABET,
    "style.css": b"body { color: black }\n",
    "app.js": b"console.log(1);\n",
    "data.json": b'{"a": 1}\n',
    "pic.png": PNG,
    "blob.unknownext": b"\x00\x01\x02",
    "dir/index.html": b"dir index\n",
    "dir/sub/file.txt": b"nested\n",
    "empty.txt": b"",
}


def static_config(root="www", extra=""):
    return make_config(static_hosts(root, ", index: index.html" + extra))


# /ping answers without opening anything; the rest is static.
PING_STATIC_HOSTS = """
- name: "*"
  routes:
    - path: /ping
      match: exact
      respond: {status: 200, body: "pong"}
    - path: /
      static: {root: www, index: index.html}
"""


def client_sockets(pid):
    """How many TCP connections process pid holds (its sockets that are in
    /proc/net/tcp* and not listening)."""
    inodes = socket_inodes(pid)
    n = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if fields[9] in inodes and fields[3] != "0A":  # 0A: LISTEN
                    n += 1
    return n


def leave_one_fd(pid):
    """Lower pid's soft RLIMIT_NOFILE so that exactly one descriptor number
    is free below it (the next accept takes it); returns the old limits."""
    used = {int(fd) for fd in os.listdir("/proc/%d/fd" % pid)}
    free = [fd for fd in range(len(used) + 2) if fd not in used]
    old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    resource.prlimit(pid, resource.RLIMIT_NOFILE, (free[1], old[1]))
    return old


class Static(ServerTestCase):
    def start(self, config=None):
        srv = self.server(config or static_config(), start=False)
        www = os.path.join(srv.dir, "www")
        for name, data in FILES.items():
            path = os.path.join(www, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(data)
        with open(os.path.join(srv.dir, "secret.txt"), "wb") as f:
            f.write(SECRET)
        os.symlink("/etc", os.path.join(www, "etclink"))
        os.symlink("../secret.txt", os.path.join(www, "leak.txt"))
        os.symlink("hello.txt", os.path.join(www, "inside-link.txt"))
        srv.start()
        self.srv = srv
        return srv

    def get(self, path, headers=(), method="GET"):
        with Client(self.srv.port) as c:
            return c.get(path, headers=headers, method=method)

    def test_200_content_type_and_length(self):
        self.start()
        expect = {"/hello.txt": "text/plain", "/index.html": "text/html", "/style.css": "text/css",
                  "/app.js": ("text/javascript", "application/javascript"),
                  "/data.json": "application/json", "/pic.png": "image/png",
                  "/blob.unknownext": "application/octet-stream"}
        for path, ctype in expect.items():
            r = self.get(path)
            self.assertEqual(r.status, 200, path)
            self.assertEqual(r.body, FILES[path[1:]], path)
            self.assertEqual(r.header("Content-Length"), str(len(FILES[path[1:]])), path)
            got = (r.header("Content-Type") or "").split(";")[0].strip()
            self.assertIn(got, ctype if isinstance(ctype, tuple) else (ctype,), path)

    def test_empty_file(self):
        self.start()
        r = self.get("/empty.txt")
        self.assertEqual((r.status, r.body, r.header("Content-Length")), (200, b"", "0"))

    def test_absolute_root(self):
        self.start(static_config(root='"@DIR@/www"'))
        self.assertEqual(self.get("/hello.txt").body, ALPHABET)

    def test_index_for_directory(self):
        self.start()
        r = self.get("/")
        self.assertEqual((r.status, r.body), (200, FILES["index.html"]))
        self.assertEqual(self.get("/dir/").body, FILES["dir/index.html"])

    def test_directory_without_slash_redirects(self):
        self.start()
        r = self.get("/dir")
        self.assertEqual(r.status, 301)
        self.assertTrue((r.header("Location") or "").endswith("/dir/"), r)
        r = self.get("/dir/sub?x=1")
        self.assertEqual(r.status, 301)
        self.assertTrue((r.header("Location") or "").endswith("/dir/sub/?x=1"), r)

    def test_directory_without_index(self):
        self.start()
        self.assertEqual(self.get("/dir/sub/").status, 404)  # its index.html does not exist

    def test_404_missing(self):
        self.start()
        self.assertEqual(self.get("/nope.txt").status, 404)
        self.assertEqual(self.get("/dir/nope/").status, 404)

    def test_etag_if_none_match_304(self):
        self.start()
        r = self.get("/hello.txt")
        etag = r.header("ETag")
        self.assertTrue(etag, "no ETag")
        r304 = self.get("/hello.txt", headers=[("If-None-Match", etag)])
        self.assertEqual(r304.status, 304)
        self.assertEqual(r304.body, b"")
        self.assertEqual(r304.header("ETag"), etag)
        r = self.get("/hello.txt", headers=[("If-None-Match", '"something-else"')])
        self.assertEqual((r.status, r.body), (200, ALPHABET))
        r = self.get("/hello.txt", headers=[("If-None-Match", '"x", ' + etag)])
        self.assertEqual(r.status, 304)

    def test_etag_changes_with_content(self):
        self.start()
        etag = self.get("/hello.txt").header("ETag")
        path = os.path.join(self.srv.dir, "www", "hello.txt")
        with open(path, "wb") as f:
            f.write(ALPHABET * 2)
        st = os.stat(path)
        os.utime(path, (st.st_atime, st.st_mtime + 10))
        r = self.get("/hello.txt", headers=[("If-None-Match", etag)])
        self.assertEqual((r.status, r.body), (200, ALPHABET * 2))
        self.assertNotEqual(r.header("ETag"), etag)

    def test_last_modified_if_modified_since_304(self):
        self.start()
        r = self.get("/hello.txt")
        lm = r.header("Last-Modified")
        self.assertRegex(lm or "", r"^\w{3}, \d\d \w{3} \d{4} \d\d:\d\d:\d\d GMT$")
        r = self.get("/hello.txt", headers=[("If-Modified-Since", lm)])
        self.assertEqual((r.status, r.body), (304, b""))
        r = self.get("/hello.txt", headers=[("If-Modified-Since", "Thu, 01 Jan 1970 00:00:00 GMT")])
        self.assertEqual(r.status, 200)

    def test_range_first_bytes(self):
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=0-9")])
        self.assertEqual((r.status, r.body), (206, ALPHABET[:10]))
        self.assertEqual(r.header("Content-Range"), "bytes 0-9/%d" % len(ALPHABET))
        self.assertEqual(r.header("Content-Length"), "10")

    def test_range_suffix(self):
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=-5")])
        self.assertEqual((r.status, r.body), (206, ALPHABET[-5:]))
        n = len(ALPHABET)
        self.assertEqual(r.header("Content-Range"), "bytes %d-%d/%d" % (n - 5, n - 1, n))

    def test_range_open_end(self):
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=10-")])
        self.assertEqual((r.status, r.body), (206, ALPHABET[10:]))
        n = len(ALPHABET)
        self.assertEqual(r.header("Content-Range"), "bytes 10-%d/%d" % (n - 1, n))

    def test_range_end_past_size_is_clamped(self):
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=30-1000")])
        self.assertEqual((r.status, r.body), (206, ALPHABET[30:]))

    def test_range_unsatisfiable_416(self):
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=1000-")])
        self.assertEqual(r.status, 416)
        self.assertEqual(r.header("Content-Range"), "bytes */%d" % len(ALPHABET))
        self.assertNotIn(ALPHABET, r.body)

    def test_range_on_head(self):
        self.start()
        with Client(self.srv.port) as c:
            r = c.get("/hello.txt", headers=[("Range", "bytes=0-9")], method="HEAD")
            self.assertEqual((r.status, r.header("Content-Length")), (206, "10"))
            self.assertEqual(c.get("/index.html").body, FILES["index.html"])

    def test_keepalive_mixed_static_requests(self):
        self.start()
        with Client(self.srv.port) as c:
            for _ in range(3):
                self.assertEqual(c.get("/pic.png").body, PNG)
                self.assertEqual(c.get("/hello.txt", headers=[("Range", "bytes=-3")]).body,
                                 ALPHABET[-3:])
                self.assertEqual(c.get("/missing").status, 404)

    def test_no_escape_dot_segments(self):
        self.start()
        # Dot segments above the root and NUL are bad requests; an encoded
        # '/' is no separator, so the name holding it names no file
        # (docs/adr/0006-normalized-request-path.md).
        for path, status in [("/../secret.txt", 400), ("/dir/../../secret.txt", 400),
                             ("/%2e%2e/secret.txt", 400), ("/%2E%2E/secret.txt", 400),
                             ("/%2e%2e%2fsecret.txt", 404), ("/dir/..%2f..%2fsecret.txt", 404),
                             ("/..%2fsecret.txt", 404), ("/dir/%2e%2e/%2e%2e/secret.txt", 400),
                             ("/../../../../../../etc/passwd", 400),
                             ("/%2e%2e/%2e%2e/%2e%2e/etc/passwd", 400),
                             ("/hello.txt%00.png", 400), ("/./hello.txt/../../secret.txt", 400)]:
            with Client(self.srv.port) as c:
                c.send(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                responses, _ = c.responses_until_close()
            self.assertEqual(len(responses), 1, path)
            r = responses[0]
            self.assertEqual(r.status, status, "%s -> %r" % (path, r))
            self.assertNotIn(SECRET, r.body, path)
            self.assertNotIn(b"root:", r.body, path)

    def test_no_escape_symlinks(self):
        self.start()
        for path in ["/etclink/passwd", "/etclink/hostname", "/leak.txt"]:
            r = self.get(path)
            self.assertEqual(r.status, 403, "%s -> %r" % (path, r))
            self.assertNotIn(SECRET, r.body, path)
            self.assertNotIn(b"root:", r.body, path)
        # A symlink that stays inside the root is served.
        self.assertEqual(self.get("/inside-link.txt").body, ALPHABET)

    def test_follow_symlinks_allows_leaving_root(self):
        self.start(static_config(extra=", follow_symlinks: true"))
        self.assertEqual(self.get("/leak.txt").body, SECRET)

    def test_method_not_allowed(self):
        self.start()
        with Client(self.srv.port) as c:
            c.send(b"DELETE /hello.txt HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n")
            self.assertEqual(c.read_response().status, 405)

    def test_curl_get_and_head(self):
        self.start()
        p = curl(self.srv.url("/hello.txt"))
        self.assertEqual((p.returncode, p.stdout), (0, ALPHABET), p.stderr)
        p = curl("-I", self.srv.url("/hello.txt"))
        self.assertEqual(p.returncode, 0, p.stderr)
        head = p.stdout.decode("latin-1")
        self.assertRegex(head, r"^HTTP/1\.1 200 ")
        self.assertRegex(head, r"(?im)^content-length: %d\r$" % len(ALPHABET))
        self.assertRegex(head, r"(?im)^etag: ")
        self.assertRegex(head, r"(?im)^last-modified: ")

    def test_curl_range(self):
        self.start()
        p = curl("--range", "5-14", "-D", "-", self.srv.url("/hello.txt"))
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout
        self.assertRegex(out.decode("latin-1"), r"^HTTP/1\.1 206 ")
        self.assertTrue(out.endswith(b"\r\n\r\n" + ALPHABET[5:15]), out)

    def test_curl_keepalive_reuses_connection(self):
        self.start()
        p = curl("-v", self.srv.url("/hello.txt"), self.srv.url("/pic.png"), self.srv.url("/"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, ALPHABET + PNG + FILES["index.html"])
        self.assertIn(b"Re-using existing connection", p.stderr)

    def answer_without_fds(self, path, warm=False):
        """GET path on a connection that took the worker's last descriptor
        (after a GET of it with descriptors to spare when warm: the root is
        then held open, and the file's own open is what fails)."""
        srv = self.start(make_config(PING_STATIC_HOSTS, "logging: {access_log: off}"))
        worker = srv.wait_workers(1)[0]
        # An answer: the worker is done opening what it keeps (signalfd...).
        self.assertEqual(self.get("/ping").status, 200)
        if warm:
            self.assertEqual(self.get(path).status, 200)
        # The readiness probes' and the warm-up's connections are gone.
        poll(lambda: client_sockets(worker) == 0, what="the worker to close its connections")
        old = leave_one_fd(worker)
        try:
            with Client(srv.port) as c:
                return c.get(path)
        finally:
            resource.prlimit(worker, resource.RLIMIT_NOFILE, old)

    def test_503_out_of_fds_opening_the_root(self):
        # A 404 here would be cached by a CDN for a file that exists.
        r = self.answer_without_fds("/hello.txt")
        self.assertEqual(r.status, 503, r)
        self.srv.wait_log(r"static: root .*/www: Too many open files")

    def test_503_out_of_fds_opening_the_file(self):
        r = self.answer_without_fds("/hello.txt", warm=True)
        self.assertEqual(r.status, 503, r)
        self.srv.wait_log(r"static: open \"hello\.txt\" below .*/www: Too many open files")

    def test_unreadable_root_is_logged(self):
        """A root the worker may not search answers 403 for every file and
        says why in the error log, once, not once per request."""
        if os.geteuid() != 0:
            self.skipTest("dropping privileges needs root")
        srv = self.start(make_config(static_hosts("www", ", index: index.html"), "user: nobody"))
        os.chmod(srv.dir, 0o711)  # the worker reaches www, but may not enter it
        os.chmod(os.path.join(srv.dir, "www"), 0o700)
        self.assertEqual([self.get(p).status for p in ("/hello.txt", "/", "/hello.txt")],
                         [403, 403, 403])
        line = r"\[error\] worker 0\[\d+\]: static: root \S*/www: Permission denied"
        srv.wait_log(line)
        self.assertEqual(len(re.findall(line, srv.log())), 1, srv.log_tail())
