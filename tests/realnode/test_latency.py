"""How fast the ceiling follows the node's bookings on a real kubelet: a neighbour's
binding to the managed container's ``cpu.max`` shrinking, and its deletion to the
ceiling rising again, over 20 trials each (``devcluster.latency``; ``make bench-realnode``
runs the same trials on their own). The distributions are printed; the assertions are
the design's: Headroom waits out the node's debounce (2 s, jittered by ±50%) before it
writes, and the kubelet applies every resize."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from devcluster.latency import CeilingTrials, report
from devcluster.realnodes import WORKLOAD, RealCluster
from tests.integration.conftest import Cluster
from tests.integration.reconciler.conftest import Reconciler
from tests.realnode import builders
from tests.realnode.conftest import say, wait_agreed
from tests.realnode.kubelets import Kubelets

TRIALS = 20
DEBOUNCE_FLOOR_SECONDS = 1.0


def test_binding_and_deletion_to_cpu_max(
    pytestconfig: pytest.Config,
    control_plane: Cluster,
    real_cluster: RealCluster,
    enforcing: Callable[..., None],
    managed_namespace: str,
    namespace: str,
    start_reconciler: Callable[..., Reconciler],
    kubelets: Kubelets,
) -> None:
    start_reconciler()
    control_plane.apply(builders.pod("web", namespace=managed_namespace, node=WORKLOAD.name))
    wait_agreed(
        kubelets, managed_namespace, "web", until=lambda s: s.containers["app"].spec == 3000
    )
    trials = CeilingTrials(
        plane=real_cluster.plane,
        api=real_cluster.api,
        guest=real_cluster.guest(WORKLOAD.name),
        namespace=managed_namespace,
        pod="web",
        container="app",
        neighbour_namespace=namespace,
        neighbour_cpu="1500m",
    ).run(TRIALS)
    say(pytestconfig, "\n" + report(trials))
    steps = [step for trial in trials for step in (trial.shrink, trial.rise)]
    assert len(steps) == 2 * TRIALS
    for step in steps:
        assert step.headroom >= DEBOUNCE_FLOOR_SECONDS, step
        assert 0 < step.write < step.headroom, step
        assert step.kubelet > 0, step
    # Every shrink and rise landed where the policy puts it.
    settled = kubelets.observe(managed_namespace, "web")
    assert settled.agree
    assert settled.containers["app"].spec == 3000
