import asyncio
import datetime
import logging
import ssl
from pathlib import Path

import pytest

from certs.source import (
    FileCertificateSource,
    SelfSignedCertificateSource,
    certificate_source,
)
from certs.tls import CertificateError
from tests.unit.certs.builders import (
    NOW,
    client_context,
    connect,
    echo_server,
    make_ca,
    make_serving,
    serial_of,
    write_flat,
    write_secret_volume,
)


def test_serves_the_pair_from_the_directory(tmp_path: Path) -> None:
    ca = make_ca()
    serving = make_serving(ca)
    write_flat(tmp_path, ca=ca, serving=serving)
    source = FileCertificateSource(directory=tmp_path, purpose="webhook")

    async def scenario() -> int:
        async with echo_server(source.ssl_context()) as port:
            conn = await connect(port, client_context(ca.cert_pem))
            assert await conn.roundtrip(b"ping") == b"ping"
            await conn.close()
            return conn.peer_serial

    assert asyncio.run(scenario()) == serial_of(serving.cert_pem)
    assert source.ca_pem() == ca.cert_pem
    assert source.healthy()


def test_ca_is_optional(tmp_path: Path) -> None:
    ca = make_ca()
    write_flat(tmp_path, ca=ca, serving=make_serving(ca))
    (tmp_path / "ca.crt").unlink()
    assert FileCertificateSource(directory=tmp_path, purpose="webhook").ca_pem() is None


@pytest.mark.parametrize(
    ("mutilate", "message"),
    [
        pytest.param(lambda d: (d / "tls.key").unlink(), "cannot read", id="missing-key"),
        pytest.param(lambda d: (d / "tls.crt").write_bytes(b"junk"), "cannot parse", id="bad-cert"),
        pytest.param(
            lambda d: (d / "tls.key").write_bytes(make_serving(make_ca()).key_pem),
            "cannot load",
            id="key-of-another-cert",
        ),
    ],
)
def test_start_up_fails_fast_on_unusable_files(tmp_path: Path, mutilate, message: str) -> None:
    ca = make_ca()
    write_flat(tmp_path, ca=ca, serving=make_serving(ca))
    mutilate(tmp_path)
    with pytest.raises(CertificateError, match=message):
        FileCertificateSource(directory=tmp_path, purpose="webhook")


def test_rotation_reaches_new_handshakes_and_keeps_open_connections(tmp_path: Path) -> None:
    ca = make_ca()
    first, second = make_serving(ca), make_serving(ca)
    write_secret_volume(tmp_path, ca=ca, serving=first, version="2024_01")
    source = FileCertificateSource(directory=tmp_path, purpose="webhook")
    client = client_context(ca.cert_pem)

    async def scenario() -> tuple[int, int, bytes]:
        async with echo_server(source.ssl_context()) as port:
            kept = await connect(port, client)
            assert await kept.roundtrip(b"before") == b"before"
            write_secret_volume(tmp_path, ca=ca, serving=second, version="2024_02")
            assert source.reload_if_changed()
            fresh = await connect(port, client)
            echoed = await kept.roundtrip(b"after")
            await kept.close()
            await fresh.close()
            return kept.peer_serial, fresh.peer_serial, echoed

    kept_serial, fresh_serial, echoed = asyncio.run(scenario())
    assert kept_serial == serial_of(first.cert_pem)
    assert fresh_serial == serial_of(second.cert_pem)
    assert echoed == b"after"


def test_unchanged_files_are_not_reloaded(tmp_path: Path) -> None:
    ca = make_ca()
    write_secret_volume(tmp_path, ca=ca, serving=make_serving(ca), version="2024_01")
    source = FileCertificateSource(directory=tmp_path, purpose="webhook")
    assert not source.reload_if_changed()
    assert source.healthy()


