import asyncio
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from app.io.http import ApiResponse, ApiUnavailable, Request
from reconciler.leader import ElectionConfig, LeaderElector, micro_time
from tests.unit.reconciler.fakes import FakeClock

LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-headroom-system/leases"


class LeaseStore:
    """The API server's behaviour for one Lease: create once, update only at the current version."""

    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.unreachable = False
        # The next request is answered only after this many seconds (a paused server).
        self.stall = 0.0

    async def request(self, request: Request) -> ApiResponse:
        method, path, body = request.method, request.path, request.body
        if self.unreachable:
            raise ApiUnavailable("connection refused")
        if self.stall:
            stall, self.stall = self.stall, 0.0
            await asyncio.sleep(stall)
        if method == "GET":
            return self._answer(200) if self.lease else ApiResponse(code=404, body=b"{}")
        assert body is not None
        if method == "POST":
            assert path == LEASES
            return self._store(body, 201) if self.lease is None else ApiResponse(409, b"{}")
        assert method == "PUT"
        assert path == f"{LEASES}/kube-headroom-reconciler"
        sent_version = body["metadata"].get("resourceVersion")
        if self.lease is None or sent_version != str(self.version):
            return ApiResponse(code=409, body=b"{}")
        return self._store(body, 200)

    def _store(self, body: Mapping[str, Any], code: int) -> ApiResponse:
        self.version += 1
        self.lease = {
            **body,
            "metadata": {**body["metadata"], "resourceVersion": str(self.version)},
        }
        return self._answer(code)

    def _answer(self, code: int) -> ApiResponse:
        return ApiResponse(code=code, body=orjson.dumps(self.lease))

    @property
    def spec(self) -> dict[str, Any]:
        assert self.lease is not None
        spec: dict[str, Any] = self.lease["spec"]
        return spec


def config(identity: str, *, lease_duration: float = 0.6, exclusive: bool = True) -> ElectionConfig:
    return ElectionConfig(
        namespace="kube-headroom-system",
        identity=identity,
        lease_duration=lease_duration,
        renew_deadline=0.4,
        retry_period=0.02,
        exclusive=exclusive,
    )


class Candidate:
    def __init__(self, store: LeaseStore, identity: str, **kwargs: Any) -> None:
        self.elector = LeaderElector(api=store, config=config(identity), **kwargs)
        self.started = asyncio.Event()
        self.stopped = asyncio.Event()
        self.starts = 0
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.ensure_future(
            self.elector.run(on_started=self._on_started, on_stopped=self.stopped.set)
        )

    def _on_started(self) -> None:
        self.starts += 1
        self.started.set()

    async def crash(self) -> None:
        """Stop without releasing, like a killed process."""
        assert self.task is not None
        self.task.cancel()
        await asyncio.gather(self.task, return_exceptions=True)


def test_micro_time_is_utc_with_microseconds() -> None:
    moment = datetime(2030, 1, 2, 3, 4, 5, 6, tzinfo=UTC)
    assert micro_time(moment) == "2030-01-02T03:04:05.000006Z"


def test_a_sole_candidate_creates_the_lease_and_leads() -> None:
    store = LeaseStore()

    async def scenario() -> None:
        candidate = Candidate(store, "a")
        candidate.start()
        await asyncio.wait_for(candidate.started.wait(), 2.0)
        assert candidate.elector.is_leader
        await asyncio.sleep(0.1)
        await candidate.crash()

    asyncio.run(scenario())
    assert store.spec["holderIdentity"] == "a"
    assert store.spec["leaseDurationSeconds"] == 1
    assert store.spec["leaseTransitions"] == 0
    # Renewals moved the version on without changing the acquire time.
    assert store.version > 1
    assert store.spec["renewTime"] >= store.spec["acquireTime"]


async def _seconds_until_it_leads(candidate: Candidate, *, within: float) -> float:
    """How long from now the candidate takes to start leading; it crashes once it does."""
    loop = asyncio.get_running_loop()
    since = loop.time()
    await asyncio.wait_for(candidate.started.wait(), within)
    waited = loop.time() - since
    await candidate.crash()
    return waited


def test_a_follower_waits_for_expiry_then_takes_over() -> None:
    store = LeaseStore()

    async def scenario() -> float:
        first, second = Candidate(store, "a"), Candidate(store, "b")
        first.start()
        await asyncio.wait_for(first.started.wait(), 2.0)
        second.start()
        await asyncio.sleep(0.3)
        assert not second.started.is_set()
        assert not second.elector.is_leader
        await first.crash()
        return await _seconds_until_it_leads(second, within=3.0)

    waited = asyncio.run(scenario())
    # The follower honours the lease's own duration (whole seconds) from when it saw it change.
    assert waited >= 0.5
    assert store.spec["holderIdentity"] == "b"
    assert store.spec["leaseTransitions"] == 1


