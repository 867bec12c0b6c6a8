"""Certificate sources: where a TLS listener gets its serving certificate, and how it stays fresh.

A source owns one ``ssl.SSLContext`` for the life of the process. A rotated certificate is
loaded into that same context, which changes what new handshakes present while connections
already established keep their session, so a rotation fails no handshake and no request.

``FileCertificateSource`` serves ``tls.crt``/``tls.key`` (and exposes ``ca.crt``) from a
mounted Secret directory and polls it. The kubelet updates a Secret volume by writing a new
timestamped directory and swapping the ``..data`` symlink, so the files are compared by the
identity of what they resolve to (real path, inode, mtime, size), not by the link itself.
"""

import asyncio
import contextlib
import datetime
import logging
import os
import socket
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cryptography import x509

from certs.generate import generate_ca, generate_serving
from certs.tls import CertificateError, check_pair, load_pair, new_server_context

logger = logging.getLogger(__name__)

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_FILE = "ca.crt"

DEFAULT_POLL_SECONDS = 2.0
# Reads that straddle a symlink swap fail once; only a persistent failure is unhealthy.
_UNHEALTHY_AFTER_FAILURES = 3
_SELF_SIGNED_VALIDITY = datetime.timedelta(days=365)

Clock = Callable[[], datetime.datetime]


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class CertificateSource(Protocol):
    def ssl_context(self) -> ssl.SSLContext:
        """The context to serve with; the same object for the life of the source."""

    def ca_pem(self) -> bytes | None:
        """The CA bundle clients should trust, when known."""

    def healthy(self) -> bool:
        """Whether the served certificate is current and the source can still refresh it."""

    async def start(self) -> None:
        """Begin watching for rotation (no-op for sources that never rotate)."""

    async def stop(self) -> None:
        """Stop watching; the context keeps serving the last certificate."""


@dataclass(frozen=True, slots=True)
class _Loaded:
    fingerprint: tuple[object, ...]
    cert_pem: bytes
    key_pem: bytes
    ca_pem: bytes | None
    leaf: x509.Certificate


class FileCertificateSource:
    """Serves the pair in ``directory`` and reloads it when the files change."""

    def __init__(
        self,
        *,
        directory: Path,
        purpose: str,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        clock: Clock = _utcnow,
    ) -> None:
        self._directory = directory
        self._purpose = purpose
        self._poll_seconds = poll_seconds
        self._clock = clock
        self._context = new_server_context()
        self._failures = 0
        self._task: asyncio.Task[None] | None = None
        try:
            self._loaded = self._read(self._fingerprint())
        except OSError as err:
            raise CertificateError(f"cannot read {purpose} certificate: {err}") from err
        self._install(self._loaded)

    def ssl_context(self) -> ssl.SSLContext:
        return self._context

    def ca_pem(self) -> bytes | None:
        return self._loaded.ca_pem

    def healthy(self) -> bool:
        if self._failures >= _UNHEALTHY_AFTER_FAILURES:
            return False
        if self._task is not None and self._task.done():
            return False
        return self._clock() < self._loaded.leaf.not_valid_after_utc

    def reload_if_changed(self) -> bool:
        """Re-read the files now; True when a new pair was installed."""
        return self._install(self._read_or_record_failure())

    async def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._watch(), name=f"{self._purpose}-cert-watcher")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._poll_seconds)
            # Reading and proving the pair happen off the event loop; installing on the
            # loop's own thread keeps the context untouched while it starts a handshake.
            self._install(await asyncio.to_thread(self._read_or_record_failure))

    def _read_or_record_failure(self) -> _Loaded | None:
        """The pair on disk when it differs from the loaded one, else None."""
        try:
            fingerprint = self._fingerprint()
            loaded = None if fingerprint == self._loaded.fingerprint else self._read(fingerprint)
        except (OSError, CertificateError) as err:
            self._failures += 1
            logger.warning(
                "cannot reload %s certificate from %s (attempt %d): %s",
                self._purpose,
                self._directory,
                self._failures,
                err,
            )
            return None
        self._failures = 0
        return loaded

    def _fingerprint(self) -> tuple[object, ...]:
        # Taken before the files are read, so a change racing the read is seen next poll.
        ca_path = self._directory / CA_FILE
        return (
            _identity(self._directory / CERT_FILE),
            _identity(self._directory / KEY_FILE),
            _identity(ca_path) if ca_path.exists() else None,
        )

    def _read(self, fingerprint: tuple[object, ...]) -> _Loaded:
        cert_pem = (self._directory / CERT_FILE).read_bytes()
        key_pem = (self._directory / KEY_FILE).read_bytes()
        ca_pem = (self._directory / CA_FILE).read_bytes() if fingerprint[2] is not None else None
        leaf = check_pair(cert_pem=cert_pem, key_pem=key_pem)
        return _Loaded(fingerprint, cert_pem, key_pem, ca_pem, leaf)

    def _install(self, loaded: _Loaded | None) -> bool:
        """Serve ``loaded``, when there is a new pair; whether one was installed."""
        if loaded is None:
            return False
        load_pair(self._context, cert_pem=loaded.cert_pem, key_pem=loaded.key_pem)
        self._loaded = loaded
        logger.info(
            "loaded %s serving certificate from %s (serial %x, expires %s)",
            self._purpose,
            self._directory,
            loaded.leaf.serial_number,
            loaded.leaf.not_valid_after_utc.isoformat(),
        )
        return True


