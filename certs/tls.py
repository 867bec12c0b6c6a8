"""Server TLS settings shared by every Headroom listener, and loading PEM pairs into them."""

import os
import ssl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from cryptography import x509

# TLS 1.3 suites are not affected by set_ciphers; this restricts TLS 1.2 to forward-secret AEADs.
_TLS12_CIPHERS = "ECDHE+AESGCM:ECDHE+CHACHA20"


class CertificateError(Exception):
    """A certificate/key pair could not be read, parsed or matched."""


def new_server_context() -> ssl.SSLContext:
    """An SSLContext with no certificate yet: TLS 1.2 minimum, modern ciphers, HTTP/1.1 only."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(_TLS12_CIPHERS)
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    context.options |= ssl.OP_NO_RENEGOTIATION
    # Advertising only http/1.1 keeps HTTP/2 off: the servers speak HTTP/1.1 only.
    context.set_alpn_protocols(["http/1.1"])
    return context


def check_pair(*, cert_pem: bytes, key_pem: bytes) -> x509.Certificate:
    """Parse the leaf certificate and prove the key matches it, without touching a live context.

    A failed load_cert_chain can leave a context holding a certificate without its key, so
    a pair is proven on a scratch context before it is installed on the serving one.
    """
    try:
        leaf = x509.load_pem_x509_certificate(cert_pem)
    except ValueError as err:
        raise CertificateError(f"cannot parse certificate: {err}") from err
    load_pair(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), cert_pem=cert_pem, key_pem=key_pem)
    return leaf


def load_pair(context: ssl.SSLContext, *, cert_pem: bytes, key_pem: bytes) -> None:
    """Install a PEM certificate chain and key on a context from memory.

    ssl only loads from paths, so the PEM goes through anonymous memory files (never
    the disk, which may be read-only); load_cert_chain on an existing context affects
    only handshakes that start afterwards.
    """
    try:
        if hasattr(os, "memfd_create"):
            with _memfd("tls.crt", cert_pem) as cert_path, _memfd("tls.key", key_pem) as key_path:
                context.load_cert_chain(cert_path, key_path)
        else:
            _load_via_tempdir(context, cert_pem=cert_pem, key_pem=key_pem)
    except (ssl.SSLError, OSError) as err:
        raise CertificateError(f"cannot load certificate and key: {err}") from err


@contextmanager
def _memfd(name: str, data: bytes) -> Iterator[str]:
    """An anonymous memory file holding ``data``, by its /proc path; closed on exit."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        yield f"/proc/self/fd/{fd}"
    finally:
        os.close(fd)


def _load_via_tempdir(context: ssl.SSLContext, *, cert_pem: bytes, key_pem: bytes) -> None:
    with tempfile.TemporaryDirectory(prefix="headroom-tls-") as tmp:
        cert_path = Path(tmp, "tls.crt")
        key_path = Path(tmp, "tls.key")
        cert_path.write_bytes(cert_pem)
        key_path.touch(mode=0o600)
        key_path.write_bytes(key_pem)
        context.load_cert_chain(cert_path, key_path)
