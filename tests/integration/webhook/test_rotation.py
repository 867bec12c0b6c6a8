"""Rotating the serving certificate under continuous admissions fails none of them."""

from __future__ import annotations

import datetime
import ssl
import threading
import time

import httpx
from cryptography import x509

from certs.generate import IssuedCertificate, generate_serving
from tests.integration.conftest import Cluster, eventually
from tests.integration.webhook.conftest import Webhook, pod


def _rotate(webhook: Webhook) -> int:
    """Issue a new serving certificate from the same CA, swapped in like the kubelet does."""
    ca = IssuedCertificate(
        cert_pem=(webhook.cert_dir / "ca.crt").read_bytes(),
        key_pem=(webhook.cert_dir / "ca.key").read_bytes(),
    )
    serving = generate_serving(
        ca=ca,
        dns_names=[],
        ip_addresses=["127.0.0.1"],
        valid_for=datetime.timedelta(days=1),
        now=datetime.datetime.now(datetime.UTC),
    )
    staged = webhook.cert_dir / "..rotated"
    staged.mkdir()
    (staged / "tls.key").write_bytes(serving.key_pem)
    (staged / "tls.crt").write_bytes(serving.cert_pem)
    for name in ("tls.key", "tls.crt"):
        (staged / name).replace(webhook.cert_dir / name)
    staged.rmdir()
    return x509.load_pem_x509_certificate(serving.cert_pem).serial_number


def test_rotation_fails_no_admission_and_new_connections_see_the_new_certificate(
    control_plane: Cluster,
    webhook: Webhook,
    seeded_namespace: str,
) -> None:
    old_serial = webhook.serving_serial()
    outcomes: list[str] = []
    stop = threading.Event()

    def admit_continuously() -> None:
        # Server-side dry-run creations: every one is a real admission through the API
        # server; with failurePolicy Ignore a failed webhook call shows as a missing limit.
        url = f"{control_plane.server}/api/v1/namespaces/{seeded_namespace}/pods?dryRun=All"
        headers = {"authorization": f"Bearer {control_plane.token}"}
        trust = ssl.create_default_context(cafile=str(control_plane.ca_file))
        with httpx.Client(verify=trust, headers=headers, timeout=10) as api:
            while not stop.is_set():
                try:
                    reply = api.post(url, json=pod("rotation"))
                except httpx.HTTPError as err:
                    outcomes.append(f"{type(err).__name__}: {err}")
                    continue
                if reply.status_code != 201:
                    outcomes.append(f"HTTP {reply.status_code}: {reply.text[:200]}")
                    continue
                limits = reply.json()["spec"]["containers"][0]["resources"]["limits"]
                outcomes.append("seeded" if limits.get("cpu") == "1" else f"not seeded: {limits}")

    client = threading.Thread(target=admit_continuously)
    client.start()
    try:
        eventually(lambda: len(outcomes) >= 20, what="admissions before the rotation")
        assert outcomes[0] == "seeded"
        new_serial = _rotate(webhook)
        eventually(
            lambda: webhook.serving_serial() == new_serial,
            timeout=30,
            what="new connections to be served the rotated certificate",
        )
        after = len(outcomes)
        eventually(lambda: len(outcomes) >= after + 20, what="admissions after the rotation")
        time.sleep(0.5)
    finally:
        stop.set()
        client.join(timeout=30)
    failures = [outcome for outcome in outcomes if outcome != "seeded"]
    assert failures == []
    assert new_serial != old_serial
    assert webhook.ready()
