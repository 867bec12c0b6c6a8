from typing import Any

import msgspec
import pytest

from app.core.labels import MAX_CPU_ANNOTATION, MIRROR_POD_ANNOTATION
from app.core.pods import (
    ContainerInfo,
    OwnerRef,
    PodInfo,
    PodLevelResources,
    PodSpecWire,
    booked_cpu_m,
    excluding,
    max_cpu_cap,
    pod_info_from_dict,
    qos_class,
    resource_facts,
    shared_facts,
    shared_labels,
)
from app.core.quantity import QuantityError
from tests.unit.app.builders import (
    bare_container,
    condition,
    container,
    owner_ref,
    pod,
    pod_info,
    pod_resources,
)

SIDECAR = container("proxy", cpu_request="100m", restart_policy="Always")
PLAIN_INIT = container("migrate", cpu_request="2", memory_request="1Gi")


def test_pods_with_the_same_labels_share_one_copy_and_null_values_read_as_absent() -> None:
    first = pod_info("a", labels={"app": "web", "tier": "gold"})
    second = pod_info("b", labels={"app": "web", "tier": "gold"})
    assert first.labels is second.labels
    assert shared_labels({"app": "web", "gone": None}) == {"app": "web"}
    assert shared_labels(None) == shared_labels({}) == {}


def test_strips_a_pod_to_what_the_policy_needs() -> None:
    info = pod_info(
        "web-1",
        namespace="team-b",
        node="node-7",
        labels={"app": "web", "kube-headroom.dev/mode": "unmanaged"},
        owners=[owner_ref("ReplicaSet", "web-5d8f"), owner_ref("Node", "n", api_version="v1")],
        generation=4,
        observed_generation=3,
        status_annotation='{"factor":"1.00"}',
    )
    assert (info.namespace, info.name, info.uid) == ("team-b", "web-1", "uid-team-b-web-1")
    assert info.key == "team-b/web-1"
    assert (info.node_name, info.phase, info.facts.qos_class) == ("node-7", "Running", "Burstable")
    # Every label: weight rules select pods by label.
    assert info.labels == {"app": "web", "kube-headroom.dev/mode": "unmanaged"}
    assert info.priority_class == ""
    assert info.owners == (
        OwnerRef(kind="ReplicaSet", api_group="apps", name="web-5d8f", controller=True),
        OwnerRef(kind="Node", api_group="", name="n", controller=True),
    )
    assert info.facts.containers == (
        ContainerInfo(
            name="app",
            sidecar=False,
            cpu_request_m=500,
            cpu_limit_m=None,
            memory_request_bytes=128 * 2**20,
            memory_limit_bytes=None,
            restart_on_cpu_resize=False,
        ),
    )
    assert (info.facts.request_m, info.facts.limit_m) == (500, 0)
    assert (info.generation, info.observed_generation) == (4, 3)
    assert info.status_annotation == '{"factor":"1.00"}'
    assert not info.terminal
    assert not info.mirror


def test_an_almost_empty_pod_gets_neutral_values() -> None:
    info = pod_info_from_dict({})
    assert (info.namespace, info.name, info.uid, info.node_name, info.phase) == ("",) * 5
    assert info.facts.containers == ()
    assert (info.facts.request_m, info.facts.limit_m) == (0, 0)
    assert info.facts.qos_class == "BestEffort"
    assert info.generation is None
    assert info.resize_pending is None


def test_sidecars_count_and_plain_init_containers_do_not() -> None:
    info = pod_info(
        containers=[container("app", cpu_request="1", cpu_limit="2")],
        init_containers=[PLAIN_INIT, SIDECAR],
    )
    assert [(c.name, c.sidecar) for c in info.facts.containers] == [("app", False), ("proxy", True)]
    assert info.facts.init_cpu_requests_m == (2000,)
    assert info.facts.request_m == 1100
    # The sidecar has no limit, so the pod's current limit counts as unset.
    assert info.facts.limit_m == 0


