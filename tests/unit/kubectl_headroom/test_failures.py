"""Each way the API server can fail a command, as one line with the fix and its exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.io.http import ApiError, ApiUnavailable
from kubectl_headroom.exits import Exit
from kubectl_headroom.failures import PERMISSIONS, Report, report
from kubectl_headroom.kubeconfig import Target

TARGET = Target(
    paths=(Path("/home/me/.kube/config"),),
    context="prod",
    namespace="team-a",
    server="https://10.0.0.1:6443",
    source="$KUBECONFIG",
)


def test_forbidden_quotes_the_server_and_points_at_the_permissions() -> None:
    denied = ApiError(
        status=403,
        reason="Forbidden",
        message='nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" '
        "at the cluster scope",
    )
    assert report(denied, target=TARGET, command="preflight") == Report(
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the '
        "cluster scope (403 Forbidden): kubectl headroom preflight needs get and list on what "
        f"it reads; ask for them (see {PERMISSIONS})",
        Exit.DENIED,
    )


def test_unauthorized_names_the_context() -> None:
    rejected = ApiError(status=401, reason="Unauthorized", message="Unauthorized")
    assert report(rejected, target=TARGET, command="status") == Report(
        'the API server https://10.0.0.1:6443 rejected the credentials of context "prod" of '
        "kubeconfig /home/me/.kube/config (401 Unauthorized): log in again, or renew the "
        "user's token or certificate",
        Exit.DENIED,
    )


def test_unreachable_names_the_server_and_context() -> None:
    down = ApiUnavailable("GET /version: Connection timeout to host https://10.0.0.1:6443")
    failure = report(down, target=TARGET, command="explain")
    assert failure.code == Exit.UNREACHABLE
    assert failure.message.startswith(
        'cannot reach the API server https://10.0.0.1:6443 (context "prod" of kubeconfig '
        "/home/me/.kube/config): GET /version: Connection timeout"
    )


@pytest.mark.parametrize("status", [404, 500, 429])
def test_other_answers_are_errors(status: int) -> None:
    failure = report(
        ApiError(status=status, reason="X", message="m"), target=TARGET, command="status"
    )
    assert failure == Report(f"the API server answered {status} X: m", Exit.ERROR)


def test_a_report_is_one_line() -> None:
    assert Report("first\n  second\tthird", 3).line == "error: first second third"
