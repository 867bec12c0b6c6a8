"""Keeping the HeadroomConfig's status current: promptly after the managed counts change,
and at least every `STATUS_INTERVAL_SECONDS` otherwise; only the leader writes it."""

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

from app.core.cluster import ClusterCache
from app.io.clock import Clock, wait
from app.io.http import Skipped, failure_of
from reconciler.config_status import Summary, desired_status, status_differs
from reconciler.writer import Writer, config_status_write

log = logging.getLogger(__name__)

# The status is rewritten promptly after the managed counts change, and at least this
# often otherwise (which also prunes memory of pods that left).
STATUS_INTERVAL_SECONDS: Final = 5.0
# Changes landing together are reported in one write.
STATUS_COALESCE_SECONDS: Final = 0.25


@dataclass(eq=False, kw_only=True, slots=True)
class ConfigStatus:
    """Writes the HeadroomConfig's status: prompt after a change, periodic otherwise."""

    cache: ClusterCache
    writer: Writer
    # The managed pods and nodes.
    counts: Callable[[], tuple[int, int]]
    may_write: Callable[[], bool]
    clock: Clock
    # The last status written, and whether another write is due.
    last: dict[str, object] | None = field(default=None, init=False)
    due_event: asyncio.Event = field(default_factory=asyncio.Event, init=False)

    def due(self) -> None:
        """Write the status soon."""
        self.due_event.set()

    async def run(self, *, each: Callable[[], None]) -> None:
        """Write the status whenever it is due, calling ``each`` before every write."""
        while True:
            await wait(self.clock, self.due_event, STATUS_INTERVAL_SECONDS)
            await asyncio.sleep(STATUS_COALESCE_SECONDS)
            self.due_event.clear()
            each()
            await self.write()

    async def write(self) -> None:
        config = self.cache.config
        if not config.present or not self.may_write():
            return
        managed_pods, managed_nodes = self.counts()
        summary = Summary(
            generation=config.generation,
            managed_pods=managed_pods,
            managed_nodes=managed_nodes,
            dry_run=config.settings.dry_run,
            invalid=config.invalid,
        )
        current = dict(config.status or {})
        desired = desired_status(summary, current=current, now=datetime.now(UTC))
        # The watch may not have echoed our last write yet.
        if not status_differs(desired, current) or desired == self.last:
            return
        try:
            failure = await failure_of(
                self.writer.send(config_status_write(desired), precondition=self.may_write)
            )
        except Skipped:
            return
        if failure is None:
            self.last = desired
        else:
            log.warning("config status not written: %s", failure)