def _identity(path: Path) -> tuple[str, int, int, int, int]:
    stat = path.stat()
    return (os.path.realpath(path), stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size)


class SelfSignedCertificateSource:
    """A throwaway CA and serving certificate made in memory at start-up; never rotates."""

    def __init__(
        self,
        *,
        dns_names: Sequence[str],
        ip_addresses: Sequence[str],
        clock: Clock = _utcnow,
    ) -> None:
        self._clock = clock
        now = clock()
        ca = generate_ca(
            common_name="headroom-self-signed-ca", valid_for=_SELF_SIGNED_VALIDITY, now=now
        )
        serving = generate_serving(
            ca=ca,
            dns_names=dns_names,
            ip_addresses=ip_addresses,
            valid_for=_SELF_SIGNED_VALIDITY,
            now=now,
        )
        self._ca_pem = ca.cert_pem
        self._not_after = check_pair(
            cert_pem=serving.cert_pem, key_pem=serving.key_pem
        ).not_valid_after_utc
        self._context = new_server_context()
        load_pair(self._context, cert_pem=serving.cert_pem, key_pem=serving.key_pem)

    def ssl_context(self) -> ssl.SSLContext:
        return self._context

    def ca_pem(self) -> bytes | None:
        return self._ca_pem

    def healthy(self) -> bool:
        return self._clock() < self._not_after

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        return None


def certificate_source(
    *, cert_dir: Path | None, purpose: str, poll_seconds: float = DEFAULT_POLL_SECONDS
) -> CertificateSource:
    """The file-backed source when a directory is given, else a self-signed one (warned).

    ``purpose`` names the server in logs ("metrics", "webhook"); operators grep for
    "Initializing metrics certificate watcher using provided certificates".
    """
    if cert_dir is None:
        logger.warning(
            "No certificate path given for the %s server: serving an in-memory self-signed "
            "certificate that changes on every restart; clients cannot verify it and can "
            "only skip verification. Mount a cert-manager certificate for production.",
            purpose,
        )
        # The names this host answers to.
        return SelfSignedCertificateSource(
            dns_names=["localhost", socket.gethostname()], ip_addresses=["127.0.0.1", "::1"]
        )
    logger.info("Initializing %s certificate watcher using provided certificates", purpose)
    return FileCertificateSource(directory=cert_dir, purpose=purpose, poll_seconds=poll_seconds)
