from pathlib import Path

import pytest

from app.io.kubeconfig import DEFAULT_LEASE_NAMESPACE, default_lease_namespace
from reconciler.main import parse_args
from tests.unit.cli import usage_error


def test_defaults_match_the_runbook_manager() -> None:
    args = parse_args([])
    assert args.metrics_bind_address == ":8443"
    assert args.metrics_secure is True
    assert args.metrics_cert_path is None
    assert args.health_probe_bind_address == ":8081"
    assert args.leader_elect is False
    assert (
        args.leader_election_lease_duration,
        args.leader_election_renew_deadline,
        args.leader_election_retry_period,
    ) == (15.0, 10.0, 2.0)
    assert (args.log_format, args.log_level) == ("json", "info")


@pytest.mark.parametrize(
    ("argv", "attribute", "expected"),
    [
        pytest.param(["--leader-elect"], "leader_elect", True, id="bare-bool-flag"),
        pytest.param(["--leader-elect=false"], "leader_elect", False, id="bool-flag-false"),
        pytest.param(["--metrics-secure=false"], "metrics_secure", False, id="insecure-metrics"),
        pytest.param(["--metrics-bind-address=0"], "metrics_bind_address", "0", id="disabled"),
        pytest.param(
            ["--metrics-cert-path=/tmp"], "metrics_cert_path", Path("/tmp"), id="cert-path"
        ),
        pytest.param(
            ["--leader-election-lease-duration=1m"],
            "leader_election_lease_duration",
            60.0,
            id="go-duration",
        ),
        pytest.param(["--log-format=text"], "log_format", "text", id="text-logs"),
    ],
)
def test_flags(argv: list[str], attribute: str, expected: object) -> None:
    assert getattr(parse_args(argv), attribute) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(["--metrics-secure=maybe"], "expected true or false", id="bad-bool"),
        pytest.param(["--metrics-bind-address=8443"], "not HOST:PORT", id="bad-address"),
        pytest.param(
            ["--leader-election-renew-deadline=20s"], "shorter than the lease", id="deadline"
        ),
        pytest.param(
            ["--leader-election-retry-period=10s"], "shorter than the renew", id="retry-period"
        ),
        pytest.param(["--leader-election-lease-duration=soon"], "duration", id="bad-duration"),
        pytest.param(["--log-format=xml"], "invalid choice", id="bad-format"),
        pytest.param(["--metrics-cert-path=/nonexistent"], "not a directory", id="bad-cert-path"),
    ],
)
def test_bad_flags_fail_fast(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error(parse_args, argv, capsys)


def test_lease_namespace_defaults_outside_a_cluster() -> None:
    assert default_lease_namespace() == DEFAULT_LEASE_NAMESPACE
