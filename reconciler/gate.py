"""The last check before every write: is this write still wanted, right now?

A write is planned during a node's reconcile and sent later, once the rate limiters let
it through. The stop buttons (`dryRun: true`, a node pool's `dryRun: true`, a
namespace's label removed, the config deleted, a pod's opt-out label) and leadership are
therefore checked again against the cache, which the watches keep current, immediately
before each request is sent: a write planned before a stop never goes out after the stop
has been observed.
"""

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from app.core.cluster import ClusterCache, target_view
from app.core.config import Settings, settings_for_node
from app.core.decision import pod_gate
from app.core.pods import PodInfo, excluding
from app.core.policy import ContainerLimit
from reconciler.activity import Activity
from reconciler.writer import Writer


class Blocked(StrEnum):
    """Why a planned write is not sent (logged)."""

    NOT_LEADING = "not leading"
    INVALID_CONFIG = "config invalid"
    CONFIG_CHANGED = "config changed"
    DRY_RUN = "dry-run"
    POD_GONE = "pod gone"
    POD_CHANGED = "pod changed"
    AT_TARGET = "already at target"


@dataclass(frozen=True, kw_only=True, slots=True)
class WriteGate:
    """Checks a planned write against the cache right before it is sent."""

    cache: ClusterCache
    # Leading: only the leader writes.
    may_write: Callable[[], bool]

    def bookings_moved(self, plan_node: str, bookings: int) -> bool:
        """Whether the node's pods changed what targets depend on since a plan counted
        ``bookings``."""
        return self.cache.bookings(plan_node) != bookings

    def dry_run_now(self, node: str) -> bool:
        return self._node_settings(node).dry_run

    def _node_settings(self, node_name: str) -> Settings:
        """The settings in force on a node now: its pool's overrides applied."""
        settings = self.cache.config.settings
        node = self.cache.nodes.get(node_name)
        return settings if node is None else settings_for_node(settings, node.labels)[0]

    def resize_blocked(
        self,
        planned: PodInfo,
        *,
        settings: Settings,
        limits: tuple[ContainerLimit, ...],
        target_m: int,
    ) -> str | None:
        """Why a resize of `planned` to `limits` (`target_m` for a pod-level limit),
        computed under `settings`, must not be sent, or None.

        Beyond the explanation's checks, the config must be the one the target was
        computed with and enforcing, and the pod unchanged in anything its target depends
        on. Its current limits may have moved (the watch delivering an earlier resize):
        the target still holds, and is sent unless the pod already has it.
        """
        reason = self.explanation_blocked(planned)
        if reason is not None:
            return reason
        current = self._node_settings(planned.node_name)
        if current.dry_run:
            return Blocked.DRY_RUN
        if current != settings:
            return Blocked.CONFIG_CHANGED
        whole = self.cache.pods.get(planned.key)
        if whole is None:
            return Blocked.POD_CHANGED
        cached = excluding(whole, settings.excluded_containers)
        # The excluded containers' limits are named as they were planned, to keep them:
        # one that moved since would be set back.
        if target_view(cached) != target_view(planned) or _kept(cached) != _kept(planned):
            return Blocked.POD_CHANGED
        if cached.facts.pod_resources is not None:
            return Blocked.AT_TARGET if cached.facts.limit_m == target_m else None
        applied = {(c.name, c.sidecar): c.cpu_limit_m for c in cached.facts.cpu_containers}
        if all(applied.get((c.name, c.sidecar)) == c.limit_m for c in limits):
            return Blocked.AT_TARGET
        return None

    def explanation_blocked(self, planned: PodInfo) -> str | None:
        """Why no write about this pod may be sent, or None.

        Leading, a valid config, the pod still there (same uid) and still managed: its
        namespace enrolled under the current config, not opted out, every other gate open
        (the gates of a node's decision, `app.core.decision.pod_gate`).
        """
        if not self.may_write():
            return Blocked.NOT_LEADING
        config = self.cache.config
        if config.invalid is not None:
            return Blocked.INVALID_CONFIG
        cached = self.cache.pods.get(planned.key)
        if cached is None or cached.uid != planned.uid:
            return Blocked.POD_GONE
        reason = pod_gate(
            config.settings,
            excluding(cached, config.settings.excluded_containers),
            node=self.cache.nodes.get(cached.node_name),
            lookups=self.cache,
        )
        return None if reason is None else str(reason)


@dataclass(frozen=True, slots=True)
class Outlet:
    """What both writing lanes send through: the writer, the gate each write passes right
    before it goes out, and the activity they report their backlog to."""

    writer: Writer
    gate: WriteGate
    activity: Activity


def _kept(pod: PodInfo) -> list[tuple[str, int | None]]:
    return [(c.name, c.cpu_limit_m) for c in pod.facts.excluded]
