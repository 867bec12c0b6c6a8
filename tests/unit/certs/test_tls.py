import asyncio
import ssl

import pytest

from certs.tls import CertificateError, check_pair, load_pair, new_server_context
from tests.unit.certs import builders


def _serving_context() -> tuple[ssl.SSLContext, bytes]:
    ca = builders.make_ca()
    serving = builders.make_serving(ca)
    context = new_server_context()
    load_pair(context, cert_pem=serving.cert_pem, key_pem=serving.key_pem)
    return context, ca.cert_pem


def test_server_context_floor_is_tls_1_2() -> None:
    assert new_server_context().minimum_version == ssl.TLSVersion.TLSv1_2


def test_tls_1_2_negotiates_only_forward_secret_aead_suites() -> None:
    names = {cipher["name"] for cipher in new_server_context().get_ciphers()}
    tls12 = {name for name in names if not name.startswith("TLS_")}
    assert tls12
    assert all(name.startswith("ECDHE-") for name in tls12)
    assert all("GCM" in name or "CHACHA20" in name for name in tls12)


@pytest.mark.parametrize(
    ("max_version", "expected"),
    [
        pytest.param(ssl.TLSVersion.TLSv1_2, "TLSv1.2", id="tls1.2"),
        pytest.param(ssl.TLSVersion.TLSv1_3, "TLSv1.3", id="tls1.3"),
    ],
)
def test_handshake_offers_http11_only(max_version: ssl.TLSVersion, expected: str) -> None:
    context, ca_pem = _serving_context()
    client = builders.client_context(ca_pem)
    client.maximum_version = max_version

    async def scenario() -> tuple[str | None, str | None]:
        async with builders.echo_server(context) as port:
            conn = await builders.connect(port, client)
            await conn.close()
            return conn.alpn, conn.version

    assert asyncio.run(scenario()) == ("http/1.1", expected)


def test_check_pair_returns_the_leaf() -> None:
    serving = builders.make_serving(builders.make_ca())
    leaf = check_pair(cert_pem=serving.cert_pem, key_pem=serving.key_pem)
    assert leaf.serial_number == builders.serial_of(serving.cert_pem)


@pytest.mark.parametrize(
    ("cert_pem", "key_pem", "message"),
    [
        pytest.param(b"not pem", b"", "cannot parse certificate", id="garbage-cert"),
        pytest.param(None, b"not a key", "cannot load", id="garbage-key"),
        pytest.param(None, "other", "cannot load", id="mismatched-key"),
    ],
)
def test_check_pair_rejects(cert_pem: bytes | None, key_pem: bytes | str, message: str) -> None:
    serving = builders.make_serving(builders.make_ca())
    if key_pem == "other":
        key_pem = builders.make_serving(builders.make_ca()).key_pem
    assert isinstance(key_pem, bytes)
    with pytest.raises(CertificateError, match=message):
        check_pair(cert_pem=cert_pem or serving.cert_pem, key_pem=key_pem)
