from dataclasses import replace
from typing import Any, Final

import pytest

from app.core.cluster import NamespaceFacts
from app.core.config import DEFAULT_SETTINGS, Settings, parse_config
from app.core.decision import (
    FROM_STATUS,
    INFEASIBLE,
    Backoff,
    Remembered,
    vpa_recommended,
    weight_rule,
)
from app.core.eligibility import Recommended
from app.core.pods import OwnerRef, PodInfo
from app.core.pods import owner_ref as ref
from app.core.views import vpa_view
from tests.unit.app.builders import headroom_config, owner_ref, pod_info, vpa

REQUESTS_ONLY: Final = [{"containerName": "*", "controlledValues": "RequestsOnly"}]
POD: Final = pod_info(owners=[owner_ref("ReplicaSet", "web-5d8f7c9b4")])
# The pod's ReplicaSet is its Deployment's.
DEPLOYMENT: Final = {
    ref("apps/v1", "ReplicaSet", "web-5d8f7c9b4", True): ref("apps/v1", "Deployment", "web", True)
}


@pytest.mark.parametrize(
    ("vpas", "controllers", "expected"),
    [
        pytest.param([], DEPLOYMENT, {}, id="none"),
        pytest.param(
            [vpa(container_policies=REQUESTS_ONLY, cpu_targets={"app": "1500m"})],
            DEPLOYMENT,
            {"app": 1500},
            id="requests-only",
        ),
        pytest.param(
            [
                vpa("a", container_policies=REQUESTS_ONLY, cpu_targets={"app": "1500m"}),
                vpa("b", container_policies=REQUESTS_ONLY, cpu_targets={"app": "2"}),
            ],
            DEPLOYMENT,
            {"app": 2000},
            id="two-the-higher",
        ),
        pytest.param(
            [
                vpa(
                    target_name="other",
                    container_policies=REQUESTS_ONLY,
                    cpu_targets={"app": "1500m"},
                )
            ],
            DEPLOYMENT,
            {},
            id="another-owner",
        ),
        pytest.param([vpa(cpu_targets={"app": "1500m"})], DEPLOYMENT, {}, id="sets-limits"),
        # Nothing says whose the ReplicaSet is.
        pytest.param(
            [vpa(container_policies=REQUESTS_ONLY, cpu_targets={"app": "1500m"})],
            {},
            {},
            id="controller-unknown",
        ),
    ],
)
def test_vpa_recommended_targets(
    vpas: list[dict[str, Any]], controllers: dict[OwnerRef, OwnerRef], expected: dict[str, int]
) -> None:
    lookups = NamespaceFacts(
        namespace="team-a",
        labels={},
        namespace_vpas=tuple(vpa_view(obj) for obj in vpas),
        controllers=controllers,
    )
    assert vpa_recommended(POD, lookups, Recommended.TARGET) == expected


OTHER_SETTINGS: Final = replace(DEFAULT_SETTINGS, grow_percent=7)
BACKED_OFF: Final = pod_info(uid="u1")


@pytest.mark.parametrize(
    ("backoff", "settings", "left"),
    [
        pytest.param(None, DEFAULT_SETTINGS, 0.0, id="none"),
        pytest.param(Backoff(until=130.0), DEFAULT_SETTINGS, 30.0, id="running"),
        pytest.param(Backoff(until=90.0), DEFAULT_SETTINGS, 0.0, id="ended"),
        pytest.param(Backoff(130.0, DEFAULT_SETTINGS), DEFAULT_SETTINGS, 30.0, id="same-settings"),
        pytest.param(Backoff(130.0, DEFAULT_SETTINGS), OTHER_SETTINGS, 0.0, id="other-settings"),
    ],
)
def test_a_remembered_back_off_is_read_at_its_instant(
    backoff: Backoff | None, settings: Settings, left: float
) -> None:
    remembered = Remembered(now=100.0, backoffs={} if backoff is None else {"u1": backoff})
    assert remembered.backoff_remaining(BACKED_OFF, settings) == left


@pytest.mark.parametrize(
    ("reported", "acknowledged"),
    [
        pytest.param({}, False, id="not-acted-on"),
        pytest.param({"u1": BACKED_OFF.report_generation}, True, id="this-report"),
        pytest.param({"u1": "an earlier report"}, False, id="an-earlier-report"),
    ],
)
def test_an_infeasible_report_is_acknowledged_once_acted_on(
    reported: dict[str, Any], acknowledged: bool
) -> None:
    remembered = Remembered(reported={INFEASIBLE: reported})
    assert remembered.infeasible_acknowledged(BACKED_OFF) is acknowledged
    assert not FROM_STATUS.infeasible_acknowledged(BACKED_OFF)


WEIGHTS: Final = parse_config(
    headroom_config(
        spec={
            "weights": [
                {
                    "priorityClassName": "critical",
                    "podSelector": {"matchLabels": {"app": "web"}},
                    "weight": 8,
                },
                {"priorityClassName": "critical", "weight": 4},
                {"namespaceSelector": {"matchLabels": {"tier": "batch"}}, "weight": 0},
                {"podSelector": {"matchExpressions": [{"key": "canary", "operator": "Exists"}]}},
            ]
        }
    )
).weights


@pytest.mark.parametrize(
    ("pod", "namespace_labels", "expected"),
    [
        pytest.param(pod_info(priority_class="critical"), {}, 0, id="every-matcher-of-the-first"),
        pytest.param(
            pod_info(priority_class="critical", labels={"app": "db"}), {}, 1, id="first-match-wins"
        ),
        pytest.param(pod_info(), {"tier": "batch"}, 2, id="namespace-labels"),
        pytest.param(pod_info(labels={"canary": ""}), {}, 3, id="pod-labels"),
        pytest.param(pod_info(priority_class="other"), {"tier": "web"}, None, id="no-rule"),
        pytest.param(pod_info(), None, None, id="namespace-unknown"),
    ],
)
def test_a_pod_takes_the_first_weight_rule_that_matches_it(
    pod: PodInfo, namespace_labels: dict[str, str] | None, expected: int | None
) -> None:
    lookups = NamespaceFacts(namespace="team-a", labels=namespace_labels)
    rule = weight_rule(WEIGHTS, pod, lookups)
    assert rule is (None if expected is None else WEIGHTS[expected])
