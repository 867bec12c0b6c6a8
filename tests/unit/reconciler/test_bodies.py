from datetime import UTC, datetime
from typing import Any

from reconciler.bodies import annotation_patch, config_status_patch, event_body, resize_apply_body


def test_resize_body_names_only_cpu_limits_with_sidecars_under_init_containers() -> None:
    body = resize_apply_body(
        namespace="team-a",
        name="web-1",
        containers={"app": 1500, "proxy": 2000},
        sidecars={"log-shipper": 250},
    )
    assert body == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web-1", "namespace": "team-a"},
        "spec": {
            "containers": [
                {"name": "app", "resources": {"limits": {"cpu": "1500m"}}},
                {"name": "proxy", "resources": {"limits": {"cpu": "2"}}},
            ],
            "initContainers": [
                {"name": "log-shipper", "resources": {"limits": {"cpu": "250m"}}},
            ],
        },
    }


def test_resize_body_without_sidecars_has_no_init_containers() -> None:
    body = resize_apply_body(namespace="ns", name="p", containers={"app": 100}, sidecars={})
    assert "initContainers" not in body["spec"]


def test_annotation_patch_touches_only_the_status_annotation() -> None:
    assert annotation_patch('{"factor":"2.00"}') == {
        "metadata": {"annotations": {"kube-headroom.dev/status": '{"factor":"2.00"}'}}
    }


def _event(*, warning: bool) -> dict[str, Any]:
    return event_body(
        namespace="team-a",
        pod="web-1",
        uid="u-1",
        reason="CPULimitAdjusted",
        message="1500m -> 3000m (node factor 2.00, slack 8/16 cores)",
        warning=warning,
        now=datetime(2030, 1, 2, 3, 4, 5, 678, tzinfo=UTC),
        instance="host_1",
    )


def test_event_body() -> None:
    body = _event(warning=False)
    assert body == {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": "web-1.", "namespace": "team-a"},
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "namespace": "team-a",
            "name": "web-1",
            "uid": "u-1",
        },
        "reason": "CPULimitAdjusted",
        "message": "1500m -> 3000m (node factor 2.00, slack 8/16 cores)",
        "type": "Normal",
        "source": {"component": "headroom-reconciler"},
        "reportingComponent": "kube-headroom.dev/reconciler",
        "reportingInstance": "host_1",
        "firstTimestamp": "2030-01-02T03:04:05Z",
        "lastTimestamp": "2030-01-02T03:04:05Z",
        "count": 1,
    }


def test_warning_event_type() -> None:
    assert _event(warning=True)["type"] == "Warning"


def test_config_status_patch() -> None:
    assert config_status_patch({"managedPods": 3}) == {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": "cluster"},
        "status": {"managedPods": 3},
    }
