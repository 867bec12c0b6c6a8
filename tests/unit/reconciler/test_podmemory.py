from reconciler.podmemory import PodMemory
from tests.unit.reconciler.fakes import FakeClock


def test_back_off_expires() -> None:
    clock = FakeClock()
    memory = PodMemory(clock=clock)
    assert memory.backoff_remaining("u1") == 0.0
    memory.back_off("u1", seconds=300.0)
    clock.advance(100.0)
    assert memory.backoff_remaining("u1") == 200.0
    clock.advance(200.0)
    assert memory.backoff_remaining("u1") == 0.0


def test_a_report_counts_once_per_marker() -> None:
    memory = PodMemory(clock=FakeClock())
    assert memory.first_report("u1", "Infeasible", marker=2)
    assert not memory.first_report("u1", "Infeasible", marker=2)
    assert memory.first_report("u1", "Deferred", marker=2)
    assert memory.first_report("u2", "Infeasible", marker=2)
    assert memory.first_report("u1", "Infeasible", marker=3)


def test_retain_forgets_pods_that_left() -> None:
    memory = PodMemory(clock=FakeClock())
    memory.back_off("gone", seconds=60.0)
    memory.back_off("kept", seconds=60.0)
    memory.first_report("gone", "Infeasible", marker=1)
    memory.first_report("kept", "Infeasible", marker=1)
    memory.retain(["kept"])
    assert memory.backoff_remaining("gone") == 0.0
    assert memory.backoff_remaining("kept") == 60.0
    assert memory.first_report("gone", "Infeasible", marker=1)
    assert not memory.first_report("kept", "Infeasible", marker=1)
