import ipaddress

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from certs.generate import service_dns_names
from tests.unit.certs.builders import DAY, NOW, make_ca, make_serving


def test_service_dns_names_cover_every_in_cluster_spelling() -> None:
    assert service_dns_names(service="headroom-webhook", namespace="kube-headroom-system") == [
        "headroom-webhook",
        "headroom-webhook.kube-headroom-system",
        "headroom-webhook.kube-headroom-system.svc",
        "headroom-webhook.kube-headroom-system.svc.cluster.local",
    ]


def test_ca_is_a_ca() -> None:
    cert = x509.load_pem_x509_certificate(make_ca().cert_pem)
    assert cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_serving_certificate_is_signed_by_the_ca_for_its_sans() -> None:
    ca = make_ca()
    serving = make_serving(ca, dns_names=["svc.ns.svc"], ip_addresses=["127.0.0.1", "::1"])
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    cert = x509.load_pem_x509_certificate(serving.cert_pem)
    cert.verify_directly_issued_by(ca_cert)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == ["svc.ns.svc"]
    assert sans.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("127.0.0.1"),
        ipaddress.ip_address("::1"),
    ]
    usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert cert.not_valid_before_utc < NOW < cert.not_valid_after_utc <= NOW + DAY


def test_serving_certificate_needs_a_san() -> None:
    with pytest.raises(ValueError, match="at least one"):
        make_serving(make_ca(), dns_names=[], ip_addresses=[])
