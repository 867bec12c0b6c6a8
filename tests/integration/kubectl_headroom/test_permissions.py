"""The runbook's plugin permission table is enough: each command runs under a ServiceAccount
granted exactly the `get` and `list` its row names, and nothing more."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kubectl_headroom.exits import Exit
from tests.integration.conftest import Cluster
from tests.integration.kubectl_headroom.plugin import kubectl_headroom
from tests.integration.rbac import ServiceAccount, cluster_role_account
from tests.integration.reconciler.manifests import pod
from tests.unit.docs.markdown import RUNBOOK, code_spans, section, table_rows

# RBAC reaches the authorizer through an informer: a fresh grant can take a moment.
_GRANT_SECONDS = 15.0


def permission_table() -> dict[str, list[str]]:
    """Each command's resources from the runbook, ``what `preflight` reads`` expanded."""
    rows = {
        code_spans(command)[0]: code_spans(reads)
        for command, reads in table_rows(section(RUNBOOK.read_text(), "Plugin permissions"))
    }
    return {
        command: [resource for span in spans for resource in rows.get(span, [span])]
        for command, spans in rows.items()
    }


def rules(resources: list[str]) -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for resource in resources:
        plural, _, group = resource.partition(".")
        by_group.setdefault(group, []).append(plural)
    return [
        {"apiGroups": [group], "resources": sorted(plurals), "verbs": ["get", "list"]}
        for group, plurals in sorted(by_group.items())
    ]


@pytest.fixture(scope="module")
def node(control_plane: Cluster) -> Iterator[str]:
    with control_plane.fresh_node("perm") as name:
        yield name


def test_the_table_names_every_command() -> None:
    assert set(permission_table()) == {"preflight", "explain", "status", "simulate", "version"}


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("preflight", []),
        ("explain", ["web-0", "-n", "{namespace}"]),
        ("status", []),
        ("simulate", []),
        ("version", []),
    ],
)
def test_each_command_runs_with_the_permissions_its_row_names(
    control_plane: Cluster,
    third_party_crds: list[str],
    namespace: str,
    node: str,
    command: str,
    args: list[str],
) -> None:
    args = [arg.format(namespace=namespace) for arg in args]
    name = f"plugin-{command}-{uuid.uuid4().hex[:6]}"
    account = ServiceAccount(namespace, name)
    control_plane.apply(pod("web-0", namespace=namespace, node=node))
    granted = rules(permission_table()[command])
    with cluster_role_account(control_plane, account, granted) as kubeconfig:
        deadline = time.monotonic() + _GRANT_SECONDS
        while True:
            result = kubectl_headroom(
                control_plane, command, *args, "-o", "json", env={"KUBECONFIG": str(kubeconfig)}
            )
            if result.returncode != Exit.DENIED or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        allowed = {Exit.OK, Exit.BLOCKED} if command == "preflight" else {Exit.OK}
        assert result.returncode in allowed, result.stderr
