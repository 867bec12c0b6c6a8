from typing import Any, Final

import pytest

from app.core.cluster import NamespaceFacts
from app.core.decision import vpa_targets
from app.core.pods import OwnerRef
from app.core.pods import owner_ref as ref
from app.core.views import vpa_view
from tests.unit.app.builders import owner_ref, pod_info, vpa

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
def test_vpa_targets(
    vpas: list[dict[str, Any]], controllers: dict[OwnerRef, OwnerRef], expected: dict[str, int]
) -> None:
    lookups = NamespaceFacts(
        namespace="team-a",
        labels={},
        namespace_vpas=tuple(vpa_view(obj) for obj in vpas),
        controllers=controllers,
    )
    assert vpa_targets(POD, lookups) == expected
