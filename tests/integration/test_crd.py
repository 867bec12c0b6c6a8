"""The HeadroomConfig CRD, installed from its chart by the real helm, against
the real API server: schema defaults, CEL rules, printer columns, keep policy."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration.conftest import CRD, Cluster, install_crd_chart, run_helm


def _config(name: str = "cluster", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": name},
        "spec": spec,
    }


def _create(cluster: Cluster, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(cluster.bin_dir / "kubectl"),
            f"--kubeconfig={cluster.kubeconfig}",
            "create",
            "-f",
            "-",
        ],
        input=json.dumps(obj),
        capture_output=True,
        text=True,
        check=False,
    )


def _pool(name: str, **overrides: Any) -> dict[str, Any]:
    return {"name": name, "nodeSelector": {"matchLabels": {"pool": name}}, **overrides}


@pytest.fixture
def clean_config(control_plane: Cluster, headroom_crd: str) -> Iterator[None]:
    control_plane.kubectl("delete", "hcfg", "--all", "--ignore-not-found")
    yield
    control_plane.kubectl("delete", "hcfg", "--all", "--ignore-not-found")


def test_empty_spec_reads_back_with_every_default(
    control_plane: Cluster, clean_config: None
) -> None:
    created = _create(control_plane, _config())
    assert created.returncode == 0, created.stderr
    spec = json.loads(control_plane.kubectl("get", "hcfg", "cluster", "-o", "json"))["spec"]
    assert spec == {
        "policy": "Proportional",
        "dryRun": True,
        "minBurstFloor": "1",
        "maxMultiplier": "10",
        "quantum": "10m",
        "deadband": {"growPercent": 10, "shrinkPercent": 5},
        "debouncePeriod": "2s",
        "backoffPeriod": "5m",
        "rateLimits": {
            "perNodePatchesPerSecond": 10,
            "clientQPS": 50,
            "clientBurst": 100,
            "explanationQPS": 50,
            "explanationBurst": 100,
        },
        "webhook": {"enabled": True, "initialMultiplier": "2"},
        "excludedNamespaces": ["kube-system"],
        "excludedOwners": [],
        "excludedContainers": [],
        "weights": [],
        "nodePools": [],
    }


def test_defaults_fill_a_partly_given_parent(control_plane: Cluster, clean_config: None) -> None:
    created = _create(control_plane, _config(deadband={"growPercent": 20}, webhook={}))
    assert created.returncode == 0, created.stderr
    spec = json.loads(control_plane.kubectl("get", "hcfg", "cluster", "-o", "json"))["spec"]
    assert spec["deadband"] == {"growPercent": 20, "shrinkPercent": 5}
    assert spec["webhook"] == {"enabled": True, "initialMultiplier": "2"}


def test_printer_columns(control_plane: Cluster, clean_config: None) -> None:
    assert _create(control_plane, _config()).returncode == 0
    control_plane.kubectl(
        "patch", "hcfg", "cluster", "--subresource=status", "--type=merge",
        "-p", '{"status":{"managedPods":42}}',
    )  # fmt: skip
    header, row = control_plane.kubectl("get", "hcfg").strip().splitlines()
    assert header.split() == ["NAME", "POLICY", "DRYRUN", "MANAGEDPODS", "AGE"]
    assert row.split()[:4] == ["cluster", "Proportional", "true", "42"]


def test_only_the_name_cluster_is_accepted(control_plane: Cluster, clean_config: None) -> None:
    created = _create(control_plane, _config(name="other"))
    assert created.returncode != 0
    assert "metadata.name must be 'cluster'" in created.stderr


@pytest.mark.parametrize(
    ("spec", "accepted"),
    [
        pytest.param({"maxMultiplier": "1000"}, False, id="maxMultiplier-1000"),
        pytest.param({"maxMultiplier": "100"}, True, id="maxMultiplier-100"),
        pytest.param({"maxMultiplier": "0"}, True, id="maxMultiplier-0-disables"),
        pytest.param({"maxMultiplier": "-1"}, False, id="maxMultiplier-negative"),
        pytest.param({"maxMultiplier": 5}, True, id="maxMultiplier-integer"),
        pytest.param({"webhook": {"initialMultiplier": "101"}}, False, id="initialMultiplier-101"),
        pytest.param({"webhook": {"initialMultiplier": "100"}}, True, id="initialMultiplier-100"),
        pytest.param({"quantum": "0"}, False, id="quantum-0"),
        pytest.param({"quantum": "abc"}, False, id="quantum-not-a-quantity"),
        pytest.param({"deadband": {"growPercent": 101}}, False, id="growPercent-101"),
        pytest.param({"rateLimits": {"clientQPS": 0}}, False, id="clientQPS-0"),
        pytest.param({"rateLimits": {"explanationQPS": 0}}, False, id="explanationQPS-0"),
        pytest.param({"rateLimits": {"explanationBurst": 1}}, True, id="explanationBurst-1"),
        pytest.param({"policy": "Greedy"}, False, id="policy-unknown"),
        pytest.param({"debouncePeriod": "2 seconds"}, False, id="debounce-not-a-duration"),
        pytest.param({"debouncePeriod": "0"}, True, id="debounce-bare-zero"),
        pytest.param({"backoffPeriod": ".5s"}, True, id="backoff-leading-dot"),
        pytest.param({"backoffPeriod": "-5m"}, False, id="backoff-negative"),
        pytest.param({"excludedOwners": [{"name": "x"}]}, False, id="owner-without-kind"),
        pytest.param({"nodePools": [_pool("web", maxMultiplier=3)]}, True, id="pool"),
        pytest.param(
            {"nodePools": [_pool("web", maxMultiplier="1000")]}, False, id="pool-maxMultiplier"
        ),
        pytest.param(
            {"nodePools": [_pool("web", initialMultiplier="0.5")]},
            False,
            id="pool-initialMultiplier",
        ),
        pytest.param({"nodePools": [_pool("web", quantum="0")]}, False, id="pool-quantum"),
        pytest.param(
            {"nodePools": [_pool("web", minBurstFloor="-1")]}, False, id="pool-minBurstFloor"
        ),
        pytest.param(
            {"nodePools": [_pool("web", deadband={"shrinkPercent": 101})]},
            False,
            id="pool-deadband",
        ),
        pytest.param({"nodePools": [_pool("Web!")]}, False, id="pool-name"),
        pytest.param({"nodePools": [{"name": "web"}]}, False, id="pool-without-selector"),
        pytest.param(
            {"nodePools": [_pool("web", dryRun=True), _pool("web", quantum="20m")]},
            False,
            id="pool-names-unique",
        ),
        pytest.param(
            {"nodePools": [_pool(f"p{i}", quantum="20m") for i in range(64)]},
            True,
            id="sixty-four-pools",
        ),
        pytest.param(
            {"nodePools": [_pool(f"p{i}", quantum="20m") for i in range(65)]},
            False,
            id="too-many-pools",
        ),
    ],
)
def test_schema_rules(
    control_plane: Cluster, clean_config: None, spec: dict[str, Any], accepted: bool
) -> None:
    created = _create(control_plane, _config(**spec))
    assert (created.returncode == 0) is accepted, created.stderr


@pytest.mark.parametrize(
    ("validate", "refused", "warned"),
    [
        pytest.param("strict", True, False, id="strict"),
        pytest.param("warn", False, True, id="warn"),
        pytest.param("false", False, False, id="ignore"),
    ],
)
def test_an_unknown_field_is_refused_only_under_strict_validation(
    control_plane: Cluster, clean_config: None, validate: str, refused: bool, warned: bool
) -> None:
    """The API server drops what the schema does not know before any webhook sees it:
    a misspelt dryRun is refused, warned about or lost, as the client asked."""
    result = subprocess.run(
        [
            str(control_plane.bin_dir / "kubectl"),
            f"--kubeconfig={control_plane.kubeconfig}",
            "create",
            f"--validate={validate}",
            "-f",
            "-",
        ],
        input=json.dumps(_config(dryrun=False)),
        capture_output=True,
        text=True,
        check=False,
    )
    named = 'unknown field "spec.dryrun"' in result.stderr
    assert (result.returncode != 0, named) == (refused, refused or warned), result.stderr
    if not refused:
        spec = json.loads(control_plane.kubectl("get", "hcfg", "cluster", "-o", "json"))["spec"]
        assert "dryrun" not in spec
        assert spec["dryRun"] is True


def test_uninstalling_the_chart_keeps_the_crd_and_the_config(
    control_plane: Cluster, helm: Path, clean_config: None
) -> None:
    assert _create(control_plane, _config()).returncode == 0
    run_helm(control_plane, helm, "uninstall", "kube-headroom-crds")
    kept = control_plane.kubectl("get", "crd", CRD, "-o", "name").strip()
    assert kept == f"customresourcedefinition.apiextensions.k8s.io/{CRD}"
    assert control_plane.kubectl("get", "hcfg", "cluster", "-o", "name").strip()
    # Reinstalling adopts the kept CRD again.
    install_crd_chart(control_plane, helm)
