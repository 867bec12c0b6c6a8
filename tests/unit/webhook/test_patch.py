import copy

import jsonpatch

from tests.unit.app.builders import pod
from webhook.patch import json_patch


def test_equal_objects_give_no_patch() -> None:
    original = pod()
    assert json_patch(original, copy.deepcopy(original)) is None


def test_patch_turns_the_original_into_the_edited_copy() -> None:
    original = pod()
    edited = copy.deepcopy(original)
    edited["spec"]["containers"][0]["resources"]["limits"]["cpu"] = "1"
    operations = json_patch(original, edited)
    assert operations == [
        {"op": "add", "path": "/spec/containers/0/resources/limits/cpu", "value": "1"}
    ]
    assert jsonpatch.apply_patch(original, operations) == edited


def test_a_part_diffed_on_its_own_is_patched_at_its_place() -> None:
    original = pod()
    part = {"containers": {"0": {"resources": {}}}}
    edited_part = {"containers": {"0": {"resources": {"limits": {"cpu": "1"}}}}}
    operations = json_patch(part, edited_part, at="/spec")
    assert operations == [
        {"op": "add", "path": "/spec/containers/0/resources/limits", "value": {"cpu": "1"}}
    ]
    patched = jsonpatch.apply_patch(original, operations)
    assert patched["spec"]["containers"][0]["resources"]["limits"] == {"cpu": "1"}
