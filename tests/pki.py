"""Certificates made for the TLS tests: a CA, a server, a client and a stranger."""

import datetime
import ipaddress

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


def _name(common):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(subject, key, issuer, issuer_key, ca=False, server=False):
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(_name(issuer))
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        loopback = x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
        builder = builder.add_extension(x509.SubjectAlternativeName([loopback]), critical=False)
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


def make_pki(d):
    """A CA, a server certificate for 127.0.0.1, a client certificate of that CA and a stranger's
    (another CA's) in directory ``d``: ``{"ca": crt, "server": (crt, key), "client": ..., "stranger": ...}``."""
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
