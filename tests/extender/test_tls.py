"""HTTPS with client certificates, as kube-scheduler's extender tlsConfig uses it:
real handshakes against extender.httpserver with certificates made here."""

import datetime
import http.client
import ssl

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from builders import ServedInThread, scheduler_pod
from extender.app import build_extender, create_app
from extender.cli import main
from extender.config import Config
from extender.httpserver import HTTPServer, tls_context

PREFIX = "/cgpu-scheduler"


def _name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(subject, key, issuer, issuer_key, ca=False, server=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        import ipaddress
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                                        critical=False)
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        builder = builder.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path, key, cert):
    path.with_suffix(".key").write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                                           serialization.PrivateFormat.PKCS8,
                                                           serialization.NoEncryption()))
    path.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return str(path.with_suffix(".crt")), str(path.with_suffix(".key"))


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    files = {}
    for ca_name in ("ca", "other-ca"):
        key = ec.generate_private_key(ec.SECP256R1())
        files[ca_name] = (_write(d / ca_name, key, _certificate(ca_name, key, ca_name, key, ca=True)), key)
    ca_key = files["ca"][1]
    server_key = ec.generate_private_key(ec.SECP256R1())
    files["server"] = _write(d / "server", server_key,
                             _certificate("cgpu-extender", server_key, "ca", ca_key, server=True))
    client_key = ec.generate_private_key(ec.SECP256R1())
    files["client"] = _write(d / "client", client_key, _certificate("kube-scheduler", client_key, "ca", ca_key))
    stranger_key = ec.generate_private_key(ec.SECP256R1())
    files["stranger"] = _write(d / "stranger", stranger_key,
                               _certificate("stranger", stranger_key, "other-ca", files["other-ca"][1]))
    return {"ca": files["ca"][0][0], "server": files["server"], "client": files["client"],
            "stranger": files["stranger"]}


@pytest.fixture(scope="module")
def served(pki):
    app = create_app(Config(), extender=build_extender(Config()))
    with ServedInThread(HTTPServer(app, "127.0.0.1", 0, threads=2,
                                   ssl_context=tls_context(*pki["server"], pki["ca"]))) as server:
        yield server


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
    app = create_app(Config(), extender=build_extender(Config()))
    server = HTTPServer(app, "127.0.0.1", 0, threads=2, ssl_context=tls_context(*pki["server"], pki["ca"]),
                        probe_port=0)
    with ServedInThread(server):
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
