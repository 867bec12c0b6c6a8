"""``kubectl headroom simulate`` over saved snapshots: arguments, output and errors."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubectl_headroom.main import main
from kubectl_headroom.simulate_output import Progress
from kubectl_headroom.snapshot import load, save
from tests.unit.app import builders as b
from tests.unit.kubectl_headroom.snapshots import cpu_pod, snapshot


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    path = tmp_path / "cluster.json"
    pods = [
        cpu_pod("a", "500m", labels={"app": "web"}),
        cpu_pod("b", "1500m", labels={"app": "db"}, priority_class="critical"),
        cpu_pod("c", "6", labels={"app": "web"}),
        cpu_pod("x", "1", namespace="team-b", labels={"app": "web"}, node="node-2"),
    ]
    save(snapshot(pods=pods, nodes=[b.node("node-1"), b.node("node-2")], spec={}), path)
    return path


def simulate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["simulate", *args, "-o", "json"]) == 0
    document: dict[str, Any] = json.loads(capsys.readouterr().out)
    return document


def limits(document: dict[str, Any]) -> dict[str, str | None]:
    return {p["pod"]: p["simulatedLimit"] for p in document["pods"]}


def test_the_table_shows_nodes_pods_and_totals(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["simulate", "--snapshot", str(saved)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Enrolled namespaces: team-a\n")
    assert "NODE     POOL   MODE      ALLOCATABLE   SLACK    FACTOR   MANAGED" in out
    assert "node-1   -      dry-run   16000m        8000m    2.00     3" in out
    assert "team-a/b   node-1   1500m     unset     3000m" in out
    assert "Managed pods: 3: 0 raised, 0 lowered, 3 given a first limit" in out
    assert "Not managed: 1 pods (namespace-not-enrolled 1)" in out


def test_what_if_enrolment_and_settings(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = simulate_json(
        capsys, "--snapshot", str(saved), "--enroll", "team-b", "--set", "maxMultiplier=2"
    )
    assert document["enrolledNamespaces"] == ["team-a", "team-b"]
    assert limits(document) == {"a": "1000m", "b": "3000m", "c": "12000m", "x": "2000m"}
    assert {p["ceilingBoundBy"] for p in document["pods"]} == {"max-multiplier"}
    assert [p["capped"] for p in document["pods"]] == [True, False, False, True]


def test_set_reaches_nested_fields_and_pools(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools = '[{name: all, nodeSelector: {}, quantum: "500m"}]'
    document = simulate_json(
        capsys, "--snapshot", str(saved), "--set", "deadband.growPercent=20",
        "--set", f"nodePools={pools}",
    )  # fmt: skip
    assert {n["pool"] for n in document["nodes"]} == {"all"}
    assert limits(document)["a"] == "1500m"


def test_what_if_a_priority_class_weighed_more(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("--snapshot", str(saved), "--set", "minBurstFloor=0")
    before = simulate_json(capsys, *args)
    after = simulate_json(capsys, *args, "--weight", "critical=4")
    assert limits(before) == {"a": "1000m", "b": "3000m", "c": "12000m"}
    # S = 8 cores, W = 500m + 4*1500m + 6 cores: b's share is 8*6/12.5 cores.
    assert limits(after) == {"a": "820m", "b": "5340m", "c": "9840m"}
    assert [(p["weight"], p["weightRule"]) for p in after["pods"]] == [
        (1, None),
        (4, "spec.weights[0]"),
        (1, None),
    ]
    assert after["nodes"][0]["weightedRequests"] == "12500m"
    assert main(["simulate", *args, "--weight", "critical=4"]) == 0
    table = capsys.readouterr().out
    assert "POD        NODE     REQUEST   WEIGHT   CURRENT" in table
    assert "team-a/b   node-1   1500m     4        unset     5340m" in table


def test_a_weight_goes_first_in_each_list_of_rules(
    saved: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pools = "[{name: all, nodeSelector: {}, weights: [{priorityClassName: critical, weight: 0}]}]"
    document = simulate_json(
        capsys, "--snapshot", str(saved), "--set", f"nodePools={pools}",
        "--weight", "critical=4", "--weight", "critical=2",
    )  # fmt: skip
    # The pool's own list, with both put first in the order given.
    assert document["pods"][1]["weightRule"] == "spec.nodePools[0].weights[0]"
    assert document["pods"][1]["weight"] == 4


def test_a_whole_config_file(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(b.headroom_config(spec={"dryRun": False, "minBurstFloor": "0"}))
    )
    document = simulate_json(capsys, "--snapshot", str(saved), "--config", str(config))
    assert limits(document)["a"] == "1000m"
    assert {n["mode"] for n in document["nodes"]} == {"enforcing"}


def test_an_invalid_what_if_reports_every_field_error(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(b.headroom_config(spec={"quantum": "0", "deadband": {"growPercent": 300}}))
    )
    code = main(
        ["simulate", "--snapshot", str(saved), "--config", str(config), "--set", "policy=Greedy"]
    )
    assert code == 3
    errors = capsys.readouterr().err.splitlines()
    assert errors == [
        "error: invalid HeadroomConfig: spec.policy: must be one of Proportional",
        "error: invalid HeadroomConfig: spec.quantum: must be greater than 0",
        "error: invalid HeadroomConfig: spec.deadband.growPercent: must be between 0 and 100",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "maxMultiplier"], "error: --set maxMultiplier: expected FIELD=VALUE"),
        (["--weight", "critical"], "error: --weight critical: expected PRIORITYCLASS=WEIGHT"),
        (
            ["--weight", "critical=500"],
            "error: invalid HeadroomConfig: spec.weights[0].weight: must be between 0 and 100",
        ),
        (["--set", "bogus=1"], "error: invalid HeadroomConfig: spec.bogus: unknown field"),
        (["--config", "/nonexistent.yaml"], "error: --config /nonexistent.yaml:"),
        (["-l", "app in (web"], "error: -l 'app in (web': cannot read"),
    ],
)
def test_bad_input_gets_a_clear_error(
    saved: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["simulate", "--snapshot", str(saved), *args]) == 3
    assert capsys.readouterr().err.startswith(message)


def test_not_a_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pods.json"
    path.write_text('{"items": []}')
    assert main(["simulate", "--snapshot", str(path)]) == 3
    assert "is not a Headroom snapshot" in capsys.readouterr().err


def test_filters_and_sorting(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    document = simulate_json(
        capsys, "--snapshot", str(saved), "--enroll", "team-b", "-l", "app=web",
        "--sort-by", "target",
    )  # fmt: skip
    assert [p["pod"] for p in document["pods"]] == ["c", "x", "a"]
    assert document["totals"]["pods"] == 3
    document = simulate_json(capsys, "--snapshot", str(saved), "--node", "elsewhere")
    assert (document["pods"], document["nodes"]) == ([], [])


def test_yaml_output(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--snapshot", str(saved), "-o", "yaml"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["totals"]["limitsAfter"] == "16500m"


def test_save_writes_a_snapshot_that_simulates_alike(
    saved: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    again = tmp_path / "again.json.gz"
    first = simulate_json(capsys, "--snapshot", str(saved), "--save", str(again))
    assert load(again) == load(saved)
    assert simulate_json(capsys, "--snapshot", str(again)) == first


def test_a_snapshot_keeps_vpa_recommendations_and_controllers(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    vpa = b.vpa(cpu_targets={"app": "1500m"})
    save(snapshot(vpas=[vpa], replica_sets=[b.controlled()]), path)
    loaded = load(path)
    assert loaded.vpas is not None
    (recommendation,) = loaded.vpas[0]["status"]["recommendation"]["containerRecommendations"]
    assert recommendation == {
        "containerName": "app",
        "target": {"cpu": "1500m"},
        "upperBound": {"cpu": "1500m"},
    }
    assert loaded.replica_sets[0]["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "controller": True}
    ]


def test_a_snapshot_saved_before_controllers_were_kept_loads_without_them(tmp_path: Path) -> None:
    path = tmp_path / "older.json"
    document = snapshot().as_document()
    del document["replicaSets"], document["jobs"]
    path.write_text(json.dumps(document))
    assert (load(path).replica_sets, load(path).jobs) == ((), ())


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_shows_on_a_terminal_and_clears_itself() -> None:
    terminal = Terminal()
    progress = Progress(terminal)
    progress.listed("pods", 1500)
    progress.computed(3, 3)
    progress.done()
    assert terminal.getvalue() == (
        "\r\033[Klisting pods: 1,500\r\033[Ksimulating nodes: 3/3\r\033[K"
    )


def test_progress_is_silent_elsewhere() -> None:
    stream = io.StringIO()
    progress = Progress(stream)
    progress.listed("pods", 1500)
    progress.done()
    assert stream.getvalue() == ""


def test_only_a_changed_config_warns(saved: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--snapshot", str(saved), "--enroll", "ghost"]) == 0
    assert capsys.readouterr().err == "warning: --enroll ghost: no such namespace\n"
    assert main(["simulate", "--snapshot", str(saved), "--set", "dryRun=false"]) == 0
    assert capsys.readouterr().err == (
        "warning: spec.dryRun: false: pods in enrolled namespaces will be resized\n"
    )
