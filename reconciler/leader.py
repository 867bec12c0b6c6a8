"""Leader election on a coordination.k8s.io Lease, on the event loop.

The client ships `kubernetes.leaderelection` (thread-based, synchronous) and
`kubernetes.aio.leaderelection`. Neither fits: the async one measures lease expiry with
the wall clock, writes renew times as naive local time suffixed with "Z" (wrong on any
host not in UTC), never releases the lease on shutdown (so a rolling update waits a full
lease duration), and exposes no "am I still leader" check that turns false the moment the
renew deadline passes. This elector does the client-go algorithm with a monotonic clock,
optimistic concurrency on the Lease's resourceVersion, and release on shutdown.

The same Lease says the reconciler is live: the webhook seeds birth limits only while a
live reconciler holds it (`app.core.lease`). A reconciler started without leader election
holds it too, as the one replica (`ElectionConfig.exclusive` false): it takes the Lease
at once whoever held it, and its writes do not wait on it.

`is_leader` is what gates every write: it is false as soon as the renew deadline passes
without a successful renewal, even if the renewal loop itself is stuck, so a replica that
loses the lease stops writing at once, before another replica can acquire it
(renew deadline < lease duration). A renewal that succeeds only after the deadline (the
API server paused, then answered) still counts as losing the lease: writes were refused
in between, so leading starts over and `on_started` resyncs every node.
"""

import asyncio
import logging
import math
import random
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from app.core.apipaths import LEASES
from app.core.labels import LEASE_NAME
from app.io.http import ApiUnavailable, Request, Transport, failure_of

log = logging.getLogger(__name__)

_NOT_FOUND = 404
# client-go's jitter factor for a follower's retries.
_RETRY_JITTER = 1.2


@dataclass(frozen=True, slots=True)
class ElectionConfig:
    namespace: str
    identity: str
    name: str = LEASE_NAME
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    # Wait for another holder's Lease to expire before taking it (leader election);
    # false for the one replica of a reconciler that does not elect.
    exclusive: bool = True


