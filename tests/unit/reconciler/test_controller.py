import asyncio
import gc
import itertools
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from app.io.budget import WriteBudget
from reconciler.main import build_controller
from reconciler.metrics import ReconcilerMetrics
from reconciler.requeue import CRASH_RETRY_SECONDS, UNAVAILABLE, requeue
from reconciler.workqueue import PROMPT_SPREAD_SECONDS
from reconciler.writer import Writer
from tests.unit.app import builders
from tests.unit.reconciler.fakes import FakeApi, FakeClock, FixedRandom, SentRequest


class Setup:
    def __init__(self) -> None:
        self.clock = FakeClock()
        self.api = FakeApi()
        self.leading = True
        self.budget = WriteBudget(rate=50.0, burst=100, clock=self.clock)
        self.controller = build_controller(
            writer=Writer(
                http=self.api,
                instance="test",
                wall_clock=lambda: datetime(2030, 1, 1, tzinfo=UTC),
            ),
            metrics=ReconcilerMetrics(),
            budgets=(self.budget, WriteBudget(rate=50.0, burst=100, clock=self.clock)),
            may_write=lambda: self.leading,
            clock=self.clock,
            rand=FixedRandom(1.0),
        )
        self.queue = self.controller.queue
        self.cache = self.controller.cache

    def due_in(self) -> float | None:
        due = self.queue.next_due()
        return None if due is None else due - self.clock.now

    def reconcile(self, node: str) -> None:
        """Reconciles the node once and lets the actuator finish every write it planned."""

        async def scenario() -> None:
            workers = asyncio.create_task(self.controller.actuator.run())
            self.controller.reconciler.reconcile(node)
            await self.controller.actuator.activity.settle()
            workers.cancel()
            await asyncio.gather(workers, return_exceptions=True)

        asyncio.run(scenario())


def test_pod_changes_are_debounced_by_the_configured_period() -> None:
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"debouncePeriod": "4s"}))
    setup.queue.done(setup.queue.pop_ready() or "")
    setup.cache.apply_pod("team-a/p", builders.pod_wire("p"))
    # FixedRandom(1.0) is the top of the ±50% jitter.
    assert setup.due_in() == pytest.approx(6.0)


def test_config_changes_are_prompt_and_retune_the_limiters() -> None:
    setup = Setup()
    setup.cache.apply_node("node-1", builders.node("node-1"))
    setup.cache.apply_config(
        "cluster",
        builders.headroom_config(
            spec={"rateLimits": {"perNodePatchesPerSecond": 3, "clientQPS": 7, "clientBurst": 9}}
        ),
    )
    assert setup.due_in() == pytest.approx(PROMPT_SPREAD_SECONDS)
    assert (setup.budget.rate, setup.budget.burst) == (7.0, 9)


def test_start_leading_spreads_every_node_over_the_debounce_period() -> None:
    setup = Setup()
    for name in ("n1", "n2", "n3"):
        setup.cache.apply_node(name, builders.node(name))
    setup.clock.advance(10)
    for _ in range(3):
        setup.queue.done(setup.queue.pop_ready() or "")
    setup.controller.start_leading()
    assert len(setup.queue) == 3
    assert setup.due_in() == pytest.approx(2.0)


def test_a_node_that_disappears_is_forgotten() -> None:
    setup = Setup()
    setup.cache.apply_node("n1", builders.node("n1"))
    setup.cache.apply_node("n1", None)
    assert setup.controller.reconciler.managed_nodes == 0


def run_worker(setup: Setup, node: str, reconcile: Callable[[str], float]) -> None:
    """Let the worker take `node` through `reconcile`; the fake clock never reaches the retry."""
    finished = asyncio.Event()

    def observed(name: str) -> float:
        try:
            return reconcile(name)
        finally:
            finished.set()

    setup.controller.reconciler.reconcile = observed  # type: ignore[method-assign]

    async def scenario() -> None:
        setup.queue.add(node)
        worker = asyncio.ensure_future(setup.controller.work())
        await asyncio.wait_for(finished.wait(), 2.0)
        # The worker puts the node back as soon as it resumes.
        await asyncio.sleep(0)
        setup.queue.shutdown()
        await asyncio.wait_for(worker, 2.0)

    asyncio.run(scenario())


def test_the_worker_requeues_a_node_that_raised() -> None:
    setup = Setup()

    def broken(node: str) -> float:
        raise RuntimeError(f"bug on {node}")

    run_worker(setup, "n1", broken)
    assert setup.due_in() == pytest.approx(CRASH_RETRY_SECONDS)


def test_the_worker_requeues_after_the_delay_the_reconcile_asks_for() -> None:
    setup = Setup()

    def backing_off(node: str) -> float:
        return 42.0

    run_worker(setup, "n1", backing_off)
    assert setup.due_in() == pytest.approx(42.0)