@pytest.mark.parametrize(
    ("containers", "request_m", "limit_m"),
    [
        pytest.param(
            [
                container("a", cpu_request="1", cpu_limit="2"),
                container("b", cpu_request="500m", cpu_limit="1"),
            ],
            1500,
            3000,
            id="all-limited",
        ),
        pytest.param(
            [container("a", cpu_request="1", cpu_limit="2"), container("b", cpu_request="500m")],
            1500,
            0,
            id="one-unlimited",
        ),
        pytest.param(
            [container("a", cpu_request="1", cpu_limit="2"), container("b", cpu_request=None)],
            1000,
            2000,
            id="request-less-container-ignored",
        ),
        pytest.param(
            [container("a", cpu_request=None, cpu_limit="1500m")],
            1500,
            1500,
            id="limit-defaults-the-request",
        ),
        pytest.param(
            [container("a", cpu_request="0", cpu_limit=None)],
            0,
            0,
            id="zero-request",
        ),
    ],
)
def test_request_and_current_limit(
    containers: list[dict[str, Any]], request_m: int, limit_m: int
) -> None:
    info = pod_info(containers=containers)
    assert (info.facts.request_m, info.facts.limit_m) == (request_m, limit_m)
    assert all(c.cpu_request_m > 0 for c in info.facts.cpu_containers)


def guaranteed(name: str = "app", **overrides: Any) -> dict[str, Any]:
    values = {"cpu_request": "1", "cpu_limit": "1", "memory_request": "1Gi", "memory_limit": "1Gi"}
    return container(name, **(values | overrides))


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param([guaranteed()], [], "Guaranteed", id="limits-equal-requests"),
        pytest.param(
            [guaranteed(memory_limit="1073741824")], [], "Guaranteed", id="equal-in-other-units"
        ),
        pytest.param([guaranteed(cpu_limit="2")], [], "Burstable", id="cpu-limit-above"),
        pytest.param([guaranteed(memory_limit=None)], [], "Burstable", id="no-memory-limit"),
        pytest.param(
            [guaranteed(cpu_request=None, memory_request=None)],
            [],
            "Guaranteed",
            id="limits-only-default-requests",
        ),
        pytest.param(
            [container(cpu_request=None, memory_request=None)], [], "BestEffort", id="nothing-set"
        ),
        pytest.param(
            [container(cpu_request="0", memory_request="0")], [], "BestEffort", id="zeros-are-unset"
        ),
        pytest.param([guaranteed()], [container("init")], "Burstable", id="burstable-init"),
        pytest.param([guaranteed()], [guaranteed("init")], "Guaranteed", id="guaranteed-init"),
        pytest.param(
            [guaranteed(cpu_request="0", cpu_limit="1")],
            [],
            "Burstable",
            id="zero-cpu-request",
        ),
        pytest.param(
            [guaranteed(memory_request="0", memory_limit="1Gi")],
            [],
            "Burstable",
            id="zero-memory-request",
        ),
        pytest.param(
            [guaranteed(memory_request="512Mi")], [], "Burstable", id="memory-request-below"
        ),
    ],
)
def test_qos_class_is_computed_like_the_api_server(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]], expected: str
) -> None:
    obj = pod(containers=containers, init_containers=init_containers, qos_class=None)
    assert qos_class(obj["spec"]) == expected
    assert pod_info_from_dict(obj).facts.qos_class == expected


def test_qos_class_from_status_wins() -> None:
    assert pod_info(containers=[guaranteed()], qos_class="Burstable").facts.qos_class == "Burstable"


