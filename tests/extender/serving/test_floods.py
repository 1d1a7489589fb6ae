"""Floods no client may win: each class of benchmarks.hostile against ``cgpu-extender serve`` as deployed,
smaller, with bounds generous enough for CI — the worker's memory stays bounded, the flood's connections
are closed or refused, and the verbs and probes are answered meanwhile (within kube-scheduler's
httpTimeout: a reply, not a speed)."""

import http.client
import socket
import time

import orjson
import pytest

from benchmarks import hostile
from builders import scheduler_pod
from served import PREFIX, served


def test_a_body_in_one_byte_chunks_is_refused_early_and_costs_no_memory():
    result = hostile.chunks(clients=3, mib=2)
    assert result["rss_growth_mib"] < 40 and result["filters_ok"] == 20, result


def test_silent_connections_to_the_tls_port_hold_a_bounded_number_of_handshakes():
    result = hostile.tls_silent(connections=1000)
    assert result["still_open"] <= 64 and result["rss_growth_mib"] < 60, result
    assert result["mtls_filter"][0] == 200 and result["probe_healthz"][0] == 200, result


def test_clients_that_never_read_their_large_replies_hold_bounded_memory():
    result = hostile.unread(clients=30, names=50_000)
    assert result["rss_peak_growth_mib"] < 150 and result["filters_ok"] == 20, result


def test_past_the_reply_budget_the_longest_waiting_reader_is_closed():
    names = [f"unknown-node-{i:06d}" for i in range(100_000)]  # a ~6.6 MB reply each, ~4 MB of it in the kernel
    body = orjson.dumps({"Pod": scheduler_pod(), "Nodes": None, "NodeNames": names})
    request = (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body)) + body
    with served(limits=dict(reply_bytes=4 << 20)) as server:
        sockets = []
        for _ in range(8):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.connect(("127.0.0.1", server.port))
            s.sendall(request)
            sockets.append(s)
        time.sleep(2.0)
        closed = hostile.closed_by_server(sockets)
        for s in sockets:
            s.close()
        assert 0 < closed < 8  # the oldest went; those within the budget wait on
        assert ask(server, "GET", "/healthz")[0] == 200


def test_idle_connections_to_the_probe_port_never_lock_out_either_port():
    result = hostile.idle_flood(1500, "probe")
    assert result["connect_failures"] == 0 and result["still_open"] <= 128, result
    assert result["verb_filter"][0] == 200 and result["probe_healthz"][0] == 200, result


def test_more_idle_connections_than_open_files_never_lock_out_new_clients_nor_flood_the_log():
    result = hostile.idle_flood(1100, "verbs", nofile=1024)
    assert result["verb_filter"][0] == 200 and result["probe_healthz"][0] == 200, result
    assert result["still_open"] < 1024 - 128 and result["log_lines"] < 40, result


def test_binds_are_answered_while_clients_loop_on_metrics_inspect_and_plan():
    result = hostile.get_flood(nodes=300, clients=6, binds=20, seconds=0)
    assert result["gets_served"] > 0 and result["binds"] >= 10 and result["binds_ok"] == result["binds"], result


def test_a_preempt_over_crowded_nodes_gives_each_the_one_gpus_pods():
    result = hostile.preempt(candidates=50)
    assert result["status"] == 200 and result["nodes_kept"] == 50 and result["victims_per_node"] == [20], result


def test_sigterm_while_a_large_reply_is_read_slowly_lets_all_of_it_arrive():
    result = hostile.sigterm(names=100_000)
    assert result["whole"] and result["exit_code"] == 0, result


@pytest.fixture(scope="module")
def demo():
    with served() as server:
        yield server


def ask(server, method, path, body=b"", headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request(method, PREFIX + path, body, {"Content-Type": "application/json", **(headers or {})})
    reply = connection.getresponse()
    return reply.status, reply.read()


@pytest.mark.parametrize("headers", [{"Origin": "http://attacker.example"}, {"Origin": "null"},
                                     {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "Cross-Site"}])
def test_a_verb_from_a_browser_page_is_refused_and_changes_nothing(demo, headers):
    pod = scheduler_pod(name="rebound", uid="uid-rebound")
    before = ask(demo, "GET", "/inspect")[1]
    status, body = ask(demo, "POST", "/filter", orjson.dumps({"Pod": pod, "NodeNames": ["gpu-core-a"]}), headers)
    assert status == 403 and b"browser" in body
    bind = orjson.dumps({"PodName": "rebound", "PodNamespace": "default", "PodUID": "uid-rebound",
                         "Node": "gpu-core-a"})
    status, body = ask(demo, "POST", "/bind", bind, {"Host": "127.0.0.1", **headers})
    assert status == 403 and b"browser" in body
    assert ask(demo, "GET", "/inspect")[1] == before


def test_a_same_origin_fetch_metadata_header_alone_is_no_browser_page(demo):
    status, _ = ask(demo, "POST", "/filter", orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-a"]}),
                    {"Sec-Fetch-Site": "none"})
    assert status == 200


def test_the_server_header_is_gunicorns(demo):
    connection = http.client.HTTPConnection("127.0.0.1", demo.port, timeout=10)
    connection.request("GET", f"{PREFIX}/healthz")
    assert connection.getresponse().getheader("Server").startswith("gunicorn")


def chunked_filter(body: bytes) -> bytes:
    return (b"POST /cgpu-scheduler/filter HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))


def test_a_client_that_sends_its_large_body_slowly_holds_no_turn_of_the_others(demo):
    """Filters past the inline size (chunked ones too) are answered one at a time; a body still arriving
    must not hold that turn, or one slow client would stall every large filter for its body deadline."""
    body = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-a"]})
    with socket.create_connection(("127.0.0.1", demo.port), timeout=10) as slow:
        slow.sendall(chunked_filter(body)[:-30])  # all but the end of the body
        time.sleep(0.3)
        with socket.create_connection(("127.0.0.1", demo.port), timeout=10) as other:
            other.sendall(chunked_filter(body))
            assert other.recv(12).startswith(b"HTTP/1.1 200")


def test_past_the_waiting_requests_a_pool_takes_a_verb_is_answered_503_at_once(demo):
    from extender.serving import asgi

    assert asgi.WAITING[True] < 64  # large bodies: few wait at once, each holds its body
    with socket.create_connection(("127.0.0.1", demo.port), timeout=10) as first:
        slow = [socket.create_connection(("127.0.0.1", demo.port), timeout=10) for _ in range(asgi.WAITING[True])]
        body = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-a"]})
        try:
            for s in slow:
                s.sendall(chunked_filter(body)[:-30])
            time.sleep(0.3)
            first.sendall(chunked_filter(body))
            reply = first.recv(4096)
            assert reply.startswith(b"HTTP/1.1 503") and b"too many requests waiting" in reply
        finally:
            for s in slow:
                s.close()
