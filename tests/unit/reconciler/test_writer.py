from datetime import UTC, datetime
from typing import Any

import pytest

from app.core.pods import excluding
from app.core.policy import ContainerLimit
from app.io.budget import Lane
from app.io.http import APPLY_PATCH, JSON, MERGE_PATCH, Request
from reconciler.writer import (
    annotation_write,
    config_status_write,
    event_write,
    resize_write,
)
from tests.unit.app import builders
from tests.unit.app.builders import container

POD = builders.pod_info("web-1", containers=[container("app"), container("proxy", cpu_limit="2")])
MANAGER = (("fieldManager", "headroom"),)


@pytest.mark.parametrize(
    ("write", "method", "path", "content_type", "lane", "query"),
    [
        pytest.param(
            resize_write(POD, (ContainerLimit("app", False, 1500),), target_m=1500),
            "PATCH",
            "/api/v1/namespaces/team-a/pods/web-1/resize",
            APPLY_PATCH,
            Lane.PRIMARY,
            (*MANAGER, ("force", "true")),
            id="resize",
        ),
        pytest.param(
            annotation_write(POD, "{}"),
            "PATCH",
            "/api/v1/namespaces/team-a/pods/web-1",
            MERGE_PATCH,
            Lane.SECONDARY,
            MANAGER,
            id="annotation",
        ),
        pytest.param(
            event_write(
                POD,
                reason="CPULimitAdjusted",
                message="m",
                warning=False,
                now=datetime(2030, 1, 1, tzinfo=UTC),
                instance="r-1",
            ),
            "POST",
            "/api/v1/namespaces/team-a/events",
            JSON,
            Lane.SECONDARY,
            (),
            id="event",
        ),
        pytest.param(
            config_status_write({"managedPods": 1}),
            "PATCH",
            "/apis/kube-headroom.dev/v1alpha1/headroomconfigs/cluster/status",
            MERGE_PATCH,
            Lane.PRIMARY,
            MANAGER,
            id="config-status",
        ),
    ],
)
def test_each_write_is_a_value_naming_its_request(
    write: Request,
    method: str,
    path: str,
    content_type: str,
    lane: Lane,
    query: tuple[tuple[str, str], ...],
) -> None:
    assert (write.method, write.path, write.content_type, write.lane, write.query) == (
        method,
        path,
        content_type,
        lane,
        query,
    )


def _limits(write: Request) -> dict[str, Any]:
    return {c["name"]: c["resources"]["limits"]["cpu"] for c in write.body["spec"]["containers"]}


def test_a_resize_names_excluded_containers_at_the_limit_they_have() -> None:
    pod = excluding(POD, frozenset({"proxy"}))
    write = resize_write(pod, (ContainerLimit("app", False, 1500),), target_m=1500)
    assert _limits(write) == {"app": "1500m", "proxy": "2"}


def test_a_pod_level_resize_sets_the_pod_level_limit() -> None:
    pod = builders.pod_info("web-1", resources={"requests": {"cpu": "1"}, "limits": {"cpu": "2"}})
    write = resize_write(pod, (), target_m=3000)
    assert write.body["spec"]["resources"] == {"limits": {"cpu": "3"}}