@pytest.mark.parametrize(
    ("containers", "init_containers", "expected"),
    [
        pytest.param([guaranteed(cpu_limit=None)], [], True, id="memory-pinned-cpu-unlimited"),
        pytest.param([guaranteed(cpu_limit="2")], [], True, id="memory-pinned-cpu-above"),
        pytest.param([container(cpu_limit="2")], [], False, id="memory-unlimited"),
        pytest.param(
            [guaranteed(cpu_limit="2"), container("other", cpu_request=None, memory_limit="128Mi")],
            [],
            False,
            id="container-without-cpu-request",
        ),
        pytest.param(
            [guaranteed(cpu_limit="2")],
            [guaranteed("init", cpu_limit="2")],
            False,
            id="plain-init-keeps-its-higher-limit",
        ),
        pytest.param(
            [guaranteed(cpu_limit="2")],
            [guaranteed("proxy", cpu_limit="2", restart_policy="Always")],
            True,
            id="sidecar-is-pinned-too",
        ),
        pytest.param(
            [guaranteed(cpu_limit="2")],
            [guaranteed("init")],
            True,
            id="plain-init-already-guaranteed",
        ),
    ],
)
def test_guaranteed_if_pinned(
    containers: list[dict[str, Any]], init_containers: list[dict[str, Any]], expected: bool
) -> None:
    info = pod_info(containers=containers, init_containers=init_containers)
    assert info.facts.guaranteed_if_pinned is expected


@pytest.mark.parametrize(
    ("text", "cap_m", "warning"),
    [
        pytest.param(None, None, None, id="absent"),
        pytest.param("2", 2000, None, id="cores"),
        pytest.param("1500m", 1500, None, id="millicores"),
        pytest.param("0.0001", 1, None, id="sub-milli-rounds-up"),
        pytest.param("two", None, "does not start with a number", id="not-a-quantity"),
        pytest.param("0", None, "must be greater than 0", id="zero"),
        pytest.param("-1", None, "must be greater than 0", id="negative"),
    ],
)
def test_max_cpu_cap(text: str | None, cap_m: int | None, warning: str | None) -> None:
    cap, message = max_cpu_cap(text)
    assert cap == cap_m
    if warning is None:
        assert message is None
    else:
        assert message is not None
        assert MAX_CPU_ANNOTATION in message
        assert warning in message


def test_max_cpu_annotation_is_read() -> None:
    info = pod_info(max_cpu="3")
    assert (info.max_cpu_m, info.max_cpu_warning) == (3000, None)
    bad = pod_info(max_cpu="lots")
    assert bad.max_cpu_m is None
    assert bad.max_cpu_warning is not None


# What the pod reads from its conditions: the pending reason, its message, and an error.
@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        pytest.param([], (None, "", False), id="none"),
        pytest.param(
            [condition("PodResizePending", reason="Deferred", message="node busy")],
            ("Deferred", "node busy", False),
            id="deferred",
        ),
        pytest.param(
            [condition("PodResizePending", reason="Infeasible")],
            ("Infeasible", "", False),
            id="infeasible",
        ),
        pytest.param(
            [condition("PodResizeInProgress", reason="Error", message="cgroup write failed")],
            (None, "", True),
            id="in-progress-error",
        ),
        pytest.param([condition("PodResizeInProgress")], (None, "", False), id="in-progress"),
        pytest.param(
            [condition("PodResizePending", reason="Deferred", status="False")],
            (None, "", False),
            id="not-true",
        ),
        pytest.param([condition("Ready")], (None, "", False), id="other-condition"),
    ],
)
def test_resize_conditions(
    conditions: list[dict[str, Any]], expected: tuple[str | None, str, bool]
) -> None:
    info = pod_info(conditions=conditions)
    assert (info.resize_pending, info.resize_pending_message, info.resize_error) == expected


@pytest.mark.parametrize(
    ("info", "terminal"),
    [
        pytest.param(pod_info(phase="Running"), False, id="running"),
        pytest.param(pod_info(phase="Pending"), False, id="pending"),
        pytest.param(pod_info(phase="Succeeded"), True, id="succeeded"),
        pytest.param(pod_info(phase="Failed"), True, id="failed"),
        pytest.param(pod_info(deletion_timestamp="2026-01-01T00:00:00Z"), True, id="deleting"),
    ],
)
def test_terminal(info: PodInfo, terminal: bool) -> None:
    assert info.terminal is terminal


