"""``kubectl headroom`` behaves like kubectl against the real API server: the current
context's namespace, ``--context``, ``--kubeconfig`` after the subcommand, ``-l`` and
``-o yaml``; and an API server it cannot reach, or one that forbids its reads, gets one
line naming the cause and the fix, with an exit code of its own."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_headroom.exits import Exit
from tests.integration.conftest import Cluster
from tests.integration.kubectl_headroom.plugin import kubeconfig_copy, kubectl_headroom
from tests.integration.rbac import ServiceAccount, service_account_kubeconfig
from tests.integration.reconciler.manifests import pod

# Every command that reads the cluster, with what it needs.
COMMANDS = [["preflight"], ["explain", "web-0"], ["status"], ["simulate"], ["version"]]
IDS = [command[0] for command in COMMANDS]


@pytest.fixture(scope="module")
def node(control_plane: Cluster) -> Iterator[str]:
    with control_plane.fresh_node("cli") as name:
        yield name


@pytest.fixture
def web_pods(control_plane: Cluster, namespace: str, node: str) -> list[str]:
    """Two pods labelled app=web and one app=db, bound to the node."""
    names = {"web-0": "web", "web-1": "web", "db-0": "db"}
    control_plane.apply(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                pod(name, namespace=namespace, node=node, labels={"app": app})
                for name, app in names.items()
            ],
        }
    )
    return sorted(names)


def document(stdout: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(stdout)
    return loaded


def one_error_line(stderr: str) -> str:
    (line,) = stderr.splitlines()
    assert line.startswith("error: ")
    return line


def test_explain_looks_in_the_current_contexts_namespace(
    control_plane: Cluster, namespace: str, web_pods: list[str], tmp_path: Path
) -> None:
    kubeconfig = kubeconfig_copy(control_plane, tmp_path / "config", namespace=namespace)
    explained = kubectl_headroom(
        control_plane, "explain", "web-0", "-o", "json", env={"KUBECONFIG": str(kubeconfig)}
    )
    assert explained.returncode == 0, explained.stderr
    assert json.loads(explained.stdout)["pod"] == f"{namespace}/web-0"

    # The control plane's own context has no namespace: "default", as kubectl has it.
    elsewhere = kubectl_headroom(control_plane, "explain", "web-0")
    assert elsewhere.returncode == Exit.ERROR
    assert one_error_line(elsewhere.stderr) == (
        'error: pod "web-0" not found in namespace "default" (the context\'s namespace; '
        "-n names another)"
    )
    named = kubectl_headroom(control_plane, "explain", "web-0", "-n", namespace, "-o", "yaml")
    assert named.returncode == 0, named.stderr
    assert document(named.stdout)["pod"] == f"{namespace}/web-0"


def test_context_and_kubeconfig_flags_after_the_subcommand(
    control_plane: Cluster, namespace: str, web_pods: list[str], tmp_path: Path
) -> None:
    config = json.loads(control_plane.kubeconfig.read_text())
    (current,) = config["contexts"]
    team = {"name": "team", "context": {**current["context"], "namespace": namespace}}
    config["contexts"].append(team)
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(json.dumps(config))
    # No KUBECONFIG at all: only the flags name the file and the context.
    result = kubectl_headroom(
        control_plane, "explain", "web-1", "--kubeconfig", str(kubeconfig), "--context", "team",
        "-o", "json", env={"KUBECONFIG": str(tmp_path / "absent")},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pod"] == f"{namespace}/web-1"
    before = kubectl_headroom(
        control_plane, "--kubeconfig", str(kubeconfig), "--context", "team", "explain", "web-1",
        env={"KUBECONFIG": str(tmp_path / "absent")},
    )  # fmt: skip
    assert before.returncode == 0, before.stderr
    assert f"Pod {namespace}/web-1 on node" in before.stdout


def test_explain_every_pod_a_selector_picks(
    control_plane: Cluster, namespace: str, web_pods: list[str]
) -> None:
    result = kubectl_headroom(
        control_plane, "explain", "-l", "app=web", "-n", namespace, "-o", "yaml"
    )
    assert result.returncode == 0, result.stderr
    pods = [item["pod"] for item in document(result.stdout)["items"]]
    assert sorted(pods) == [f"{namespace}/web-0", f"{namespace}/web-1"]
    table = kubectl_headroom(control_plane, "explain", "-l", "app in (db)", "-n", namespace)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith(f"Pod {namespace}/db-0 on node")
    none = kubectl_headroom(control_plane, "explain", "-l", "app=cache", "-n", namespace)
    assert (none.returncode, none.stdout) == (0, "")
    assert none.stderr == f"No pods in namespace {namespace} match -l app=cache\n"


@pytest.mark.parametrize("command", ["preflight", "status", "version"])
def test_yaml_output(control_plane: Cluster, third_party_crds: list[str], command: str) -> None:
    # With cert-manager's CRDs preflight finds no blocker here, so it exits 0.
    result = kubectl_headroom(control_plane, command, "-o", "yaml")
    assert result.returncode == 0, result.stderr
    assert isinstance(document(result.stdout), dict)


def test_version_names_the_client_and_the_server(control_plane: Cluster) -> None:
    result = kubectl_headroom(control_plane, "version", "-o", "json")
    assert result.returncode == 0, result.stderr
    versions = json.loads(result.stdout)
    server = json.loads(control_plane.kubectl("version", "-o", "json"))["serverVersion"]
    assert versions["serverVersion"] == server["gitVersion"]
    assert versions["clientVersion"]


@pytest.mark.parametrize("command", COMMANDS, ids=IDS)
def test_an_unreachable_api_server(
    control_plane: Cluster, command: list[str], tmp_path: Path
) -> None:
    kubeconfig = kubeconfig_copy(control_plane, tmp_path / "config", server="https://127.0.0.1:1")
    result = kubectl_headroom(control_plane, *command, env={"KUBECONFIG": str(kubeconfig)})
    assert result.returncode == Exit.UNREACHABLE, result.stdout + result.stderr
    line = one_error_line(result.stderr)
    assert line.startswith(
        'error: cannot reach the API server https://127.0.0.1:1 (context "headroom-local" of '
        f"kubeconfig {kubeconfig}): "
    )
    assert "check that the cluster is up" in line


@pytest.fixture
def no_rbac(control_plane: Cluster, namespace: str) -> Path:
    """A kubeconfig for a ServiceAccount no role is bound to."""
    account = ServiceAccount(namespace, "nobody")
    control_plane.kubectl("create", "serviceaccount", account.name, "-n", namespace)
    return service_account_kubeconfig(control_plane, account)


@pytest.mark.parametrize("command", COMMANDS[:-1], ids=IDS[:-1])
def test_a_forbidden_read(
    control_plane: Cluster, namespace: str, no_rbac: Path, command: list[str]
) -> None:
    result = kubectl_headroom(control_plane, *command, env={"KUBECONFIG": str(no_rbac)})
    assert result.returncode == Exit.DENIED, result.stdout + result.stderr
    line = one_error_line(result.stderr)
    assert f'User "system:serviceaccount:{namespace}:nobody" cannot ' in line
    assert line.endswith(
        f"(403 Forbidden): kubectl headroom {command[0]} needs get and list on what it reads; "
        "ask for them (see docs/operator-runbook.md#plugin-permissions)"
    )


def test_version_needs_no_permission(control_plane: Cluster, no_rbac: Path) -> None:
    # /version is readable by every authenticated user (system:public-info-viewer).
    result = kubectl_headroom(control_plane, "version", env={"KUBECONFIG": str(no_rbac)})
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[1].startswith("Server Version: v")


def test_a_pod_not_yet_scheduled(control_plane: Cluster, namespace: str) -> None:
    pending = pod("pending-0", namespace=namespace, node="unused", labels={"app": "pending"})
    del pending["spec"]["nodeName"]
    # No node carries this label: the scheduler leaves the pod Pending, unbound.
    pending["spec"]["nodeSelector"] = {"headroom.test/nowhere": "true"}
    control_plane.apply(pending)
    single = kubectl_headroom(control_plane, "explain", "pending-0", "-n", namespace)
    assert single.returncode == Exit.ERROR
    assert one_error_line(single.stderr) == (
        f"error: pod {namespace}/pending-0 is not bound to a node yet: explain it once it is "
        "scheduled"
    )
    selected = kubectl_headroom(control_plane, "explain", "-l", "app=pending", "-n", namespace)
    assert (selected.returncode, selected.stdout) == (0, "")
    assert (
        selected.stderr
        == f"warning: pod {namespace}/pending-0 is not bound to a node yet; skipped\n"
    )
