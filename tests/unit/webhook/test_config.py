import pytest

from app.core.config import validate_config
from tests.unit.app.builders import headroom_config
from tests.unit.webhook.builders import admission_review, cluster_cache
from tests.unit.webhook.client import admit, webhook_client

PATH = "/validate/headroomconfigs"


def test_valid_config_is_allowed() -> None:
    client = webhook_client(cluster_cache())
    review = admission_review(headroom_config(spec={"quantum": "50m"}), kind="HeadroomConfig")
    assert admit(client, PATH, review) == {"uid": review["request"]["uid"], "allowed": True}


def test_every_error_is_reported_with_its_field_path() -> None:
    client = webhook_client(cluster_cache())
    config = headroom_config(
        name="other",
        spec={"deadband": {"growPercent": 500}, "quantum": "0", "maxMultiplier": "1000"},
    )
    response = admit(client, PATH, admission_review(config, kind="HeadroomConfig"))
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    message = response["status"]["message"]
    assert message.startswith("HeadroomConfig other is invalid (4 errors): ")
    for path in (
        "metadata.name",
        "spec.deadband.growPercent",
        "spec.quantum",
        "spec.maxMultiplier",
    ):
        assert f"{path}: " in message
    # The webhook repeats the one config model's findings, not rules of its own.
    assert message.endswith("; ".join(str(e) for e in validate_config(config).errors))


def test_risky_settings_are_allowed_with_warnings() -> None:
    client = webhook_client(cluster_cache())
    config = headroom_config(spec={"quantum": "2", "excludedNamespaces": []})
    response = admit(client, PATH, admission_review(config, kind="HeadroomConfig"))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == [
        "spec.quantum",
        "spec.excludedNamespaces",
    ]


def test_warnings_accompany_a_denial() -> None:
    client = webhook_client(cluster_cache())
    config = headroom_config(spec={"quantum": "2", "policy": "Greedy"})
    response = admit(client, PATH, admission_review(config, kind="HeadroomConfig"))
    assert response["allowed"] is False
    assert response["warnings"]
    assert "(1 error)" in response["status"]["message"]


@pytest.mark.parametrize("operation", ["DELETE", "CONNECT"])
def test_only_writes_are_validated(operation: str) -> None:
    client = webhook_client(cluster_cache())
    review = admission_review(
        None, kind="HeadroomConfig", operation=operation, old=headroom_config(name="x")
    )
    assert admit(client, PATH, review)["allowed"] is True


def test_node_pool_errors_and_overlaps_reach_the_operator() -> None:
    client = webhook_client(cluster_cache())
    pools = [
        {"name": "web", "nodeSelector": {"matchLabels": {"pool": "web"}}, "maxMultiplier": "3"},
        {"name": "zone-a", "nodeSelector": {"matchLabels": {"zone": "a"}}, "quantum": "20m"},
    ]
    response = admit(
        client,
        PATH,
        admission_review(headroom_config(spec={"nodePools": pools}), kind="HeadroomConfig"),
    )
    assert response["allowed"] is True
    assert response["warnings"] == [
        "spec.nodePools[1].nodeSelector: overlaps spec.nodePools[0] ('web'), which comes "
        "first: nodes matching both use 'web'"
    ]
    bad = [*pools, {"name": "web", "nodeSelector": {}, "quantum": "0"}]
    response = admit(
        client,
        PATH,
        admission_review(headroom_config(spec={"nodePools": bad}), kind="HeadroomConfig"),
    )
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "(2 errors)" in message
    assert "spec.nodePools[2].quantum: must be greater than 0" in message
    assert "spec.nodePools[2].name: duplicates spec.nodePools[0].name" in message