def test_mirror_pods_are_recognised() -> None:
    assert pod_info(annotations={MIRROR_POD_ANNOTATION: "abc"}).mirror


def test_cpu_resize_policy() -> None:
    info = pod_info(
        containers=[
            container("a", cpu_resize_policy="RestartContainer"),
            container("b", cpu_resize_policy="NotRequired"),
        ]
    )
    assert [c.restart_on_cpu_resize for c in info.facts.containers] == [True, False]


@pytest.mark.parametrize(
    ("overrides", "booked_m"),
    [
        pytest.param({}, 500, id="one-container"),
        pytest.param({"init_containers": [PLAIN_INIT]}, 2000, id="init-above-the-containers"),
        pytest.param(
            {"init_containers": [container("copy", cpu_request="100m")]}, 500, id="init-below"
        ),
        # A sidecar runs beside the init containers after it, not before it.
        pytest.param(
            {"init_containers": [container("warm", cpu_request="550m"), SIDECAR]},
            600,
            id="init-before-sidecar",
        ),
        pytest.param(
            {"init_containers": [SIDECAR, container("warm", cpu_request="550m")]},
            650,
            id="init-after-sidecar",
        ),
        pytest.param({"overhead_cpu": "250m"}, 750, id="runtime-class-overhead"),
        pytest.param(
            {"init_containers": [PLAIN_INIT], "overhead_cpu": "250m"}, 2250, id="init-and-overhead"
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": "700m"}}, "init_containers": [PLAIN_INIT]},
            700,
            id="pod-level-request",
        ),
        pytest.param(
            {"resources": {"requests": {"cpu": "700m"}}, "overhead_cpu": "100m"},
            800,
            id="pod-level-and-overhead",
        ),
        pytest.param(
            {"resources": {"requests": {"memory": "1Gi"}}, "init_containers": [PLAIN_INIT]},
            2000,
            id="pod-level-memory-only",
        ),
    ],
)
def test_a_pod_books_what_the_scheduler_books(overrides: dict[str, Any], booked_m: int) -> None:
    assert pod_info(**overrides).facts.booked_m == booked_m


def test_booked_cpu_counts_every_pod_until_it_has_finished() -> None:
    pods = [
        pod_info("a", containers=[container(cpu_request="1")]),
        pod_info("b", containers=[container(cpu_request="250m")], init_containers=[PLAIN_INIT]),
        pod_info("c", containers=[container(cpu_request="4")], phase="Succeeded"),
        pod_info("d", containers=[container(cpu_request="4")], phase="Failed"),
        # Its containers hold the CPU until they stop, and the scheduler keeps it booked.
        pod_info(
            "e", containers=[container(cpu_request="3")], deletion_timestamp="2026-01-01T00:00:00Z"
        ),
    ]
    assert booked_cpu_m(pods) == 1000 + 2000 + 3000


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param({"cpu_request": "-1"}, id="negative-cpu"),
        pytest.param({"cpu_request": "1 core"}, id="malformed-cpu"),
        pytest.param({"memory_limit": "1GB"}, id="malformed-memory"),
    ],
)
def test_bad_quantities_raise(resources: dict[str, str]) -> None:
    with pytest.raises(QuantityError):
        pod_info(containers=[container(**resources)])


def test_a_pod_at_admission_has_its_qos_computed() -> None:
    info = pod_info(node=None, phase=None, qos_class=None, generation=None)
    assert (info.node_name, info.phase, info.facts.qos_class) == ("", "", "Burstable")
    assert not info.terminal


def test_pods_without_pod_level_resources_have_no_pod_level_record() -> None:
    assert pod_info().facts.pod_resources is None
    assert pod_info(resources={"requests": {}, "limits": {}}).facts.pod_resources is None
    assert pod_info(resources={"requests": {"example.com/gpu": "1"}}).facts.pod_resources is None


