from typing import Any

import pytest

from tests.unit.app.builders import headroom_config, namespace, resource_quota
from tests.unit.webhook.builders import BrokenCache, FakeKube, admission_review, cluster_cache
from tests.unit.webhook.client import admit, webhook_client

LIMITS = {"limits.cpu": "20", "requests.cpu": "10"}
REQUESTS = {"requests.cpu": "10"}

DENIAL = (
    "ResourceQuota team-a/quota sets limits.cpu in spec.hard, but namespace team-a is managed "
    "by Headroom, which raises CPU limits into idle node capacity; a limits.cpu quota would be "
    "charged for those raises and refuse them. Remove limits.cpu from spec.hard and quota "
    'requests.cpu instead. See the Headroom operator runbook, Preflight, "ResourceQuota: '
    'requests.cpu only" (docs/operator-runbook.md#preflight).'
)

SCENARIOS = {
    "create-limits-cpu-in-managed-namespace": ("CREATE", LIMITS, None, {}, False),
    "update-keeping-limits-cpu": ("UPDATE", LIMITS, LIMITS, {}, False),
    "update-adding-limits-cpu": ("UPDATE", LIMITS, REQUESTS, {}, False),
    "update-removing-limits-cpu": ("UPDATE", REQUESTS, LIMITS, {}, True),
    "create-requests-cpu-only": ("CREATE", REQUESTS, None, {}, True),
    "delete-is-never-checked": ("DELETE", None, LIMITS, {}, True),
    "unmanaged-namespace": (
        "CREATE",
        LIMITS,
        None,
        {"namespaces": [namespace("team-a", labels={})]},
        True,
    ),
    "excluded-namespace": (
        "CREATE",
        LIMITS,
        None,
        {"config": headroom_config(spec={"excludedNamespaces": ["team-a"]})},
        True,
    ),
    "custom-namespace-selector": (
        "CREATE",
        LIMITS,
        None,
        {
            "namespaces": [namespace("team-a", labels={"tier": "batch"})],
            "config": headroom_config(
                spec={"namespaceSelector": {"matchLabels": {"tier": "batch"}}}
            ),
        },
        False,
    ),
    "denied-in-dry-run-too": ("CREATE", LIMITS, None, {"config": headroom_config()}, False),
}


@pytest.mark.parametrize(
    ("operation", "hard", "old_hard", "cluster_args", "allowed"),
    list(SCENARIOS.values()),
    ids=list(SCENARIOS),
)
def test_limits_cpu_quota_in_managed_namespace(
    operation: str,
    hard: dict[str, str] | None,
    old_hard: dict[str, str] | None,
    cluster_args: dict[str, Any],
    allowed: bool,
) -> None:
    client = webhook_client(cluster_cache(**cluster_args))
    obj = None if hard is None else resource_quota(hard=hard)
    old = None if old_hard is None else resource_quota(hard=old_hard)
    response = admit(
        client,
        "/validate/resourcequotas",
        admission_review(obj, kind="ResourceQuota", operation=operation, old=old),
    )
    assert response["allowed"] is allowed
    if not allowed:
        assert response["status"] == {"code": 403, "message": DENIAL}


def test_namespace_not_yet_in_the_cache_is_read_directly() -> None:
    api = FakeKube({"/api/v1/namespaces/team-b": namespace("team-b")})
    client = webhook_client(cluster_cache(api=api))
    review = admission_review(resource_quota(namespace="team-b", hard=LIMITS), kind="ResourceQuota")
    response = admit(client, "/validate/resourcequotas", review)
    assert response["allowed"] is False
    assert "namespace team-b is managed by Headroom" in response["status"]["message"]


def test_when_the_cache_cannot_answer_the_quota_is_admitted_with_a_warning() -> None:
    client = webhook_client(cluster_cache(api=FakeKube()))
    review = admission_review(resource_quota(namespace="team-b", hard=LIMITS), kind="ResourceQuota")
    response = admit(client, "/validate/resourcequotas", review)
    assert response["allowed"] is True
    [warning] = response["warnings"]
    assert warning.startswith("Headroom could not check ResourceQuota team-b/quota")
    assert "namespace team-b not found" in warning


def test_an_invalid_stored_config_means_unchecked_not_defaults() -> None:
    broken = headroom_config(spec={"deadband": {"growPercent": 500}})
    client = webhook_client(cluster_cache(config=broken))
    response = admit(
        client,
        "/validate/resourcequotas",
        admission_review(resource_quota(hard=LIMITS), kind="ResourceQuota"),
    )
    assert response["allowed"] is True
    assert "HeadroomConfig cluster is invalid" in response["warnings"][0]


def test_a_failing_handler_denies_with_a_retryable_500() -> None:
    client = webhook_client(BrokenCache())
    quota = resource_quota(hard=LIMITS)
    response = admit(
        client, "/validate/resourcequotas", admission_review(quota, kind="ResourceQuota")
    )
    assert response["allowed"] is False
    assert response["status"]["code"] == 500
    assert response["status"]["message"].startswith(
        "Headroom could not validate this ResourceQuota because of an internal error; retry"
    )
