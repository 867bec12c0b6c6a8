"""Credentials for real kubelets: node client certificates the Node authorizer reads,
node serving certificates, and the API server's kubelet-client certificate."""

import ipaddress
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from devcluster.pki import (
    KUBELET_CLIENT_USER,
    generate_client,
    write_control_plane_pki,
    write_kubelet_client_pki,
    write_node_pki,
)
from tests.unit.certs.builders import DAY, NOW, make_ca


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def names(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> list[str]:
    return [str(a.value) for a in cert.subject.get_attributes_for_oid(oid)]


def test_the_api_server_certificate_names_the_guest_facing_address(tmp_path: Path) -> None:
    write_control_plane_pki(tmp_path, extra_ips=("10.251.0.1",))
    sans = load(tmp_path / "apiserver.crt").extensions.get_extension_for_class(
        x509.SubjectAlternativeName
    )
    assert ipaddress.ip_address("10.251.0.1") in sans.value.get_values_for_type(x509.IPAddress)


def test_node_and_kubelet_client_credentials_are_signed_by_the_cluster_ca(tmp_path: Path) -> None:
    write_control_plane_pki(tmp_path)
    ca = load(tmp_path / "ca.crt")
    node = write_node_pki(tmp_path, tmp_path / "nodes" / "n1", node="n1", ip="10.251.0.11")
    client = load(node.client_cert)
    client.verify_directly_issued_by(ca)
    assert names(client, NameOID.COMMON_NAME) == ["system:node:n1"]
    assert names(client, NameOID.ORGANIZATION_NAME) == ["system:nodes"]
    serving = load(node.serving_cert)
    serving.verify_directly_issued_by(ca)
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["n1"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.251.0.11")]
    assert oct(node.client_key.stat().st_mode & 0o777) == "0o600"
    write_kubelet_client_pki(tmp_path)
    kubelet_client = load(tmp_path / "kubelet-client.crt")
    kubelet_client.verify_directly_issued_by(ca)
    assert names(kubelet_client, NameOID.COMMON_NAME) == [KUBELET_CLIENT_USER]


def test_client_certificate_names_the_user_and_groups_and_has_no_sans() -> None:
    ca = make_ca()
    client = generate_client(
        ca=ca,
        common_name="system:node:realnode-1",
        organizations=["system:nodes"],
        valid_for=DAY,
        now=NOW,
    )
    cert = x509.load_pem_x509_certificate(client.cert_pem)
    cert.verify_directly_issued_by(x509.load_pem_x509_certificate(ca.cert_pem))
    assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == (
        "system:node:realnode-1"
    )
    assert [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)] == [
        "system:nodes"
    ]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_client_certificate_needs_a_common_name() -> None:
    with pytest.raises(ValueError, match="common name"):
        generate_client(ca=make_ca(), common_name="", valid_for=DAY, now=NOW)
