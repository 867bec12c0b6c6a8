"""The runbook's reference tables, the changelog, the security policy and the license say
what the code, the dashboard and the pinned versions say."""

from __future__ import annotations

import json
import re
import tomllib
from typing import Final

import pytest

from devcluster.binaries import pinned_versions
from kubectl_headroom.exits import Exit
from tests.unit.docs.markdown import (
    CHANGELOG,
    LICENSE,
    REPO_ROOT,
    RUNBOOK,
    SECURITY,
    code_spans,
    headings,
    section,
    table_rows,
)

DASHBOARD: Final = REPO_ROOT / "dashboards" / "headroom.json"
PYPROJECT: Final = REPO_ROOT / "pyproject.toml"
# Keep a Changelog's kinds of change.
CHANGE_KINDS: Final = frozenset({"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"})


def _version() -> str:
    version: str = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    return version


def test_the_exit_code_table_lists_every_code_the_plugin_uses() -> None:
    rows = table_rows(section(RUNBOOK.read_text(), "Exit codes"))
    listed = [int(code_spans(row[0])[0]) for row in rows]
    used = sorted(Exit)
    assert listed == used


def _compatibility() -> dict[str, list[str]]:
    """The table's rows by component: what Headroom uses, and the versions tested."""
    rows = table_rows(section(RUNBOOK.read_text(), "Compatibility"))
    return {row[0]: row[1:] for row in rows}


@pytest.mark.parametrize(
    ("component", "pins"),
    [
        ("Kubernetes", ("DEFAULT_K8S_VERSION", "MIN_K8S_VERSION")),
        ("cert-manager", ("CERT_MANAGER_VERSION",)),
        ("prometheus-operator", ("PROMETHEUS_OPERATOR_VERSION", "PROMETHEUS_VERSION")),
        ("VerticalPodAutoscaler", ("VPA_VERSION",)),
        ("Helm", ("HELM_VERSION",)),
        ("Karpenter", ("KARPENTER_VERSION",)),
        (
            "Flux",
            (
                "FLUX_SOURCE_CONTROLLER_VERSION",
                "FLUX_KUSTOMIZE_CONTROLLER_VERSION",
                "FLUX_HELM_CONTROLLER_VERSION",
            ),
        ),
    ],
)
def test_the_compatibility_table_names_the_versions_tested(
    component: str, pins: tuple[str, ...]
) -> None:
    _, tested = _compatibility()[component]
    for pin in pins:
        assert pinned_versions()[pin] in tested, f"{component}: {pin}"


def test_the_supported_kubernetes_range_spans_the_tested_minors() -> None:
    supported, _ = _compatibility()["Kubernetes"]
    oldest, newest = (
        ".".join(pinned_versions()[pin].removeprefix("v").split(".")[:2])
        for pin in ("MIN_K8S_VERSION", "DEFAULT_K8S_VERSION")
    )
    assert supported.startswith(f"{oldest} to {newest}:")


def test_the_dashboard_table_describes_every_panel() -> None:
    board = json.loads(DASHBOARD.read_text())
    panels = [panel["title"] for panel in board["panels"] if panel["type"] != "row"]
    described = [row[0] for row in table_rows(section(RUNBOOK.read_text(), "Dashboard"))]
    assert described == panels


def test_the_changelog_keeps_unreleased_first_and_names_the_current_version() -> None:
    found = headings(CHANGELOG.read_text())
    releases = [h.title for h in found if h.level == 2]
    assert releases[0] == "[Unreleased]"
    assert f"[{_version()}]" in releases
    kinds = {h.title for h in found if h.level == 3}
    assert kinds <= CHANGE_KINDS


def test_the_security_policy_supports_the_current_minor() -> None:
    minor = ".".join(_version().split(".")[:2])
    rows = table_rows(section(SECURITY.read_text(), "Supported versions"))
    assert [minor + ".x", "yes"] in rows


def test_the_license_is_the_apache_license_pyproject_declares() -> None:
    assert tomllib.loads(PYPROJECT.read_text())["project"]["license"] == "Apache-2.0"
    text = LICENSE.read_text()
    assert re.match(r"\s*Apache License\s+Version 2\.0, January 2004", text)
    assert "END OF TERMS AND CONDITIONS" in text
    # The full text: every one of its nine sections.
    for number in range(1, 10):
        assert re.search(rf"^\s*{number}\. \w", text, re.M), number
