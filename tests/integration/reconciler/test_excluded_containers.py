"""A container named in ``spec.excludedContainers`` keeps the limit someone else gave it, on
the real API server: a mesh's injected proxy (100m requested, a 2-CPU limit from its
injector) beside a 500m app, on a booked node. Without the exclusion the proxy shares the
pod's ceiling by its request and is held near it; with it, the proxy keeps its limit, and a
limit Headroom set on it before it was excluded is never removed, which the API server
would refuse."""

from tests.integration.conftest import eventually
from tests.integration.reconciler.conftest import Pods, Scene
from tests.integration.reconciler.manifests import container, pod

PROXY = "istio-proxy"


def meshed(name: str, *, namespace: str, node: str) -> dict[str, object]:
    """The pod as a mesh's injector leaves it: the app, and a proxy sidecar with its own
    limit."""
    return pod(
        name,
        namespace=namespace,
        node=node,
        containers=[container("app", cpu="500m")],
        sidecars=[container(PROXY, cpu="100m", cpu_limit="2", sidecar=True)],
    )


def limits(pods: Pods, name: str) -> dict[str, str | None]:
    spec = pods.get(name)["spec"]
    return {
        c["name"]: c.get("resources", {}).get("limits", {}).get("cpu")
        for c in [*spec.get("initContainers", []), *spec["containers"]]
    }


def test_an_excluded_proxy_keeps_its_injector_s_limit(scene: Scene) -> None:
    pods = scene.pods
    node = scene.make_node(cpu="5")
    # The neighbour books 3 of the node's 5 CPUs: 1400m of slack beside the meshed pod's 600m.
    pods.neighbour("neighbour", node=node, cpu="3")
    pods.create(meshed("before", namespace=pods.namespace, node=node))
    for name in ("neighbour", "before"):
        pods.wait_running(name)
    scene.configure(dryRun=False)
    reconciler = scene.start_reconciler()

    # The default: the pod's 2-CPU ceiling split by request, the proxy held at a sixth.
    eventually(
        lambda: limits(pods, "before") == {PROXY: "333m", "app": "1667m"},
        what="the ceiling split over the app and the proxy",
    )

    scene.configure(dryRun=False, excludedContainers=[PROXY])
    pods.create(meshed("after", namespace=pods.namespace, node=node))
    pods.wait_running("after")
    # The apps alone share the 800m of slack now; the proxy born with its injector's limit
    # keeps it, and the one Headroom set before keeps that: a resize never removes it.
    eventually(
        lambda: (
            limits(pods, "after") == {PROXY: "2", "app": "900m"}
            and limits(pods, "before") == {PROXY: "333m", "app": "900m"}
        ),
        what="the apps resized and both proxies' limits kept",
    )
    annotation = pods.explanation("after")
    assert (annotation["managedRequests"], annotation["slack"]) == ("1000m", "800m")
    assert reconciler.resizes("error") == 0
