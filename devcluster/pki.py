"""Throwaway PKI for a local control plane: a CA, the API server's serving pair,
and the service-account signing key."""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from certs.generate import generate_ca, generate_serving

_VALIDITY = datetime.timedelta(days=2)
_API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


def _write_secret(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def write_control_plane_pki(directory: Path) -> None:
    """Writes ca.crt/.key, apiserver.crt/.key (127.0.0.1, localhost, kubernetes.default…)
    and sa.key/sa.pub into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = generate_ca(common_name="headroom-local-ca", valid_for=_VALIDITY, now=now)
    serving = generate_serving(
        ca=ca,
        dns_names=_API_SERVER_NAMES,
        ip_addresses=("127.0.0.1", "10.0.0.1"),
        valid_for=_VALIDITY,
        now=now,
    )
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    _write_secret(directory / "ca.key", ca.key_pem)
    (directory / "apiserver.crt").write_bytes(serving.cert_pem)
    _write_secret(directory / "apiserver.key", serving.key_pem)
    # The API server signs service-account tokens with RSA (RS256).
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    _write_secret(
        directory / "sa.key",
        sa_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
    )
    (directory / "sa.pub").write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
