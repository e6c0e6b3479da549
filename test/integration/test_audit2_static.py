"""An attacker's Range and path against static files, side by side with
nginx 1.22 (the audit of session 8; docs/configuration.md, `static`).
Every spelling of a path out of the root is test_path's and test_static's;
this pins down what a Range header can make a worker send."""

from harness import ServerTestCase
from test_static import ALPHABET, Static


class AuditRange(ServerTestCase):
    # test_static's files and client, not its tests.
    start = Static.start
    get = Static.get

    def test_many_overlapping_ranges_get_the_file_once(self):
        # nginx answers a multipart/byteranges of every range (up to
        # max_ranges); we send the file once, with 200, so overlapping
        # ranges never multiply the bytes sent.
        self.start()
        ranges = "bytes=" + ",".join(["0-%d" % (len(ALPHABET) - 1)] * 200)
        r = self.get("/hello.txt", headers=[("Range", ranges)])
        self.assertEqual((r.status, r.body), (200, ALPHABET))
        self.assertIsNone(r.header("Content-Range"))

    def test_a_range_that_does_not_parse_is_ignored(self):
        # RFC 9110 14.2: an invalid Range is ignored (nginx: 416 for these).
        self.start()
        for value in ("bytes=5-1", "bytes=0-1,", "bytes=x-"):
            r = self.get("/hello.txt", headers=[("Range", value)])
            self.assertEqual((r.status, r.body), (200, ALPHABET), value)

    def test_a_suffix_longer_than_the_file_is_the_whole_file(self):
        # RFC 9110 14.1.3; nginx answers 416 when the number overflows.
        self.start()
        r = self.get("/hello.txt", headers=[("Range", "bytes=-99999999999999999999")])
        n = len(ALPHABET)
        self.assertEqual((r.status, r.body), (206, ALPHABET))
        self.assertEqual(r.header("Content-Range"), "bytes 0-%d/%d" % (n - 1, n))


if __name__ == "__main__":
    import unittest
    unittest.main()
