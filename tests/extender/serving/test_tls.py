"""HTTPS with client certificates, as kube-scheduler's extender tlsConfig uses it:
real handshakes against the extender as served (gunicorn's TLS settings) with certificates made here."""

import http.client
import ssl
import time

import orjson
import pytest

from builders import scheduler_pod
from extender.cli.main import main
from pki import make_pki
from served import served as serving

PREFIX = "/cgpu-scheduler"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def served(pki):
    with serving(where=tls_where(pki)) as server:
        yield server


def tls_where(pki) -> dict:
    cert, key = pki["server"]
    return dict(tls_cert=str(cert), tls_key=str(key), client_ca=str(pki["ca"]))


def _filter(server, pki, client_files=None):
    context = ssl.create_default_context(cafile=pki["ca"])
    if client_files:
        context.load_cert_chain(*client_files)
    connection = http.client.HTTPSConnection("127.0.0.1", server.port, context=context, timeout=5)
    body = orjson.dumps({"Pod": scheduler_pod(), "NodeNames": ["gpu-core-a"]})
    connection.request("POST", f"{PREFIX}/filter", body, {"Content-Type": "application/json"})
    reply = connection.getresponse()
    return reply.status, orjson.loads(reply.read())


def test_the_scheduler_certificate_is_served(served, pki):
    status, reply = _filter(served, pki, pki["client"])
    assert status == 200 and reply["NodeNames"] == ["gpu-core-a"]


@pytest.mark.parametrize("who", [None, "stranger"], ids=["no-client-certificate", "certificate-of-another-ca"])
def test_a_client_without_a_certificate_of_our_ca_is_refused(served, pki, who):
    with pytest.raises((ssl.SSLError, ConnectionError)):
        _filter(served, pki, pki[who] if who else None)
    assert _filter(served, pki, pki["client"])[0] == 200  # and the server is still there


def test_a_large_reply_read_slowly_over_tls_arrives_whole(served, pki):
    context = ssl.create_default_context(cafile=pki["ca"])
    context.load_cert_chain(*pki["client"])
    names = [f"unknown-node-{i:06d}" for i in range(40_000)]
    body = orjson.dumps({"Pod": scheduler_pod(), "Nodes": None, "NodeNames": names})
    replies = []
    for pause in (0, 0.002):
        connection = http.client.HTTPSConnection("127.0.0.1", served.port, context=context, timeout=30)
        connection.request("POST", f"{PREFIX}/filter", body, {"Content-Type": "application/json"})
        reply = connection.getresponse()
        data = b""
        while chunk := reply.read(16384):
            data += chunk
            time.sleep(pause)
        replies.append((reply.status, data))
        connection.request("GET", f"{PREFIX}/healthz")  # the same connection goes on
        assert connection.getresponse().read() == b'{"status":"ok"}'
    assert replies[0] == replies[1] and replies[0][0] == 200 and len(replies[0][1]) > 2 << 20
    assert orjson.loads(replies[0][1])["NodeNames"] == []  # whole JSON: none of the unknown names fits


def test_plain_http_to_the_tls_port_is_refused(served):
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=5)
    with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
        connection.request("GET", f"{PREFIX}/healthz")
        connection.getresponse().read()


def test_serve_refuses_unusable_tls_files(tmp_path, capsys):
    assert main(["serve", "--demo", "--tls-cert", str(tmp_path / "no.crt")]) == 2
    assert "--tls-cert and --tls-key go together" in capsys.readouterr().err
    assert main(["serve", "--demo", "--tls-cert", str(tmp_path / "no.crt"), "--tls-key", str(tmp_path / "no.key")]) == 2
    assert "cannot use the TLS files" in capsys.readouterr().err


def test_the_probe_port_serves_probes_and_metrics_in_plain_http_and_nothing_else(pki):
    with serving(where=tls_where(pki), probe=True) as server:
        def get(method, path, body=None):
            connection = http.client.HTTPConnection("127.0.0.1", server.probe_port, timeout=5)
            connection.request(method, path, body, {"Content-Type": "application/json"})
            reply = connection.getresponse()
            return reply.status, reply.read()

        assert get("GET", f"{PREFIX}/healthz")[0] == 200 and get("GET", f"{PREFIX}/readyz")[0] == 200
        assert b"cgpu_request_duration_seconds" in get("GET", f"{PREFIX}/metrics")[1]
        for method, path in (("GET", f"{PREFIX}/inspect"), ("POST", f"{PREFIX}/bind"), ("POST", f"{PREFIX}/filter"),
                             ("GET", f"{PREFIX}/ui"), ("GET", f"{PREFIX}/plan")):
            assert get(method, path, b"{}")[0] == 404, path
