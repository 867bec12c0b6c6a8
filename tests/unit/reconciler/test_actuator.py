"""Writes planned by a reconcile, sent later: stop buttons, replaced plans, lanes, coalescing."""

import asyncio
from collections.abc import Callable
from dataclasses import replace

import pytest

from app.core.explain import Explanation
from app.io.budget import Lane
from tests.unit.app import builders
from tests.unit.app.builders import POD_B_EXPLANATION, container
from tests.unit.reconciler.world import World, reconciled_example, worked_example


def _dry_run(world: World) -> None:
    world.cache.apply_config(
        "cluster", builders.headroom_config(generation=2, spec={"dryRun": True})
    )


def _unlabel(world: World) -> None:
    world.cache.apply_namespace("team-a", builders.namespace("team-a", labels={}))


def _delete_config(world: World) -> None:
    world.cache.apply_config("cluster", None)


def _opt_out(world: World) -> None:
    for name in ("a", "b", "c"):
        world.add(
            name,
            labels={"kube-headroom.dev/mode": "unmanaged"},
            containers=[
                container(
                    cpu_request=world.cache.pods[f"team-a/{name}"]
                    .facts.containers[0]
                    .cpu_request_m.__str__()
                    + "m"
                )
            ],
        )


@pytest.mark.parametrize(
    "stop",
    [
        pytest.param(_dry_run, id="dry-run"),
        pytest.param(_unlabel, id="namespace-label-removed"),
        pytest.param(_delete_config, id="config-deleted"),
        pytest.param(_opt_out, id="pods-opted-out"),
    ],
)
def test_a_stop_observed_before_sending_calls_off_every_planned_write(
    stop: Callable[[World], None],
) -> None:
    world = World()
    worked_example(world)
    world.reconcile(before_sending=lambda: stop(world))
    assert world.api.sent == []
    assert len(world.api.skipped) == 3
    assert world.count("ok") == 0


def test_leadership_lapsing_before_sending_calls_everything_off() -> None:
    world = World()
    worked_example(world)

    def lapse() -> None:
        world.leading = False

    world.reconcile(before_sending=lapse)
    assert world.api.sent == []


def test_a_config_change_calls_off_resizes_computed_under_the_old_one() -> None:
    world = World()
    worked_example(world)
    world.reconcile(
        before_sending=lambda: world.cache.apply_config(
            "cluster",
            builders.headroom_config(generation=2, spec={"dryRun": False, "maxMultiplier": "2"}),
        )
    )
    assert world.api.writes(kind="resize") == []


def test_a_newer_plan_replaces_one_still_waiting() -> None:
    world = World()
    worked_example(world)

    def neighbour_arrives() -> None:
        world.add(
            "d",
            containers=[container(cpu_request="4")],
            labels={"kube-headroom.dev/mode": "unmanaged"},
        )
        world.reconciler.reconcile("node-1")

    world.reconcile(before_sending=neighbour_arrives)
    # One resize per pod, straight to the targets with the neighbour booked (slack 4).
    assert world.resizes() == {"a": "1500m", "b": "2500m", "c": "9"}
    assert len(world.api.writes(kind="resize")) == 3


def test_resizes_take_the_primary_lane_and_explanations_follow_on_the_secondary() -> None:
    world = reconciled_example()
    for kind, lane in (
        ("resize", Lane.PRIMARY),
        ("annotation", Lane.SECONDARY),
        ("event", Lane.SECONDARY),
    ):
        writes = world.api.writes(kind=kind)
        assert len(writes) == 3
        assert {write.lane for write in writes} == {lane}
    # Each pod's explanation is written only once its resize was applied.
    first_explanation = min(
        i for i, r in enumerate(world.api.sent) if not r.path.endswith("/resize")
    )
    assert first_explanation > min(
        i for i, r in enumerate(world.api.sent) if r.path.endswith("/a/resize")
    )


def _explanation(current_m: int, target_m: int) -> Explanation:
    return replace(POD_B_EXPLANATION, current_m=current_m, target_m=target_m)


def test_changes_not_yet_announced_are_announced_by_one_event_spanning_them() -> None:
    world = World()
    world.add("p", containers=[container(cpu_request="500m")])
    pod = world.cache.pods["team-a/p"]

    async def plan() -> None:
        # Both land before the explanation lane gets its turn.
        world.actuator.explanations.add(
            pod, adjusted=(500, _explanation(500, 1000)), annotation="first"
        )
        world.actuator.explanations.add(
            pod, adjusted=(1000, _explanation(1000, 2000)), annotation="second"
        )

    world.run(plan())
    assert world.events() == [
        ("p", "CPULimitAdjusted", "500m -> 2000m (node factor 2.00, slack 8/16 cores)")
    ]
    [annotation] = world.api.writes(kind="annotation")
    assert annotation.body == {"metadata": {"annotations": {"kube-headroom.dev/status": "second"}}}


def test_a_wave_settles_once_its_writes_are_sent_and_none_follow() -> None:
    world = World()
    worked_example(world)
    sent_when_settled: list[int] = []

    async def passing(seconds: float) -> None:
        """Let the writers run, then move the clock on."""
        for _ in range(50):
            await asyncio.sleep(0)
        world.clock.advance(seconds)
        await asyncio.sleep(0)

    async def wave() -> None:
        waiter = asyncio.create_task(world.actuator.activity.wave_settled(quiet=0.2))
        await passing(0.3)
        # Idle and no wave yet: nothing to wait for.
        assert not waiter.done()
        world.reconciler.reconcile("node-1")
        await passing(0.1)
        # A neighbour lands before the quiet time is up: the wave goes on.
        assert not waiter.done()
        world.add("d", containers=[container(cpu_request="4")])
        world.reconciler.reconcile("node-1")
        planned = world.clock.now
        while not waiter.done():
            await passing(0.05)
        assert world.clock.now - planned >= 0.2
        sent_when_settled.append(len(world.api.sent))

    world.run(wave())
    # Every write of both reconciles was out before it returned.
    assert sent_when_settled == [len(world.api.sent)]
    assert len(world.api.writes(kind="resize")) >= 4
