"""``make demo`` picks a real cluster only when told to; on real nodes it shows each
step's cpu.max, and its expectations are the policy's."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from app.core.config import DEFAULT_SETTINGS
from app.core.explain import event_message, explain
from app.core.policy import compute_node
from app.core.quantity import parse_cpu_millis
from devcluster.demo import (
    REAL,
    SIMULATED,
    Demo,
    Narrator,
    Scenario,
    cpu_max_line,
    cpu_max_text,
    current_kubeconfig,
    options,
    parser,
)
from devcluster.realnodes import WORKLOAD
from tests.unit.app.core.policy.inputs import managed_pod, node_input
from tests.unit.cli import usage_error


def test_the_embedded_cluster_is_the_default_even_with_kubeconfig_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/home/me/.kube/prod")
    assert parser().parse_args([]).cluster == "embedded"
    assert parser().parse_args(["--cluster=current"]).cluster == "current"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"KUBECONFIG": "/a:/b"}, Path("/a")),
        ({"KUBECONFIG": ""}, Path("/home/me/.kube/config")),
        ({}, Path("/home/me/.kube/config")),
    ],
    ids=["first-listed", "empty", "unset"],
)
def test_the_current_kubeconfig_is_the_one_kubectl_reads_first(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], expected: Path
) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    assert current_kubeconfig(environ) == expected


@pytest.mark.parametrize(
    "argv",
    [["--real-nodes", "--cluster=current"], ["--real-nodes", "--keep"]],
    ids=["current-cluster", "keep"],
)
def test_real_nodes_refuse_what_their_own_namespace_cannot_do(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert "--real-nodes" in usage_error(options, argv, capsys)


def test_real_nodes_walk_the_real_scenario() -> None:
    args = options(["--real-nodes", "--non-interactive"])
    assert args.real_nodes
    demo = Demo(args=args, narrator=Narrator(interactive=False, out=io.StringIO()))
    assert demo.scenario is REAL
    assert Demo(args=options([]), narrator=Narrator(interactive=False)).scenario is SIMULATED


@pytest.mark.parametrize(
    ("text", "shown"),
    [("max 100000", "max 100000 (no limit)"), ("250000 100000", "250000 100000 (2500m)")],
)
def test_cpu_max_is_shown_as_read_and_in_millicores(text: str, shown: str) -> None:
    assert cpu_max_text(text) == shown


def test_the_cpu_max_line_says_whether_the_step_moved_it() -> None:
    assert cpu_max_line("web/app on realnode-1", "max 100000", "250000 100000") == (
        "    cpu.max of web/app on realnode-1: max 100000 (no limit) -> "
        "250000 100000 (2500m) (changed)"
    )
    assert cpu_max_line("web/app", "34000 100000", "34000 100000").endswith("(unchanged)")


@pytest.mark.parametrize(
    ("scenario", "allocatable_m"),
    [(SIMULATED, 16000), (REAL, WORKLOAD.cpus * 1000)],
    ids=["simulated", "real"],
)
def test_the_scenarios_limits_are_the_policys(scenario: Scenario, allocatable_m: int) -> None:
    """What the walk expects of web is what the policy computes on that node: alone, and
    with three batch neighbours in its (managed) namespace."""
    web_m, batch_m = parse_cpu_millis(scenario.web_cpu), parse_cpu_millis(scenario.batch_cpu)
    alone = compute_node(
        node_input([managed_pod("web", web_m)], allocatable_m=allocatable_m), DEFAULT_SETTINGS
    )
    assert alone.pods[0].target_m == scenario.alone_m
    web = managed_pod("web", web_m, limits_m=[scenario.alone_m])
    batch = [managed_pod(f"batch-{i}", batch_m) for i in range(3)]
    crowded = compute_node(node_input([web, *batch], allocatable_m=allocatable_m), DEFAULT_SETTINGS)
    assert crowded.pods[0].target_m == scenario.shrunk_m
    explanation = explain(crowded, crowded.pods[0], dry_run=False)
    assert event_message(explanation) == scenario.adjusted
