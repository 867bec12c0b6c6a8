import copy

import pytest

from app.core.pods import pod_info_from_dict
from kubectl_headroom.snapshot import strip_pod
from tests.unit.webhook.malformed import full_pod

FULL = full_pod()
FULL["metadata"]["namespace"] = "team-a"
FULL["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
FULL["spec"]["volumes"] = [{"name": "data", "emptyDir": {}}]
FULL["status"]["conditions"].append({"type": "Ready", "status": "True"})
STRIPPED = strip_pod(copy.deepcopy(FULL))


def test_a_stripped_pod_decodes_as_the_whole_one_but_for_its_status_annotation() -> None:
    whole = copy.deepcopy(FULL)
    del whole["metadata"]["annotations"]["kube-headroom.dev/status"]
    assert pod_info_from_dict(STRIPPED) == pod_info_from_dict(whole)


@pytest.mark.parametrize(
    ("path", "kept"),
    [
        pytest.param(("metadata", "labels", "app"), "web", id="every-label"),
        pytest.param(("metadata", "annotations", "kube-headroom.dev/max-cpu"), "4", id="max-cpu"),
        pytest.param(("metadata", "annotations", "kube-headroom.dev/status"), None, id="status"),
        pytest.param(("spec", "containers", 0, "env"), None, id="env"),
        pytest.param(("spec", "volumes"), None, id="volumes"),
        pytest.param(("spec", "overhead", "cpu"), "250m", id="overhead"),
    ],
)
def test_a_stripped_pod_keeps_what_decisions_read(
    path: tuple[str | int, ...], kept: object
) -> None:
    value: object = STRIPPED
    for key in path:
        if isinstance(value, dict):
            value = value.get(key)
        elif isinstance(value, list) and isinstance(key, int):
            value = value[key]
    assert value == kept


def test_only_resize_conditions_are_kept() -> None:
    assert [c["type"] for c in STRIPPED["status"]["conditions"]] == ["PodResizePending"]