def test_losing_the_lease_drops_the_per_node_series() -> None:
    setup = Setup()
    setup.cache.apply_node("n1", builders.node("n1"))
    setup.cache.apply_namespace("team-a", builders.namespace("team-a"))
    setup.cache.apply_pod("team-a/p", builders.pod_wire("p", node="n1"))

    setup.reconcile("n1")
    assert setup.controller.reconciler.managed_pods == 1
    setup.controller.stop_leading()
    assert setup.controller.reconciler.managed_pods == 0


def test_config_status_is_written_once_per_change() -> None:
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    asyncio.run(setup.controller.status.write())
    asyncio.run(setup.controller.status.write())
    [write] = setup.api.writes(kind="status")
    assert write.method == "PATCH"
    assert write.path == "/apis/kube-headroom.dev/v1alpha1/headroomconfigs/cluster/status"
    assert write.content_type == "application/merge-patch+json"
    assert write.body is not None
    status = write.body["status"]
    assert status["observedGeneration"] == 1
    assert status["conditions"][0]["message"] == "enforcing; managing 0 pods on 0 nodes"
    # Once the watch shows the written status, nothing changes and nothing is written.
    setup.cache.apply_config(
        "cluster", {**builders.headroom_config(spec={"dryRun": False}), "status": status}
    )
    asyncio.run(setup.controller.status.write())
    assert len(setup.api.writes(kind="status")) == 1


@pytest.mark.parametrize(
    ("config", "leading"),
    [
        pytest.param(None, True, id="no-config"),
        pytest.param(builders.headroom_config(), False, id="not-leader"),
    ],
)
def test_config_status_is_not_written(config: dict[str, Any] | None, leading: bool) -> None:
    setup = Setup()
    setup.leading = leading
    setup.cache.apply_config("cluster", config)
    asyncio.run(setup.controller.status.write())
    assert setup.api.sent == []


def test_a_follower_takes_nodes_off_the_queue_without_reconciling() -> None:
    setup = Setup()
    setup.leading = False
    reconciled: list[str] = []

    def record(node: str) -> float:
        reconciled.append(node)
        return 1.0

    setup.controller.reconciler.reconcile = record  # type: ignore[method-assign]

    async def scenario() -> None:
        setup.queue.add("n1")
        worker = asyncio.ensure_future(setup.controller.work())
        for _ in range(5):
            await asyncio.sleep(0)
        setup.queue.shutdown()
        await asyncio.wait_for(worker, 2.0)

    asyncio.run(scenario())
    assert reconciled == []
    assert len(setup.queue) == 0


def test_an_edit_of_the_status_annotation_wakes_the_node_and_its_echo_does_not() -> None:
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    setup.cache.apply_node("n1", builders.node("n1"))
    setup.cache.apply_namespace("team-a", builders.namespace("team-a"))

    def with_annotation(text: str | None) -> dict[str, Any]:
        limited = [builders.container(cpu_limit="1")]
        return builders.pod("p", node="n1", containers=limited, status_annotation=text)

    setup.cache.apply_pod("team-a/p", builders.wire(with_annotation(None)))

    def echo(sent: SentRequest) -> None:
        # The API server's watch delivers Headroom's own annotation write.
        if sent.path.endswith("/pods/p") and sent.body is not None:
            text = sent.body["metadata"]["annotations"]["kube-headroom.dev/status"]
            echoed = builders.pod(
                "p",
                node="n1",
                containers=[builders.container(cpu_limit="1")],
                status_annotation=text,
            )
            setup.cache.apply_pod("team-a/p", builders.wire(echoed))

    setup.api.after_send = echo

    setup.clock.advance(100)
    while setup.queue.pop_ready() is not None:
        pass
    setup.queue.done("n1")
    setup.reconcile("n1")
    assert setup.api.writes(kind="annotation")
    assert "n1" not in setup.queue
    edited = builders.pod(
        "p", node="n1", containers=[builders.container(cpu_limit="1")], status_annotation="{}"
    )
    setup.cache.apply_pod("team-a/p", builders.wire(edited))
    assert "n1" in setup.queue


