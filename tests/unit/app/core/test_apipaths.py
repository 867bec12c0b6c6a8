from collections.abc import Callable

import pytest

from app.core import apipaths
from app.core.apipaths import Resource
from tests.unit.chart.helm import CRD_CHART, render
from tests.unit.chart.objects import find


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param(apipaths.PODS.path(), "/api/v1/pods", id="core-across-namespaces"),
        pytest.param(
            apipaths.PODS.path(namespace="team-a"), "/api/v1/namespaces/team-a/pods", id="in-one"
        ),
        pytest.param(
            apipaths.PODS.path(namespace="team-a", name="web", subresource="resize"),
            "/api/v1/namespaces/team-a/pods/web/resize",
            id="subresource",
        ),
        pytest.param(apipaths.NODES.path(name="n1"), "/api/v1/nodes/n1", id="cluster-scoped"),
        pytest.param(
            apipaths.LEASES.path(namespace="kube-system", name="kube-headroom"),
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-headroom",
            id="group-object",
        ),
        pytest.param(
            apipaths.VERTICAL_POD_AUTOSCALERS.path(),
            "/apis/autoscaling.k8s.io/v1/verticalpodautoscalers",
            id="group-collection",
        ),
        pytest.param(
            apipaths.SERVICE_ACCOUNTS.path(namespace="ns", name="sa", subresource="token"),
            "/api/v1/namespaces/ns/serviceaccounts/sa/token",
            id="token-request",
        ),
        pytest.param(
            apipaths.CONFIG, "/apis/kube-headroom.dev/v1alpha1/headroomconfigs/cluster", id="config"
        ),
        pytest.param(
            apipaths.CONFIG_STATUS,
            "/apis/kube-headroom.dev/v1alpha1/headroomconfigs/cluster/status",
            id="config-status",
        ),
    ],
)
def test_paths_follow_the_api_servers_layout(path: str, expected: str) -> None:
    assert path == expected


def test_api_version_names_the_group_except_for_the_core_one() -> None:
    assert apipaths.PODS.api_version == "v1"
    assert apipaths.TOKEN_REVIEWS.api_version == "authentication.k8s.io/v1"


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: apipaths.PODS.path(subresource="resize"),
            "a subresource of pods needs an object name",
            id="subresource-without-name",
        ),
        pytest.param(
            lambda: apipaths.NODES.path(namespace="team-a"),
            "nodes are cluster-scoped: no namespace",
            id="namespace-of-cluster-scoped",
        ),
        pytest.param(
            lambda: apipaths.PODS.path(name="web"),
            "pods are namespaced: 'web' needs a namespace",
            id="name-without-namespace",
        ),
    ],
)
def test_a_path_that_cannot_exist_is_refused(build: Callable[[], str], message: str) -> None:
    with pytest.raises(ValueError) as raised:
        build()
    assert str(raised.value) == message


def test_the_headroomconfig_resource_is_the_crds() -> None:
    crd = find(
        render({}, chart=CRD_CHART), "CustomResourceDefinition", "headroomconfigs.kube-headroom.dev"
    )
    spec = crd["spec"]
    (version,) = spec["versions"]
    from_crd = Resource(
        spec["group"],
        version["name"],
        spec["names"]["plural"],
        namespaced=spec["scope"] != "Cluster",
    )
    assert from_crd == apipaths.HEADROOM_CONFIGS
