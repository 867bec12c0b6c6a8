"""Generate a CA, serving and client certificates (ECDSA P-256) for local runs, tests and
self-signing."""

import datetime
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# Back-dating absorbs small clock skew between this machine and the verifying peer.
_BACKDATE = datetime.timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class IssuedCertificate:
    """A PEM certificate and its PEM (PKCS#8, unencrypted) private key."""

    cert_pem: bytes
    key_pem: bytes


def service_dns_names(*, service: str, namespace: str) -> list[str]:
    """The names a client may use to reach a Service from inside the cluster."""
    return [
        service,
        f"{service}.{namespace}",
        f"{service}.{namespace}.svc",
        f"{service}.{namespace}.svc.cluster.local",
    ]


def generate_ca(
    *, common_name: str, valid_for: datetime.timedelta, now: datetime.datetime
) -> IssuedCertificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    key, builder = _start(subject=name, issuer=name, ca=True, now=now, valid_for=valid_for)
    cert = builder.add_extension(
        x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
    ).sign(key, hashes.SHA256())
    return IssuedCertificate(cert_pem=_cert_pem(cert), key_pem=_key_pem(key))


def generate_serving(
    *,
    ca: IssuedCertificate,
    dns_names: Sequence[str],
    ip_addresses: Sequence[str],
    valid_for: datetime.timedelta,
    now: datetime.datetime,
) -> IssuedCertificate:
    """A server certificate signed by ``ca`` for the given SANs (at least one is required)."""
    if not dns_names and not ip_addresses:
        raise ValueError("a serving certificate needs at least one DNS name or IP address")
    sans: list[x509.GeneralName] = [x509.DNSName(name) for name in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    common_name = dns_names[0] if dns_names else ip_addresses[0]
    return issue_leaf(
        ca=ca,
        subject=x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
        sans=sans,
        valid_for=valid_for,
        now=now,
    )


def issue_leaf(
    *,
    ca: IssuedCertificate,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    sans: Sequence[x509.GeneralName],
    valid_for: datetime.timedelta,
    now: datetime.datetime,
) -> IssuedCertificate:
    """A certificate for ``subject`` with one extended key usage, signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("the CA key must be an EC key")
    key, builder = _start(
        subject=subject, issuer=ca_cert.subject, ca=False, now=now, valid_for=valid_for
    )
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False).add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
        critical=False,
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    cert = builder.sign(ca_key, hashes.SHA256())
    return IssuedCertificate(cert_pem=_cert_pem(cert), key_pem=_key_pem(key))


def _start(
    *,
    subject: x509.Name,
    issuer: x509.Name,
    ca: bool,
    now: datetime.datetime,
    valid_for: datetime.timedelta,
) -> tuple[ec.EllipticCurvePrivateKey, x509.CertificateBuilder]:
    """A new key, and a certificate for it with the extensions every certificate has first."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _BACKDATE)
        .not_valid_after(now + valid_for)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
        .add_extension(_key_usage(ca=ca), critical=True)
    )
    return key, builder


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """Signing only; a CA also signs certificates and revocation lists."""
    unused = ("content_commitment", "key_encipherment", "data_encipherment", "key_agreement")
    off = dict.fromkeys((*unused, "encipher_only", "decipher_only"), False)
    return x509.KeyUsage(digital_signature=True, key_cert_sign=ca, crl_sign=ca, **off)


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
