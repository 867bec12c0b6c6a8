from typing import Any

import pytest

from tests.unit.app.builders import headroom_config, namespace, resource_quota
from tests.unit.webhook.builders import FakeKube, admission_review, cluster_cache
from tests.unit.webhook.client import admit, webhook_client
from webhook.cache import Resource

MANAGED = {"kube-headroom.dev/mode": "managed"}
LIMITS = {"limits.cpu": "20"}


def _quotas(*specs: tuple[str, dict[str, str]]) -> list[dict[str, Any]]:
    return [resource_quota(name, namespace="team-a", hard=hard) for name, hard in specs]


SCENARIOS = {
    "enrolling-with-one-limits-quota": (
        "UPDATE",
        MANAGED,
        {},
        _quotas(("compute", LIMITS), ("pods", {"pods": "10"})),
        "namespace team-a cannot be enrolled in Headroom while its ResourceQuota compute set "
        "limits.cpu",
    ),
    "enrolling-with-two-limits-quotas": (
        "UPDATE",
        MANAGED,
        {},
        _quotas(("b-quota", LIMITS), ("a-quota", {"limits.cpu": "1", "requests.cpu": "1"})),
        "namespace team-a cannot be enrolled in Headroom while its ResourceQuotas a-quota, "
        "b-quota set limits.cpu",
    ),
    "enrolling-with-requests-quota-only": (
        "UPDATE",
        MANAGED,
        {},
        _quotas(("compute", {"requests.cpu": "10"})),
        None,
    ),
    "already-enrolled": ("UPDATE", {**MANAGED, "x": "y"}, MANAGED, _quotas(("c", LIMITS)), None),
    "not-enrolling": ("UPDATE", {"x": "y"}, {}, _quotas(("c", LIMITS)), None),
    "leaving": ("UPDATE", {}, MANAGED, _quotas(("c", LIMITS)), None),
    "create-holds-no-quota-yet": ("CREATE", MANAGED, None, _quotas(("c", LIMITS)), None),
    "mode-value-fails-closed": (
        "UPDATE",
        {"kube-headroom.dev/mode": "yes"},
        {},
        _quotas(("c", LIMITS)),
        None,
    ),
}


@pytest.mark.parametrize(
    ("operation", "labels", "old_labels", "quotas", "denial"),
    list(SCENARIOS.values()),
    ids=list(SCENARIOS),
)
def test_enrolment_with_limits_cpu_quota(
    operation: str,
    labels: dict[str, str],
    old_labels: dict[str, str] | None,
    quotas: list[dict[str, Any]],
    denial: str | None,
) -> None:
    client = webhook_client(cluster_cache(quotas=quotas))
    old = None if old_labels is None else namespace("team-a", labels=old_labels)
    review = admission_review(
        namespace("team-a", labels=labels), kind="Namespace", operation=operation, old=old
    )
    response = admit(client, "/validate/namespaces", review)
    if denial is None:
        assert response["allowed"] is True
        return
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    message = response["status"]["message"]
    assert message.startswith(denial)
    assert "quota requests.cpu instead" in message
    assert "docs/operator-runbook.md#preflight" in message


def test_custom_selector_decides_what_enrols() -> None:
    config = headroom_config(spec={"namespaceSelector": {"matchLabels": {"tier": "batch"}}})
    client = webhook_client(cluster_cache(config=config, quotas=_quotas(("c", LIMITS))))
    review = admission_review(
        namespace("team-a", labels={"tier": "batch"}),
        kind="Namespace",
        operation="UPDATE",
        old=namespace("team-a", labels={}),
    )
    assert admit(client, "/validate/namespaces", review)["allowed"] is False


def test_quotas_are_read_directly_before_the_cache_has_synced() -> None:
    api = FakeKube(
        {"/api/v1/namespaces/team-a/resourcequotas": {"items": _quotas(("direct", LIMITS))}}
    )
    client = webhook_client(cluster_cache(api=api, unsynced=[Resource.RESOURCE_QUOTAS]))
    review = admission_review(
        namespace("team-a", labels=MANAGED),
        kind="Namespace",
        operation="UPDATE",
        old=namespace("team-a", labels={}),
    )
    response = admit(client, "/validate/namespaces", review)
    assert response["allowed"] is False
    assert "ResourceQuota direct set limits.cpu" in response["status"]["message"]
