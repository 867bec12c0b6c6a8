"""Builders for certificates, Secret-volume layouts and TLS clients used by the certs tests."""

import asyncio
import datetime
import os
import ssl
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

from cryptography import x509

from certs.generate import IssuedCertificate, generate_ca, generate_serving

NOW = datetime.datetime.now(datetime.UTC)
DAY = datetime.timedelta(days=1)


def make_ca(
    *, common_name: str = "test-ca", valid_for: datetime.timedelta = DAY
) -> IssuedCertificate:
    return generate_ca(common_name=common_name, valid_for=valid_for, now=NOW)


def make_serving(
    ca: IssuedCertificate,
    *,
    dns_names: Sequence[str] = ("localhost",),
    ip_addresses: Sequence[str] = ("127.0.0.1",),
    valid_for: datetime.timedelta = DAY,
) -> IssuedCertificate:
    return generate_serving(
        ca=ca, dns_names=dns_names, ip_addresses=ip_addresses, valid_for=valid_for, now=NOW
    )


def serial_of(cert_pem: bytes) -> int:
    return x509.load_pem_x509_certificate(cert_pem).serial_number


def write_flat(directory: Path, *, ca: IssuedCertificate, serving: IssuedCertificate) -> None:
    """Plain files, as a local run or a hostPath mount has them."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "ca.crt").write_bytes(ca.cert_pem)
    (directory / "tls.crt").write_bytes(serving.cert_pem)
    (directory / "tls.key").write_bytes(serving.key_pem)


def write_secret_volume(
    directory: Path, *, ca: IssuedCertificate, serving: IssuedCertificate, version: str
) -> None:
    """The kubelet's Secret volume layout: a timestamped dir, ``..data`` swapped atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    data = directory / f"..{version}"
    data.mkdir()
    (data / "ca.crt").write_bytes(ca.cert_pem)
    (data / "tls.crt").write_bytes(serving.cert_pem)
    (data / "tls.key").write_bytes(serving.key_pem)
    link = directory / "..data"
    old = os.readlink(link) if link.is_symlink() else None
    tmp = directory / "..data_tmp"
    tmp.symlink_to(data.name)
    os.replace(tmp, link)
    for name in ("ca.crt", "tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(f"..data/{name}")
    if old is not None:
        for child in (directory / old).iterdir():
            child.unlink()
        (directory / old).rmdir()


def client_context(ca_pem: bytes) -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca_pem.decode())
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


@asynccontextmanager
async def echo_server(context: ssl.SSLContext) -> AsyncIterator[int]:
    """A TLS line-echo server on an ephemeral 127.0.0.1 port; yields the port."""

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                writer.write(line)
                await writer.drain()
        finally:
            writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


class Connection:
    """A client TLS connection that reports the certificate it was served."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        ssl_object = writer.get_extra_info("ssl_object")
        self.peer_serial = x509.load_der_x509_certificate(
            ssl_object.getpeercert(binary_form=True)
        ).serial_number
        self.alpn = ssl_object.selected_alpn_protocol()
        self.version = ssl_object.version()

    async def roundtrip(self, payload: bytes) -> bytes:
        self.writer.write(payload + b"\n")
        await self.writer.drain()
        return (await self.reader.readline()).rstrip(b"\n")

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def connect(
    port: int, context: ssl.SSLContext, *, server_hostname: str = "localhost"
) -> Connection:
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname=server_hostname
    )
    return Connection(reader, writer)