def test_a_bad_rotation_keeps_serving_the_old_pair_and_turns_unhealthy(tmp_path: Path) -> None:
    ca = make_ca()
    good = make_serving(ca)
    write_flat(tmp_path, ca=ca, serving=good)
    source = FileCertificateSource(directory=tmp_path, purpose="webhook")
    # A key that does not match the certificate, as a read straddling a swap would see.
    (tmp_path / "tls.key").write_bytes(make_serving(ca).key_pem)

    assert not source.reload_if_changed()
    assert source.healthy(), "one failed read is tolerated"
    assert not source.reload_if_changed()
    assert not source.reload_if_changed()
    assert not source.healthy()

    async def serial() -> int:
        async with echo_server(source.ssl_context()) as port:
            conn = await connect(port, client_context(ca.cert_pem))
            await conn.close()
            return conn.peer_serial

    assert asyncio.run(serial()) == serial_of(good.cert_pem)

    fixed = make_serving(ca)
    write_flat(tmp_path, ca=ca, serving=fixed)
    assert source.reload_if_changed()
    assert source.healthy()
    assert asyncio.run(serial()) == serial_of(fixed.cert_pem)


def test_expired_certificate_is_unhealthy(tmp_path: Path) -> None:
    ca = make_ca()
    write_flat(tmp_path, ca=ca, serving=make_serving(ca))
    later = NOW + datetime.timedelta(days=2)
    source = FileCertificateSource(directory=tmp_path, purpose="webhook", clock=lambda: later)
    assert not source.healthy()


def test_watcher_picks_up_a_rotation_by_itself(tmp_path: Path) -> None:
    ca = make_ca()
    write_secret_volume(tmp_path, ca=ca, serving=make_serving(ca), version="2024_01")
    source = FileCertificateSource(directory=tmp_path, purpose="webhook", poll_seconds=0.02)
    rotated = make_serving(ca)

    async def scenario() -> int:
        await source.start()
        try:
            write_secret_volume(tmp_path, ca=ca, serving=rotated, version="2024_02")
            async with echo_server(source.ssl_context()) as port:
                for _ in range(250):
                    conn = await connect(port, client_context(ca.cert_pem))
                    await conn.close()
                    if conn.peer_serial == serial_of(rotated.cert_pem):
                        return conn.peer_serial
                    await asyncio.sleep(0.02)
            return 0
        finally:
            assert source.healthy()
            await source.stop()

    assert asyncio.run(scenario()) == serial_of(rotated.cert_pem)


def test_self_signed_source_verifies_against_its_own_ca() -> None:
    source = SelfSignedCertificateSource(dns_names=["localhost"], ip_addresses=["127.0.0.1"])
    ca_pem = source.ca_pem()
    assert ca_pem is not None

    async def scenario() -> str | None:
        await source.start()
        async with echo_server(source.ssl_context()) as port:
            conn = await connect(port, client_context(ca_pem))
            await conn.close()
        await source.stop()
        return conn.alpn

    assert asyncio.run(scenario()) == "http/1.1"
    assert source.healthy()


def test_self_signed_certificate_is_refused_by_a_verifying_client() -> None:
    source = SelfSignedCertificateSource(dns_names=["localhost"], ip_addresses=["127.0.0.1"])

    async def scenario() -> None:
        async with echo_server(source.ssl_context()) as port:
            await connect(port, ssl.create_default_context())

    with pytest.raises(ssl.SSLCertVerificationError):
        asyncio.run(scenario())


@pytest.mark.parametrize(
    ("purpose", "line"),
    [
        # The runbook tells operators to grep for this exact line.
        ("metrics", "Initializing metrics certificate watcher using provided certificates"),
        ("webhook", "Initializing webhook certificate watcher using provided certificates"),
    ],
)
def test_factory_announces_provided_certificates(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, purpose: str, line: str
) -> None:
    ca = make_ca()
    write_flat(tmp_path, ca=ca, serving=make_serving(ca))
    with caplog.at_level(logging.INFO, logger="certs.source"):
        source = certificate_source(cert_dir=tmp_path, purpose=purpose)
    assert isinstance(source, FileCertificateSource)
    assert line in caplog.messages


def test_factory_warns_when_self_signing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="certs.source"):
        source = certificate_source(cert_dir=None, purpose="metrics")
    assert isinstance(source, SelfSignedCertificateSource)
    [record] = caplog.records
    assert record.levelno == logging.WARNING
    assert "self-signed" in record.getMessage()
    assert "skip verification" in record.getMessage()