def test_a_reconciler_that_does_not_elect_holds_the_lease_at_once() -> None:
    store = LeaseStore()

    async def scenario() -> None:
        # A leader that crashed a moment ago: its Lease has not expired yet.
        crashed = Candidate(store, "a")
        crashed.elector = LeaderElector(api=store, config=config("a", lease_duration=30.0))
        crashed.start()
        await asyncio.wait_for(crashed.started.wait(), 2.0)
        await crashed.crash()
        sole = Candidate(store, "b")
        sole.elector = LeaderElector(api=store, config=config("b", exclusive=False))
        sole.start()
        await asyncio.wait_for(sole.started.wait(), 0.2)
        await sole.elector.release()

    asyncio.run(scenario())
    # Released on the way out, so the webhook sees no live reconciler at once.
    assert "holderIdentity" not in store.spec
    assert store.spec["leaseDurationSeconds"] == 1


def test_release_hands_over_without_waiting_for_expiry() -> None:
    store = LeaseStore()

    async def scenario() -> float:
        first = Candidate(store, "a")
        second = Candidate(store, "b")
        second.elector = LeaderElector(api=store, config=config("b", lease_duration=30.0))
        first.start()
        await asyncio.wait_for(first.started.wait(), 2.0)
        second.start()
        await asyncio.sleep(0.1)
        await first.crash()
        await first.elector.release()
        assert not first.elector.is_leader
        return await _seconds_until_it_leads(second, within=2.0)

    assert asyncio.run(scenario()) < 1.0
    assert store.spec["holderIdentity"] == "b"


def test_leadership_ends_the_moment_the_renew_deadline_passes() -> None:
    store = LeaseStore()
    clock = FakeClock()

    async def scenario() -> None:
        candidate = Candidate(store, "a", clock=clock)
        candidate.start()
        await asyncio.wait_for(candidate.started.wait(), 2.0)
        store.unreachable = True
        clock.advance(0.39)
        before_deadline = candidate.elector.is_leader
        clock.advance(0.02)
        # No await in between: the gate closes without the renewal loop running.
        after_deadline = candidate.elector.is_leader
        assert (before_deadline, after_deadline) == (True, False)
        await asyncio.wait_for(candidate.stopped.wait(), 2.0)
        await candidate.crash()

    asyncio.run(scenario())


def test_release_without_leadership_sends_nothing() -> None:
    store = LeaseStore()
    elector = LeaderElector(api=store, config=config("a"))
    asyncio.run(elector.release())
    assert store.lease is None


def test_a_renewal_answered_after_the_deadline_restarts_leading() -> None:
    """The API server paused past the renew deadline, then answered: writes were refused
    in between, so leadership is given up and taken again, and `on_started` (the resync)
    runs a second time."""
    store = LeaseStore()

    async def scenario() -> tuple[int, bool]:
        candidate = Candidate(store, "a")
        candidate.start()
        await asyncio.wait_for(candidate.started.wait(), 2.0)
        candidate.started.clear()
        store.stall = 0.6
        await asyncio.wait_for(candidate.stopped.wait(), 2.0)
        await asyncio.wait_for(candidate.started.wait(), 2.0)
        leading = candidate.elector.is_leader
        await candidate.crash()
        return candidate.starts, leading

    assert asyncio.run(scenario()) == (2, True)
    assert store.spec["holderIdentity"] == "a"


def test_a_follower_says_whose_lease_it_is_waiting_for(caplog: pytest.LogCaptureFixture) -> None:
    store = LeaseStore()

    async def scenario() -> None:
        leader = Candidate(store, "a")
        leader.start()
        await asyncio.wait_for(leader.started.wait(), 2.0)
        follower = Candidate(store, "b")
        follower.start()
        await asyncio.sleep(0.2)
        await follower.crash()
        await leader.crash()

    with caplog.at_level("INFO", logger="reconciler.leader"):
        asyncio.run(scenario())
    waiting = [r.getMessage() for r in caplog.records if "waiting for the lease" in r.getMessage()]
    assert len(waiting) == 1
    assert waiting[0].startswith("waiting for the lease held by a; it expires in")
