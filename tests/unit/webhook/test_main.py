"""The ``headroom-webhook`` process: flags, start-up, serving without a cluster, SIGTERM."""

import json
import signal
import ssl

import httpx
import pytest

from app.io.kubeconfig import default_lease_namespace
from tests.unit.cli import usage_error
from tests.unit.webhook.builders import admission_review, new_pod
from tests.unit.webhook.process import Running
from webhook.main import parse_args


def test_defaults_match_the_runbook() -> None:
    args = parse_args([])
    assert (args.bind_address, args.metrics_bind_address, args.health_probe_bind_address) == (
        ":9443",
        ":8443",
        ":8081",
    )
    assert args.metrics_secure is True
    assert (args.cert_dir, args.metrics_cert_path, args.kubeconfig) == (None, None, None)
    assert (args.log_format, args.log_level) == ("json", "info")
    # Outside a pod the reconciler's Lease is looked for in the chart's namespace.
    assert args.reconciler_lease_namespace is None
    assert default_lease_namespace() == "kube-headroom-system"


def test_the_reconcilers_lease_can_be_looked_for_elsewhere() -> None:
    args = parse_args(["--reconciler-lease-namespace", "ops"])
    assert args.reconciler_lease_namespace == "ops"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        pytest.param(["--bind-address", "9443"], "is not HOST:PORT or :PORT", id="address"),
        pytest.param(["--metrics-secure", "maybe"], "expected true or false", id="bool"),
        pytest.param(["--cert-dir", "/nonexistent"], "is not a directory", id="cert-dir"),
        pytest.param(["--log-format", "xml"], "invalid choice", id="log-format"),
    ],
)
def test_bad_flags_fail_fast(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error(parse_args, flags, capsys)


@pytest.mark.parametrize(
    ("flags", "secure"),
    [
        pytest.param(["--metrics-secure=false"], False, id="equals-form"),
        pytest.param(["--metrics-secure", "false"], False, id="separate-value"),
        # Bare, as the reconciler takes it: the flags both processes share are one definition.
        pytest.param(["--metrics-secure", "--log-level", "debug"], True, id="bare"),
    ],
)
def test_metrics_secure_forms(flags: list[str], secure: bool) -> None:
    assert parse_args(flags).metrics_secure is secure


def test_serves_admissions_without_a_cluster_and_stops_on_sigterm(
    webhook_process: Running,
) -> None:
    process, ports, certs, log = (
        webhook_process.process,
        webhook_process.ports,
        webhook_process.certs,
        webhook_process.log,
    )

    ready = httpx.get(f"http://127.0.0.1:{ports['probe']}/readyz")
    assert ready.status_code == 503
    assert "namespaces not synced" in ready.text

    verify = ssl.create_default_context(cafile=str(certs / "ca.crt"))
    review = admission_review(new_pod())
    reply = httpx.post(
        f"https://127.0.0.1:{ports['webhook']}/mutate/pods",
        json=review,
        verify=verify,
        timeout=10,
    )
    assert reply.status_code == 200
    response = reply.json()["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"] is True
    assert "patch" not in response
    assert response["warnings"][0].startswith("Headroom did not seed a CPU limit: cannot read")

    metrics = httpx.get(f"http://127.0.0.1:{ports['metrics']}/metrics").text
    assert 'headroom_webhook_requests_total{endpoint="/mutate/pods",result="unchecked"} 1.0' in (
        metrics
    )

    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=20) == 0
    log.seek(0)
    messages = [json.loads(line)["msg"] for line in log if line.startswith("{")]
    assert "Initializing webhook certificate watcher using provided certificates" in messages
    assert "received SIGTERM; shutting down" in messages
