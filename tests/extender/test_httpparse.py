"""The server's HTTP/1.1 request parser: what h11 reads, it reads alike; what it refuses, it says why."""

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from extender.httpparse import BadRequest, RequestParser

HEADER_BYTES, BODY_BYTES = 4096, 1 << 16
TOKEN = st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~", min_size=1,
                max_size=12).map(str.encode)
VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), max_size=30).map(str.encode)
TARGET = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7e), min_size=1, max_size=40).map(
    lambda t: b"/" + t.encode())
RESERVED = {b"host", b"content-length", b"transfer-encoding", b"connection", b"expect", b"te", b"upgrade",
            b"trailer", b"keep-alive"}


def parse_all(data: bytes, cuts=(), parser=None) -> list:
    """Every request ``data`` holds, fed in the pieces ``cuts`` make."""
    parser = parser or RequestParser(HEADER_BYTES, BODY_BYTES)
    out, start = [], 0
    for end in sorted(set(cuts)) + [len(data)]:
        parser.feed(data[start:end])
        start = end
        while (request := parser.next()) is not None:
            out.append(request)
    return out


def h11_read(data: bytes) -> list:
    conn, out = h11.Connection(h11.SERVER), []
    conn.receive_data(data)
    while True:
        event = conn.next_event()
        if isinstance(event, h11.Request):
            current = [event.method, event.target, [(k, v) for k, v in event.headers], b""]
        elif isinstance(event, h11.Data):
            current[3] += event.data
        elif isinstance(event, h11.EndOfMessage):
            out.append(tuple(current))
            if conn.our_state is not h11.DONE:  # answer it, so that the next request is read
                conn.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
                conn.send(h11.EndOfMessage())
            conn.start_next_cycle()
        else:
            return out


@st.composite
def requests(draw):
    """One well-formed request as bytes, framed by Content-Length, chunks, or nothing."""
    method = draw(st.sampled_from([b"GET", b"POST", b"PUT", b"HEAD"]) | TOKEN.map(bytes.upper))
    headers = [(b"Host", b"x")] + [(n, v) for n, v in draw(st.lists(st.tuples(TOKEN, VALUE), max_size=5))
                                   if n.lower() not in RESERVED]
    body = draw(st.binary(max_size=300))
    framing = draw(st.sampled_from(["length", "chunked"] + (["none"] if not body else [])))
    if framing == "length":
        headers.append((b"Content-Length", b"%d" % len(body)))
        payload = body
    elif framing == "chunked":
        headers.append((b"Transfer-Encoding", b"chunked"))
        sizes = draw(st.lists(st.integers(1, 64), max_size=8))
        payload, at = b"", 0
        for size in sizes + [len(body)]:
            piece = body[at:at + size]
            if piece:
                payload += b"%x;ext=1\r\n" % len(piece) + piece + b"\r\n"
            at += len(piece)
        payload += b"0\r\nX-Trailer: t\r\n\r\n"
    else:
        payload = b""
    head = b"%s %s HTTP/1.1\r\n" % (method, draw(TARGET)) + b"".join(b"%s: %s\r\n" % h for h in headers)
    return head + b"\r\n" + payload, (method, body)


@settings(max_examples=300, deadline=None)
@given(st.lists(requests(), min_size=1, max_size=4), st.data())
def test_it_reads_a_stream_of_requests_as_h11_does_however_the_bytes_are_cut(stream, data):
    raw = b"".join(r for r, _ in stream)
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=10))
    ours = parse_all(raw, cuts)
    theirs = h11_read(raw)
    assert [(r.method, r.target, r.headers, r.body) for r in ours] == theirs
    assert [(r.method, r.body) for r in ours] == [expected for _, expected in stream]


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200) | st.lists(st.sampled_from(
    [b"GET / HTTP/1.1\r\n", b"Host: x\r\n", b"\r\n", b"Content-Length: 3\r\n", b"Transfer-Encoding: chunked\r\n",
     b"5\r\n", b"abc", b"0\r\n", b"\x00", b" folded\r\n", b"HTTP/2.0", b"Content-Length: x\r\n", b"\n"]),
    max_size=12).map(b"".join), st.data())
def test_any_bytes_give_requests_or_a_refusal_with_a_status_never_another_error(raw, data):
    cuts = data.draw(st.lists(st.integers(0, len(raw)), max_size=6))
    try:
        parse_all(raw, cuts)
    except BadRequest as exc:
        assert exc.status in (400, 413, 431, 501, 505) and exc.message


@pytest.mark.parametrize("raw, status", [
    (b"GARBAGE\r\n\r\n", 400),
    (b"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505),
    (b"GET / HTTP/1.1\r\n\r\n", 400),  # no Host
    (b"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n", 400),
    (b"GET / HTTP/1.1\r\nHost: x\nX: y\r\n\r\n", 400),  # a bare LF inside the head
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 70000\r\n\r\n", 413),
    (b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400),
    (b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + b"8000\r\n" + b"a" * 0x8000 +
     b"\r\n8001\r\n", 413),
    (b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 431),
])
def test_what_cannot_be_read_is_refused_with_its_status(raw, status):
    with pytest.raises(BadRequest) as refused:
        parse_all(raw)
    assert refused.value.status == status


def test_a_head_sent_a_byte_at_a_time_is_searched_once():
    parser = RequestParser(1 << 16, BODY_BYTES)
    raw = b"GET / HTTP/1.1\r\nHost: x\r\nX-A: " + b"a" * 60000 + b"\r\n\r\n"
    searched = []
    original = parser._find

    def find(end, within):
        searched.append(len(parser._buffer) - max(0, parser._scanned - len(end) + 1))
        return original(end, within)

    parser._find = find
    assert len(parse_all(raw, range(1, len(raw)), parser)) == 1
    assert sum(searched) < 5 * len(raw)  # each byte searched about once, not once per byte after it


def test_keep_alive_and_100_continue_are_read_from_the_head():
    close, old, cont = parse_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n"
                                 b"GET / HTTP/1.0\r\n\r\n"
                                 b"POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n")
    assert (close.keep_alive, old.keep_alive, cont.keep_alive) == (False, False, True)
    assert cont.expects_continue and not close.expects_continue


def test_blank_lines_before_a_request_are_skipped():
    (request,) = parse_all(b"\r\n\r\nGET /x HTTP/1.1\r\nHost: x\r\n\r\n")
    assert request.target == b"/x" and request.path == b"/x"
