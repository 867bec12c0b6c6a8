"""config/samples: `kubectl apply -k config/samples` creates HeadroomConfig/cluster in dry-run."""

from typing import Any

import yaml

from app.core.config import DEFAULT_SETTINGS, parse_config, validate_config
from app.core.labels import API_VERSION, CONFIG_KIND, CONFIG_NAME
from tests.unit.chart.helm import REPO_ROOT

SAMPLES = REPO_ROOT / "config" / "samples"


def sample_objects() -> list[dict[str, Any]]:
    kustomization = yaml.safe_load((SAMPLES / "kustomization.yaml").read_text())
    assert kustomization["kind"] == "Kustomization"
    objects: list[dict[str, Any]] = []
    for resource in kustomization["resources"]:
        objects.extend(d for d in yaml.safe_load_all((SAMPLES / resource).read_text()) if d)
    return objects


def test_kustomization_creates_only_the_cluster_config() -> None:
    (config,) = sample_objects()
    assert config["apiVersion"] == API_VERSION
    assert config["kind"] == CONFIG_KIND
    assert config["metadata"]["name"] == CONFIG_NAME


def test_sample_is_valid_and_in_dry_run() -> None:
    (config,) = sample_objects()
    assert config["spec"]["dryRun"] is True
    result = validate_config(config)
    assert result.errors == ()
    assert result.warnings == ()


def test_sample_spells_out_the_defaults() -> None:
    (config,) = sample_objects()
    assert parse_config(config) == DEFAULT_SETTINGS