def default_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def micro_time(moment: datetime) -> str:
    """A metav1.MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    def __init__(
        self,
        *,
        api: Transport,
        config: ElectionConfig,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        rand: random.Random | None = None,
    ) -> None:
        self._api = api
        self._config = config
        self._clock = clock
        self._wall_clock = wall_clock
        self._rand = rand if rand is not None else random.Random()  # noqa: S311 - jitter, not crypto
        self._leading = False
        self._renewed_at = float("-inf")
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = float("-inf")
        self._lease: dict[str, Any] | None = None
        self._waiting_for: str | None = None

    @property
    def identity(self) -> str:
        return self._config.identity

    @property
    def is_leader(self) -> bool:
        return self._leading and self._clock() < self._renewed_at + self._config.renew_deadline

    @property
    def _lease_path(self) -> str:
        return LEASES.path(namespace=self._config.namespace, name=self._config.name)

    async def run(self, *, on_started: Callable[[], None], on_stopped: Callable[[], None]) -> None:
        """Campaign forever; `on_started` runs on winning the lease, `on_stopped` on losing it."""
        while True:
            await self._acquire()
            self._leading = True
            log.info(
                "became leader" if self._config.exclusive else "holding the lease",
                extra={"lease": self._config.name, "identity": self.identity},
            )
            on_started()
            await self._renew_until_lost()
            self._leading = False
            log.warning("lost leadership", extra={"lease": self._config.name})
            on_stopped()

    async def release(self) -> None:
        """Give the lease up so another replica takes over without waiting for expiry."""
        if not self._leading or self._lease is None:
            return
        self._leading = False
        now = micro_time(self._wall_clock())
        spec = {k: v for k, v in (self._lease.get("spec") or {}).items() if k != "holderIdentity"}
        spec.update({"leaseDurationSeconds": 1, "acquireTime": now, "renewTime": now})
        lease = {**self._lease, "spec": spec}
        failure = await failure_of(self._api.request(Request("PUT", self._lease_path, lease)))
        if failure is None:
            log.info("released the lease", extra={"lease": self._config.name})
        else:
            log.warning("could not release the lease: %s", failure)

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew(limit=self._config.renew_deadline):
                self._waiting_for = None
                return
            await asyncio.sleep(
                self._config.retry_period * (1 + self._rand.random() * _RETRY_JITTER)
            )

    async def _renew_until_lost(self) -> None:
        retry = self._config.retry_period
        while True:
            deadline = self._renewed_at + self._config.renew_deadline
            # Every retry period; at once when a slow answer left less than that to spare.
            await asyncio.sleep(max(0.0, min(retry, deadline - self._clock() - retry)))
            while True:
                remaining = deadline - self._clock()
                renewed = remaining > 0 and await self._try_acquire_or_renew(limit=remaining)
                if self._clock() >= deadline:
                    # Writes stopped at the deadline; a renewal that arrives later still
                    # means a pause, so leading starts over (and resyncs).
                    return
                if renewed:
                    break
                await asyncio.sleep(min(retry, deadline - self._clock()))

    async def _try_acquire_or_renew(self, *, limit: float) -> bool:
        started = self._clock()
        now = micro_time(self._wall_clock())
        try:
            async with asyncio.timeout(limit):
                return await self._attempt(started=started, now=now)
        except ApiUnavailable as exc:
            log.warning("lease request failed: %s", exc)
        except TimeoutError:
            log.warning("lease request timed out after %.1fs", limit)
        return False

    async def _attempt(self, *, started: float, now: str) -> bool:
        current = await self._api.request(Request("GET", self._lease_path))
        if current.code == _NOT_FOUND:
            body = {
                "apiVersion": LEASES.api_version,
                "kind": "Lease",
                "metadata": {"name": self._config.name, "namespace": self._config.namespace},
                "spec": self._spec(now=now, acquire_time=now, transitions=0),
            }
            collection = LEASES.path(namespace=self._config.namespace)
            created = await self._api.request(Request("POST", collection, body))
            return self._accept(created.json() if created.ok else None, started=started)
        if not current.ok:
            log.warning("cannot read the lease: %s", current.message)
            return False
        lease = current.json()
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        record = _record(spec)
        if record != self._observed:
            self._observed = record
            self._observed_at = started
        duration = spec.get("leaseDurationSeconds") or self._config.lease_duration
        held_by_another = holder and holder != self.identity and self._config.exclusive
        if held_by_another and self._observed_at + duration > started:
            self._note_waiting(holder, expires_in=self._observed_at + duration - started)
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        acquire_time = spec.get("acquireTime") or now
        if holder != self.identity:
            # The lease changes hands.
            acquire_time, transitions = now, transitions + 1
        new_spec = self._spec(now=now, acquire_time=acquire_time, transitions=transitions)
        updated = await self._api.request(
            Request("PUT", self._lease_path, {**lease, "spec": new_spec})
        )
        return self._accept(updated.json() if updated.ok else None, started=started)

    def _note_waiting(self, holder: str, *, expires_in: float) -> None:
        if holder == self._waiting_for:
            return
        self._waiting_for = holder
        log.info(
            "waiting for the lease held by %s; it expires in %.0fs unless renewed",
            holder,
            expires_in,
            extra={"lease": self._config.name, "holder": holder},
        )

    def _spec(self, *, now: str, acquire_time: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, math.ceil(self._config.lease_duration)),
            "acquireTime": acquire_time,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def _accept(self, lease: dict[str, Any] | None, *, started: float) -> bool:
        if lease is None:
            return False
        self._lease = lease
        # Measured from before the request was sent: the lease may have been granted at
        # any point after that.
        self._renewed_at = started
        self._observed = _record(lease.get("spec") or {})
        self._observed_at = started
        return True


def _record(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    """What identifies one renewal of a lease: a change means its holder is alive."""
    return (
        spec.get("holderIdentity") or "",
        spec.get("renewTime"),
        spec.get("acquireTime"),
        spec.get("leaseTransitions"),
    )
