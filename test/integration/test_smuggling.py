"""Request smuggling: every ambiguous framing is rejected with one 400 and a
close. Each bad request is followed, in the same send, by a valid request for
/smuggled: it must never be answered."""

from harness import Client, ServerTestCase, make_config

HOSTS = """
- name: "*"
  routes:
    - path: /
      respond: {status: 200, body: "front"}
    - path: /smuggled
      respond: {status: 200, body: "SMUGGLED"}
"""

SMUGGLED = b"GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"


def post(*headers, body=b"", version=b"HTTP/1.1", host=b"Host: x\r\n"):
    return b"POST / " + version + b"\r\n" + host + b"".join(h + b"\r\n" for h in headers) + \
        b"\r\n" + body


CHUNKED = b"Transfer-Encoding: chunked"

# name -> the bad request's bytes (SMUGGLED is appended).
CASES = {
    "cl_and_te": post(b"Content-Length: 4", CHUNKED, body=b"0\r\n\r\n"),
    "te_and_cl": post(CHUNKED, b"Content-Length: 40", body=b"0\r\n\r\n"),
    "duplicate_cl_same": post(b"Content-Length: 5", b"Content-Length: 5", body=b"hello"),
    "duplicate_cl_different": post(b"Content-Length: 5", b"Content-Length: 0", body=b"hello"),
    "cl_list": post(b"Content-Length: 5, 5", body=b"hello"),
    "cl_inner_space": post(b"Content-Length: 1 2", body=b"x" * 12),
    "cl_underscore": post(b"Content-Length: 1_0", body=b"x" * 10),
    "cl_plus": post(b"Content-Length: +5", body=b"hello"),
    "cl_hex": post(b"Content-Length: 0x10", body=b"x" * 16),
    "cl_negative": post(b"Content-Length: -1"),
    "te_gzip": post(b"Transfer-Encoding: gzip", body=b"0\r\n\r\n"),
    "te_chunked_then_gzip": post(b"Transfer-Encoding: chunked, gzip", body=b"0\r\n\r\n"),
    "te_identity": post(b"Transfer-Encoding: identity", body=b"0\r\n\r\n"),
    "te_two_headers_gzip_last": post(CHUNKED, b"Transfer-Encoding: gzip", body=b"0\r\n\r\n"),
    "te_chunked_misspelt": post(b"Transfer-Encoding: chunkedx", body=b"0\r\n\r\n"),
    "te_on_http10": post(CHUNKED, body=b"0\r\n\r\n", version=b"HTTP/1.0"),
    "obs_fold": post(b"X-Folded: a", b" b", b"Content-Length: 0"),
    "obs_fold_te": post(b"Transfer-Encoding:", b" chunked", body=b"0\r\n\r\n"),
    "bare_lf_request_line": b"POST / HTTP/1.1\nHost: x\r\nContent-Length: 0\r\n\r\n",
    "bare_lf_in_head": b"POST / HTTP/1.1\r\nHost: x\nContent-Length: 0\r\n\r\n",
    "bare_lf_head_end": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\n\n",
    "bare_cr_in_head": b"POST / HTTP/1.1\r\nHost: x\rContent-Length: 0\r\n\r\n",
    "space_before_colon": post(b"Content-Length : 5", body=b"hello"),
    "tab_before_colon": post(b"Transfer-Encoding\t: chunked", body=b"0\r\n\r\n"),
    "space_before_colon_host": b"POST / HTTP/1.1\r\nHost : x\r\nContent-Length: 0\r\n\r\n",
    "chunk_size_zz": post(CHUNKED, body=b"zz\r\nhello\r\n0\r\n\r\n"),
    "chunk_size_negative": post(CHUNKED, body=b"-1\r\nhello\r\n0\r\n\r\n"),
    "chunk_size_overflow": post(CHUNKED, body=b"ffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    "chunk_size_space": post(CHUNKED, body=b"5 \r\nhello\r\n0\r\n\r\n"),
    "chunk_ext_bad_char": post(CHUNKED, body=b"5;a\x01b\r\nhello\r\n0\r\n\r\n"),
    "chunk_ext_unterminated_quote": post(CHUNKED, body=b"5;a=\"b\r\nhello\r\n0\r\n\r\n"),
    "chunk_bare_lf_after_size": post(CHUNKED, body=b"5\nhello\r\n0\r\n\r\n"),
    "chunk_bare_lf_after_data": post(CHUNKED, body=b"5\r\nhello\n0\r\n\r\n"),
    "chunk_data_longer_than_size": post(CHUNKED, body=b"3\r\nhello\r\n0\r\n\r\n"),
    "chunk_last_bare_lf": post(CHUNKED, body=b"5\r\nhello\r\n0\n\n"),
    # Every byte of the chunked framing is checked (llhttp 8.1 skips some).
    "chunk_data_then_xx": post(CHUNKED, body=b"5\r\nhelloXX0\r\n\r\n"),
    "chunk_data_then_cr_cr": post(CHUNKED, body=b"5\r\nhello\r\r0\r\n\r\n"),
    "chunk_data_then_two_spaces": post(CHUNKED, body=b"5\r\nhello  0\r\n\r\n"),
    "chunk_data_then_two_nuls": post(CHUNKED, body=b"5\r\nhello\0\0" b"0\r\n\r\n"),
    "chunk_data_then_0_cr": post(CHUNKED, body=b"5\r\nhello0\r0\r\n\r\n"),
    "chunk_data_then_cr_x": post(CHUNKED, body=b"5\r\nhello\rX0\r\n\r\n"),
    "chunk_size_cr_x": post(CHUNKED, body=b"5\rXhello\r\n0\r\n\r\n"),
    "chunk_ext_cr_x": post(CHUNKED, body=b"5;a=b\rXhello\r\n0\r\n\r\n"),
    "last_chunk_cr_x": post(CHUNKED, body=b"5\r\nhello\r\n0\rX\r\n"),
    "body_end_cr_x": post(CHUNKED, body=b"5\r\nhello\r\n0\r\n\rX"),
    "body_end_cr_cr": post(CHUNKED, body=b"5\r\nhello\r\n0\r\n\r\r"),
    "trailer_cr_x": post(CHUNKED, body=b"0\r\nT: v\rX\r\n"),
    "trailer_bare_cr": post(CHUNKED, body=b"0\r\nT: v\rU: w\r\n\r\n"),
    "trailer_name_space": post(CHUNKED, body=b"0\r\nT U: v\r\n\r\n"),
    "trailer_value_nul": post(CHUNKED, body=b"0\r\nT: a\0b\r\n\r\n"),
    "head_bare_cr_between_headers": post(b"X: a\rY: b", b"Content-Length: 0"),
    "head_end_cr_cr": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\r",
    "head_end_cr_x": b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\rX",
    # Every field name is a token (RFC 9110 5.1).
    "name_inner_space": post(b"X A: b", b"Content-Length: 0"),
    "name_inner_space_te": post(b"Transfer Encoding: chunked", body=b"0\r\n\r\n"),
    "name_inner_tab": post(b"X\tA: b", b"Content-Length: 0"),
    "name_slash": post(b"X/A: b", b"Content-Length: 0"),
    "name_quote": post(b'X"A: b', b"Content-Length: 0"),
    "name_brackets": post(b"[X]: b", b"Content-Length: 0"),
    "name_at": post(b"X@A: b", b"Content-Length: 0"),
    "name_del": post(b"X\x7fA: b", b"Content-Length: 0"),
    "name_obs_text": post(b"X\xc3\xa9: b", b"Content-Length: 0"),
    "name_nul": post(b"X\0A: b", b"Content-Length: 0"),
}


class Smuggling(ServerTestCase):
    def setUp(self):
        super().setUp()
        self.srv = self.server(make_config(HOSTS))

    def check(self, name):
        c = self.client(self.srv)
        c.send(CASES[name] + SMUGGLED)
        closed = c.read_until_close()
        self.assertNotIn(b"SMUGGLED", c.buf, "the smuggled request was answered")
        responses = []
        while c.buf:
            responses.append(c.read_response())
        self.assertEqual([r.status for r in responses], [400], responses)
        self.assertTrue(closed, "connection left open after the 400")


def _add_case(name):
    setattr(Smuggling, "test_" + name, lambda self: self.check(name))


for _name in CASES:
    _add_case(_name)


class SmugglingControl(ServerTestCase):
    """The same shapes, well formed, are served: the cases above fail for the
    flaw they carry, not for the shape around it."""

    def test_valid_forms_are_served_with_the_next_request(self):
        srv = self.server(make_config(HOSTS))
        good = [post(b"Content-Length: 5", body=b"hello"),
                post(CHUNKED, body=b"5;a=\"d e\"\r\nhello\r\n0\r\n\r\n"),
                post(b"Content-Length:   5  ", body=b"hello"),
                post(CHUNKED, body=b"2\r\nhe\r\n3;x\r\nllo\r\n0\r\nT: v\r\n\r\n"),
                post(b"X!#$%&'*+-.^_`|~09az: b", b"Content-Length: 0")]
        for raw in good:
            with Client(srv.port) as c:
                c.send(raw + SMUGGLED)
                self.assertEqual(c.read_response().body, b"front", raw)
                self.assertEqual(c.read_response().body, b"SMUGGLED", raw)
