"""Liveness and readiness: ready only with a healthy certificate and a synced cluster cache."""

from typing import Protocol

from certs.source import CertificateSource


class Syncable(Protocol):
    def unsynced(self) -> list[str]: ...


class Health:
    def __init__(self, *, certificates: CertificateSource, cluster: Syncable) -> None:
        self._certificates = certificates
        self._cluster = cluster

    def not_ready(self) -> list[str]:
        """Why the webhook should not receive traffic yet; empty when ready."""
        reasons = []
        if not self._certificates.healthy():
            reasons.append("serving certificate is not healthy")
        reasons += [f"{resource} not synced" for resource in self._cluster.unsynced()]
        return reasons
