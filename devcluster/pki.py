"""Throwaway PKI for a local control plane: a CA, the API server's serving pair, the
service-account signing key, the front proxy's CA and client pair (the aggregation layer's,
which metrics-server's API is served through) and KWOK's serving pair; for real kubelets,
the API server's kubelet-client pair and each node's client and serving pairs."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from certs.generate import IssuedCertificate, generate_ca, generate_serving, issue_leaf

_VALIDITY = datetime.timedelta(days=2)
_API_SERVER_NAMES = (
    "localhost",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)
# The user the API server presents to kubelets (logs, exec, port-forward).
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"
# The user the API server presents to aggregated API servers.
FRONT_PROXY_USER = "front-proxy-client"


def generate_client(
    *,
    ca: IssuedCertificate,
    common_name: str,
    organizations: Sequence[str] = (),
    valid_for: datetime.timedelta,
    now: datetime.datetime,
) -> IssuedCertificate:
    """A client certificate signed by ``ca``: Kubernetes reads the user from the common
    name and the groups from the organizations."""
    if not common_name:
        raise ValueError("a client certificate needs a common name")
    attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
    attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return issue_leaf(
        ca=ca,
        subject=x509.Name(attributes),
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
        sans=[],
        valid_for=valid_for,
        now=now,
    )


def _write_secret(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    path.chmod(0o600)


def write_control_plane_pki(directory: Path, *, extra_ips: tuple[str, ...] = ()) -> None:
    """Writes ca.crt/.key, apiserver.crt/.key (127.0.0.1, localhost, kubernetes.default…,
    and ``extra_ips``) and sa.key/sa.pub into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = generate_ca(common_name="headroom-local-ca", valid_for=_VALIDITY, now=now)
    serving = generate_serving(
        ca=ca,
        dns_names=_API_SERVER_NAMES,
        ip_addresses=("127.0.0.1", "10.0.0.1", *extra_ips),
        valid_for=_VALIDITY,
        now=now,
    )
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    _write_secret(directory / "ca.key", ca.key_pem)
    (directory / "apiserver.crt").write_bytes(serving.cert_pem)
    _write_secret(directory / "apiserver.key", serving.key_pem)
    # KWOK serves simulated kubelets' metrics endpoints on loopback, as kubelets do: TLS.
    _write_pair(
        directory,
        "kwok",
        generate_serving(
            ca=ca,
            dns_names=("localhost",),
            ip_addresses=("127.0.0.1",),
            valid_for=_VALIDITY,
            now=now,
        ),
    )
    front_proxy = generate_ca(
        common_name="headroom-local-front-proxy-ca", valid_for=_VALIDITY, now=now
    )
    (directory / "front-proxy-ca.crt").write_bytes(front_proxy.cert_pem)
    _write_pair(
        directory,
        "front-proxy-client",
        generate_client(ca=front_proxy, common_name=FRONT_PROXY_USER, valid_for=_VALIDITY, now=now),
    )
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


def _ca(directory: Path) -> IssuedCertificate:
    return IssuedCertificate(
        cert_pem=(directory / "ca.crt").read_bytes(), key_pem=(directory / "ca.key").read_bytes()
    )


def _write_pair(directory: Path, name: str, issued: IssuedCertificate) -> None:
    (directory / f"{name}.crt").write_bytes(issued.cert_pem)
    _write_secret(directory / f"{name}.key", issued.key_pem)


def write_loopback_serving_pair(
    ca_directory: Path, directory: Path, name: str
) -> tuple[Path, Path]:
    """Issue ``<name>.crt``/``.key`` in ``directory`` from the CA in ``ca_directory``: a
    serving pair for 127.0.0.1 and localhost. Returns the two paths."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    pair = generate_serving(
        ca=_ca(ca_directory),
        dns_names=("localhost",),
        ip_addresses=("127.0.0.1",),
        valid_for=_VALIDITY,
        now=now,
    )
    _write_pair(directory, name, pair)
    return directory / f"{name}.crt", directory / f"{name}.key"


def write_kubelet_client_pki(directory: Path) -> None:
    """Writes kubelet-client.crt/.key, signed by the CA in ``directory``: the API server's
    identity towards kubelets."""
    now = datetime.datetime.now(datetime.UTC)
    client = generate_client(
        ca=_ca(directory), common_name=KUBELET_CLIENT_USER, valid_for=_VALIDITY, now=now
    )
    _write_pair(directory, "kubelet-client", client)


@dataclass(frozen=True)
class NodePki:
    """A kubelet's credentials: its client pair (user ``system:node:<name>``, group
    ``system:nodes``, as the Node authorizer expects) and its serving pair."""

    directory: Path

    @property
    def client_cert(self) -> Path:
        return self.directory / "client.crt"

    @property
    def client_key(self) -> Path:
        return self.directory / "client.key"

    @property
    def serving_cert(self) -> Path:
        return self.directory / "serving.crt"

    @property
    def serving_key(self) -> Path:
        return self.directory / "serving.key"


def write_node_pki(ca_directory: Path, directory: Path, *, node: str, ip: str) -> NodePki:
    """Issue a node's client and serving pairs from the CA in ``ca_directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca = _ca(ca_directory)
    client = generate_client(
        ca=ca,
        common_name=f"system:node:{node}",
        organizations=("system:nodes",),
        valid_for=_VALIDITY,
        now=now,
    )
    serving = generate_serving(
        ca=ca, dns_names=(node,), ip_addresses=(ip,), valid_for=_VALIDITY, now=now
    )
    _write_pair(directory, "client", client)
    _write_pair(directory, "serving", serving)
    return NodePki(directory)