@pytest.mark.parametrize(
    ("resources", "containers", "request_m", "limit_m", "pod_level"),
    [
        pytest.param(
            pod_resources(cpu_request="1", cpu_limit="2"),
            [bare_container()],
            1000,
            2000,
            PodLevelResources(cpu_limit_m=2000, container_limit_floor_m=0),
            id="request-and-limit",
        ),
        pytest.param(
            pod_resources(cpu_request="1500m"),
            [bare_container(), bare_container("sidecar-less")],
            1500,
            0,
            PodLevelResources(cpu_limit_m=None, container_limit_floor_m=0),
            id="no-pod-level-cpu-limit",
        ),
        pytest.param(
            pod_resources(cpu_request="2", cpu_limit="4"),
            [container(cpu_request="500m", cpu_limit="3"), container("b", cpu_limit="1")],
            2000,
            4000,
            PodLevelResources(cpu_limit_m=4000, container_limit_floor_m=3000),
            id="container-limits-set-the-floor",
        ),
        pytest.param(
            pod_resources(cpu_request=None, memory_request=None, cpu_limit="3"),
            [container(cpu_request="500m"), container("b", cpu_request="700m")],
            1200,
            3000,
            PodLevelResources(cpu_limit_m=3000, container_limit_floor_m=0),
            id="admission-request-defaults-to-the-containers",
        ),
        pytest.param(
            pod_resources(cpu_request=None, memory_request=None, cpu_limit="3"),
            [bare_container()],
            3000,
            3000,
            PodLevelResources(cpu_limit_m=3000, container_limit_floor_m=0),
            id="admission-request-defaults-to-the-limit",
        ),
        pytest.param(
            pod_resources(cpu_request=None, memory_request="1Gi"),
            [container(cpu_request="400m")],
            400,
            0,
            PodLevelResources(cpu_limit_m=None, container_limit_floor_m=0),
            id="memory-only-books-the-containers-cpu",
        ),
    ],
)
def test_pod_level_request_and_limit_replace_the_containers(
    resources: dict[str, dict[str, str]],
    containers: list[dict[str, Any]],
    request_m: int,
    limit_m: int,
    pod_level: PodLevelResources,
) -> None:
    info = pod_info(resources=resources, containers=containers, qos_class=None)
    assert (info.facts.request_m, info.facts.limit_m) == (request_m, limit_m)
    assert info.facts.pod_resources == pod_level
    assert booked_cpu_m([info]) == request_m


@pytest.mark.parametrize(
    ("resources", "qos", "pinned"),
    [
        pytest.param(pod_resources(), "Burstable", False, id="requests-only"),
        pytest.param(
            pod_resources(cpu_limit="1", memory_limit="256Mi"), "Guaranteed", True, id="guaranteed"
        ),
        pytest.param(
            pod_resources(cpu_limit="2", memory_limit="256Mi"),
            "Burstable",
            True,
            id="memory-pinned-cpu-above",
        ),
        pytest.param(
            pod_resources(cpu_limit="2", memory_limit="512Mi"),
            "Burstable",
            False,
            id="memory-above",
        ),
        pytest.param(
            pod_resources(cpu_request=None, memory_request=None, memory_limit="1Gi"),
            "Burstable",
            False,
            id="memory-limit-only",
        ),
    ],
)
def test_pod_level_resources_decide_the_qos_class(
    resources: dict[str, dict[str, str]], qos: str, pinned: bool
) -> None:
    # The containers alone would be Guaranteed; pod-level resources override them.
    containers = [container(cpu_request="1", cpu_limit="1", memory_limit="128Mi")]
    obj = pod(resources=resources, containers=containers, qos_class=None)
    assert qos_class(obj["spec"]) == qos
    info = pod_info_from_dict(obj)
    assert info.facts.qos_class == qos
    assert info.facts.guaranteed_if_pinned is pinned


