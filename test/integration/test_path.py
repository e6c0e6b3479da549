"""One normalized path for routing and every action (docs/adr/0006): a
/private/ route answering 403 in front of a / static route whose root holds
private/secret.txt. No spelling of the secret's path reaches the file:
each is routed to the 403, refused (400), or names no file (404). Raw
sockets, since curl would normalise the paths first."""

import os

from harness import Client, ServerTestCase, make_config, poll, request

SECRET = b"TOP-SECRET-behind-the-private-route"
PUBLIC = b"public\n"

CONFIG = make_config("""
- name: "*"
  routes:
    - path: /private/
      respond: {status: 403, body: "forbidden\\n"}
    - path: /
      static: {root: www, index: index.html}
""")

# path as sent -> the status it must get (never the secret's 200)
BYPASS = [
    ("/private/secret.txt", 403),
    ("/%70rivate/secret.txt", 403),
    ("/%70%72%69%76%61%74%65/%73ecret.txt", 403),
    ("/private/%73ecret.txt", 403),
    ("//private/secret.txt", 403),
    ("///private//secret.txt", 403),
    ("/./private/secret.txt", 403),
    ("/private/./secret.txt", 403),
    ("/x/../private/secret.txt", 403),
    ("/dir/../private/secret.txt", 403),
    ("/%2e/private/secret.txt", 403),
    ("/x/%2E%2e/private/secret.txt", 403),
    ("/x/.%2e/%70rivate/secret.txt", 403),
    ("/private/secret.txt?x=1", 403),
    ("http://x/%70rivate/secret.txt", 403),
    ("http://x//private/secret.txt", 403),
    ("/%2e%2e/", 400),
    ("/%2e%2e/private/secret.txt", 400),
    ("/../private/secret.txt", 400),
    ("/private/../../private/secret.txt", 400),
    ("/%70rivate/secret.txt%00", 400),
    ("/%7", 400),
    ("/private%2Fsecret.txt", 404),
    ("/private%2fsecret.txt", 404),
    ("/%70rivate%2Fsecret.txt", 404),
    ("/%2Fprivate/secret.txt", 404),
    ("/x/..%2Fprivate%2Fsecret.txt", 404),
]


class Path(ServerTestCase):
    def setUp(self):
        super().setUp()
        srv = self.server(CONFIG, start=False)
        www = os.path.join(srv.dir, "www")
        os.makedirs(os.path.join(www, "private"))
        os.makedirs(os.path.join(www, "dir"))
        with open(os.path.join(www, "private", "secret.txt"), "wb") as f:
            f.write(SECRET)
        with open(os.path.join(www, "public.txt"), "wb") as f:
            f.write(PUBLIC)
        with open(os.path.join(www, "dir", "index.html"), "wb") as f:
            f.write(b"dir\n")
        srv.start()
        self.srv = srv

    def get(self, target):
        with Client(self.srv.port) as c:
            c.send(request("GET", target))
            return c.read_response()

    def test_no_spelling_of_a_private_path_reaches_the_file(self):
        for target, status in BYPASS:
            r = self.get(target)
            self.assertNotIn(SECRET, r.body, target)
            self.assertEqual(r.status, status, "%s -> %r" % (target, r))

    def test_decoded_unreserved_and_merged_slashes_reach_public_files(self):
        for target in ["/public.txt", "/%70ublic.txt", "//public.txt", "/dir/../public.txt",
                       "/%2E/public.txt"]:
            r = self.get(target)
            self.assertEqual((r.status, r.body), (200, PUBLIC), target)

    def test_long_paths_that_change_use_the_connection_buffer(self):
        # Normal forms up to three times the input (raw bytes encoded), on
        # one connection: the buffer grows, the answers stay right.
        with Client(self.srv.port) as c:
            for n in (10, 400, 1500):
                c.send(request("GET", "/" + "x/../" * n + "public.txt"))
                r = c.read_response()
                self.assertEqual((r.status, r.body), (200, PUBLIC), n)
                c.send(request("GET", "//" + "\xe9" * (n * 2)))
                self.assertEqual(c.read_response().status, 404, n)
                c.send(request("GET", "/%70rivate/" + "%73" * n))
                self.assertEqual(c.read_response().status, 403, n)

    def test_directory_redirect_uses_the_normal_path(self):
        r = self.get("//dir")
        self.assertEqual(r.status, 301, r)
        # "//dir/" would be a network-path reference: a redirect to host "dir".
        self.assertEqual(r.header("Location"), "/dir/", r)

    def test_bad_path_is_400_with_the_reason_logged(self):
        self.assertEqual(self.get("/a/../../b").status, 400)
        self.srv.wait_log(r'bad path: "\.\." above the root \(400\)')

    def test_access_log_keeps_what_the_client_sent(self):
        self.assertEqual(self.get("/%70rivate//secret.txt").status, 403)
        poll(lambda: "/%70rivate//secret.txt" in self.srv.access_log(),
             what="the raw target in the access log")