def test_nodes_that_come_and_go_leave_nothing_behind() -> None:
    """Everything kept per node (pace, failures, series, tallies, plans) is freed with it:
    a thousand nodes added, reconciled, failed once and removed cost no memory."""
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    setup.cache.apply_namespace("team-a", builders.namespace("team-a"))
    rounds = itertools.count()

    async def churn() -> None:
        # New names every round: state kept for a node that left would pile up.
        nodes = [f"churn-{next(rounds)}-{i:04d}" for i in range(1000)]
        workers = asyncio.create_task(setup.controller.actuator.run())
        for name in nodes:
            setup.cache.apply_node(name, builders.node(name))
            setup.cache.apply_pod(f"team-a/{name}-p", builders.pod_wire(f"{name}-p", node=name))
        setup.clock.advance(100)
        while (key := setup.queue.pop_ready()) is not None:
            setup.controller.reconciler.reconcile(key)
            setup.queue.done(key)
        await setup.controller.actuator.activity.settle()
        for name in nodes:
            requeue(setup.queue, name, UNAVAILABLE)
        for name in nodes:
            setup.cache.apply_pod(f"team-a/{name}-p", None)
            setup.cache.apply_node(name, None)
        setup.clock.advance(100)
        while (key := setup.queue.pop_ready()) is not None:
            setup.controller.reconciler.reconcile(key)
            setup.queue.done(key)
        setup.controller.retain_live_pods()
        setup.api.sent.clear()
        workers.cancel()
        await asyncio.gather(workers, return_exceptions=True)

    with asyncio.Runner() as runner:
        # Two rounds first: caches, interned strings and the tables of emptied dicts settle.
        runner.run(churn())
        runner.run(churn())
        gc.collect()
        tracemalloc.start()
        try:
            settled = tracemalloc.take_snapshot()
            for _ in range(3):
                runner.run(churn())
            gc.collect()
            stats = tracemalloc.take_snapshot().compare_to(settled, "filename")
        finally:
            tracemalloc.stop()
    # Counted in objects, not bytes: an emptied dict keeps its table, which is no leak, but
    # any state kept for the three thousand nodes that left is thousands of objects.
    left = sum(stat.count_diff for stat in stats)
    assert left < 1000, [str(stat) for stat in stats[:5]]
    assert setup.controller.reconciler.managed_nodes == 0


def test_a_resize_waits_for_bindings_still_landing_on_its_node() -> None:
    """A wave of bindings over a node resizes its pods once, to their final targets: a
    resize whose node has changes still settling waits for the reconcile they lead to."""
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    setup.cache.apply_namespace("team-a", builders.namespace("team-a"))
    setup.cache.apply_node("n1", builders.node("n1"))
    setup.cache.apply_pod("team-a/p", builders.pod_wire("p", node="n1"))

    async def wave() -> None:
        workers = asyncio.create_task(setup.controller.actuator.run())

        def reconcile_due() -> None:
            setup.clock.advance(10)
            while (key := setup.queue.pop_ready()) is not None:
                setup.controller.reconciler.reconcile(key)
                setup.queue.done(key)

        reconcile_due()
        # Before p's resize gets its turn, a neighbour binds: n1 is debouncing again.
        setup.cache.apply_pod(
            "team-a/n",
            builders.pod_wire("n", node="n1", containers=[builders.container(cpu_request="8")]),
        )
        for _ in range(20):
            await asyncio.sleep(0)
        assert setup.api.writes(kind="resize") == []
        reconcile_due()
        await setup.controller.actuator.activity.settle()
        workers.cancel()
        await asyncio.gather(workers, return_exceptions=True)

    asyncio.run(wave())
    resized = {r.path.split("/")[-2] for r in setup.api.writes(kind="resize")}
    assert resized == {"p", "n"}
    assert len(setup.api.writes(kind="resize")) == 2


def test_a_back_off_minutes_away_does_not_hold_back_the_nodes_explanations() -> None:
    """A pod left alone after an Infeasible report requeues its node for the back-off's end;
    its neighbours' resizes are explained now, not then."""
    setup = Setup()
    setup.cache.apply_config("cluster", builders.headroom_config(spec={"dryRun": False}))
    setup.cache.apply_namespace("team-a", builders.namespace("team-a"))
    setup.cache.apply_node("n1", builders.node("n1"))
    infeasible = builders.condition("PodResizePending", reason="Infeasible")
    setup.cache.apply_pod(
        "team-a/stuck", builders.pod_wire("stuck", node="n1", conditions=[infeasible])
    )
    setup.cache.apply_pod("team-a/p", builders.pod_wire("p", node="n1"))

    async def scenario() -> None:
        workers = asyncio.create_task(setup.controller.actuator.run())
        setup.clock.advance(10)
        assert setup.queue.pop_ready() == "n1"
        retry = setup.controller.reconciler.reconcile("n1")
        setup.queue.done("n1")
        assert retry is not None
        assert retry > 60
        setup.queue.add("n1", delay=retry)
        await setup.controller.actuator.activity.settle()
        workers.cancel()
        await asyncio.gather(workers, return_exceptions=True)

    asyncio.run(scenario())
    assert {r.path.split("/")[-2] for r in setup.api.writes(kind="resize")} == {"p"}
    assert {r.path.split("/")[-1] for r in setup.api.writes(kind="annotation")} == {"p"}
    assert [r.body["involvedObject"]["name"] for r in setup.api.writes(kind="event") if r.body] == [
        "stuck",
        "p",
    ]
