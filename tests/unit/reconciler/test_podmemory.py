import dataclasses

import pytest

from app.core.config import DEFAULT_SETTINGS, Settings
from reconciler.podmemory import PodMemory
from tests.unit.app import builders
from tests.unit.reconciler.fakes import FakeClock

OTHER_SETTINGS = dataclasses.replace(DEFAULT_SETTINGS, grow_percent=7)


def remaining(memory: PodMemory, uid: str = "u1", settings: Settings = DEFAULT_SETTINGS) -> float:
    pod = builders.pod_info("p", uid=uid)
    return memory.recall({}).remembered.backoff_remaining(pod, settings)


def test_back_off_expires() -> None:
    clock = FakeClock()
    memory = PodMemory(clock=clock)
    assert remaining(memory) == 0.0
    memory.back_off("u1", seconds=300.0)
    clock.advance(100.0)
    assert remaining(memory) == 200.0
    clock.advance(200.0)
    assert remaining(memory) == 0.0


@pytest.mark.parametrize(
    ("settings", "left"),
    [
        pytest.param(DEFAULT_SETTINGS, 300.0, id="same-settings-hold"),
        pytest.param(OTHER_SETTINGS, 0.0, id="other-settings-lift"),
    ],
)
def test_a_back_off_tied_to_settings_holds_only_under_them(settings: Settings, left: float) -> None:
    memory = PodMemory(clock=FakeClock())
    memory.back_off("u1", seconds=300.0, settings=DEFAULT_SETTINGS)
    assert remaining(memory, settings=settings) == left


def test_a_report_is_new_once_per_marker() -> None:
    memory = PodMemory(clock=FakeClock())
    memory.note_report("u1", "Infeasible", marker=2)
    recall = memory.recall({})
    assert not recall.remembered.new_report("u1", "Infeasible", 2)
    assert recall.remembered.new_report("u1", "Deferred", 2)
    assert recall.remembered.new_report("u2", "Infeasible", 2)
    assert recall.remembered.new_report("u1", "Infeasible", 3)


def test_retain_forgets_pods_that_left_and_ended_back_offs() -> None:
    clock = FakeClock()
    memory = PodMemory(clock=clock)
    memory.back_off("gone", seconds=60.0)
    memory.back_off("kept", seconds=60.0)
    memory.back_off("ended", seconds=10.0)
    for uid in ("gone", "kept"):
        memory.note_report(uid, "Infeasible", marker=1)
        memory.note_resize(uid, generation=2, target_m=500)
        memory.note_annotation(uid, "text")
    clock.advance(30.0)
    memory.retain(["kept", "ended"])
    recall = memory.recall({})
    assert set(recall.remembered.backoffs) == {"kept"}
    assert not recall.remembered.new_report("kept", "Infeasible", 1)
    assert recall.remembered.new_report("gone", "Infeasible", 1)
    assert set(recall.resized) == set(recall.annotated) == {"kept"}