def test_replicas_share_their_container_and_owner_records() -> None:
    """Pods of one spec and owner point at one set of records: most of a record's size."""
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f", "controller": True}
    ]
    first, second = (
        pod_info_from_dict(pod(name, containers=[container(cpu_request="250m")], owners=owner))
        for name in ("web-7d9f-a", "web-7d9f-b")
    )
    other = pod_info_from_dict(pod("batch", containers=[container(cpu_request="2")], owners=owner))
    assert first.facts.containers is second.facts.containers
    assert first.owners is second.owners
    assert other.facts.containers is not first.facts.containers
    assert other.facts.containers[0].cpu_request_m == 2000
    assert other.owners is first.owners


def test_shared_facts_are_those_of_the_spec() -> None:
    spec = pod(containers=[container(cpu_request="500m", cpu_limit="1")])["spec"]
    wire_spec = msgspec.convert(spec, PodSpecWire)
    assert shared_facts(wire_spec, qos_class=None) == resource_facts(spec, qos_class=None)


PROXY = "istio-proxy"


@pytest.mark.parametrize(
    ("overrides", "request_m", "limit_m", "managed", "kept", "pinned_guaranteed", "whole_pinned"),
    [
        pytest.param(
            {
                "containers": [
                    container("app", cpu_request="500m", cpu_limit="1", memory_limit="128Mi"),
                    container(PROXY, cpu_request="100m", cpu_limit="2", memory_limit="128Mi"),
                ]
            },
            500,
            1000,
            ["app"],
            [(PROXY, 2000)],
            False,
            True,
            id="app-container",
        ),
        pytest.param(
            {
                "containers": [container("app", cpu_request="500m")],
                "init_containers": [
                    container(PROXY, cpu_request="100m", cpu_limit="2", restart_policy="Always")
                ],
            },
            500,
            0,
            ["app"],
            [(PROXY, 2000)],
            False,
            False,
            id="sidecar-app-without-limit",
        ),
        pytest.param(
            {
                "containers": [
                    container("app", cpu_request="500m", memory_limit="128Mi"),
                    container(PROXY, cpu_request="100m", cpu_limit="100m", memory_limit="128Mi"),
                ]
            },
            500,
            0,
            ["app"],
            [(PROXY, 100)],
            True,
            True,
            id="proxy-pinned-already",
        ),
        pytest.param(
            {"containers": [container(PROXY, cpu_request="100m", cpu_limit="2")]},
            0,
            0,
            [],
            [(PROXY, 2000)],
            False,
            False,
            id="only-the-proxy",
        ),
    ],
)
def test_excluded_containers_leave_the_managed_part(
    overrides: dict[str, Any],
    request_m: int,
    limit_m: int,
    managed: list[str],
    kept: list[tuple[str, int]],
    pinned_guaranteed: bool,
    whole_pinned: bool,
) -> None:
    whole = pod_info(**overrides)
    view = excluding(whole, frozenset({PROXY, "linkerd-proxy"}))
    # Pinning the whole pod, the proxy included, would make the first and third Guaranteed.
    assert whole.facts.guaranteed_if_pinned is whole_pinned
    assert (view.facts.request_m, view.facts.limit_m) == (request_m, limit_m)
    assert [c.name for c in view.facts.cpu_containers] == managed
    assert [(c.name, c.cpu_limit_m) for c in view.facts.excluded] == kept
    assert view.facts.guaranteed_if_pinned is pinned_guaranteed
    # What the pod books and what it is are unchanged.
    assert (view.facts.booked_m, view.facts.containers, view.facts.qos_class) == (
        whole.facts.booked_m,
        whole.facts.containers,
        whole.facts.qos_class,
    )


@pytest.mark.parametrize(
    ("names", "overrides"),
    [
        pytest.param(frozenset(), {}, id="nothing-excluded"),
        pytest.param(frozenset({PROXY}), {}, id="no-such-container"),
        pytest.param(
            frozenset({"app"}),
            {"resources": pod_resources(cpu_request="1")},
            id="pod-level-resources",
        ),
    ],
)
def test_a_pod_without_excluded_containers_is_itself(
    names: frozenset[str], overrides: dict[str, Any]
) -> None:
    whole = pod_info(**overrides)
    assert excluding(whole, names) is whole
