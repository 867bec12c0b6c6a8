"""The idle benchmark's reading of ``/proc/<pid>/stat``."""

from bench.realnode_idle_bench import busiest, proc_ticks

# Fields after the name: state, ppid, ... utime (14th of the line) and stime (15th).
KUBELET = "205 (kubelet) S 1 205 205 0 -1 4194560 9 0 0 0 1200 340 0 0 20 0 12 0 500"
ODD = "9 (a (b) c) R 1 9 9 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 40"


def test_ticks_are_user_plus_system_and_the_name_may_hold_parentheses() -> None:
    assert proc_ticks(KUBELET) == ("kubelet", 1540)
    assert proc_ticks(ODD) == ("a (b) c", 10)


def test_busiest_counts_ticks_between_samples_and_new_processes_from_zero() -> None:
    before = {"1": ("kubelet", 100), "2": ("containerd", 50)}
    after = {"1": ("kubelet", 400), "2": ("containerd", 60), "3": ("runc", 30)}
    assert busiest(before, after, top=2) == [("kubelet", 300), ("runc", 30)]
