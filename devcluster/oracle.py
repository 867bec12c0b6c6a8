"""Which managed pods still need a resize, by the decision the reconciler is built on.

Tests and benchmarks ask it whether the cluster has converged. It reads the cluster
through the shared cache layer (`app.core.cluster`, fed by `app.io.reflector`) and decides
each node with `app.core.decision`, in a process of its own, so it sees the cluster as it
is within a watch round trip, without polling the API server and without looking inside
the reconciler. It judges the reconciler's execution (its queue, budgets, writes and
retries), not its policy: it decides with the same `decide_node`, so a wrong target
would look converged to it. The policy is judged on its own, by the unit tier's worked
examples (the design's) and property tests. It also notices a managed pod's limit being
removed, which Headroom must never do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from app.core.cluster import ClusterCache
from app.core.config import Settings
from app.core.decision import decide_node
from app.core.pods import PodInfo
from app.io.http import KubeHttp
from app.io.kubeconfig import async_api_client
from app.io.reflector import cache_reflectors

T = TypeVar("T")


class Oracle:
    """Which managed pods still need a patch. Only nodes that changed since the last
    question are recomputed, so asking often costs the measured processes little."""

    def __init__(self) -> None:
        self.cache = ClusterCache(listener=self, on_pod=self._pod_changed)
        self._dirty: set[str] = set()
        self._pending: dict[str, list[str]] = {}
        # Pods whose CPU limit was set and then disappeared.
        self.removed: set[str] = set()

    def _pod_changed(self, old: PodInfo | None, new: PodInfo | None) -> None:
        if old is not None and new is not None and old.facts.limit_m and not new.facts.limit_m:
            self.removed.add(new.key)

    # The cache's Listener.

    def node_dirty(self, node: str, *, prompt: bool) -> None:
        self._dirty.add(node)

    def node_removed(self, node: str) -> None:
        self._pending.pop(node, None)

    def settings_changed(self, settings: Settings) -> None:
        self._dirty.update(self.cache.node_names())

    def namespace_changed(self, namespace: str, *, enrolled: bool) -> None:
        self._dirty.update(self.cache.nodes_in_namespace(namespace))

    def annotation_changed(self, pod: PodInfo) -> None:
        """Annotations do not change what still needs a patch."""

    # Questions.

    def off_target(self) -> list[str]:
        """Managed pods whose limit is outside their target's deadband (or unset)."""
        for name in self._dirty:
            self._pending[name] = self._off_target_on(name)
        self._dirty.clear()
        return [key for keys in self._pending.values() for key in keys]

    def pending(self) -> int:
        return len(self.off_target())

    def managed_limits(self, namespace_prefix: str) -> dict[str, int]:
        return {
            key: pod.facts.limit_m
            for key, pod in self.cache.pods.items()
            if pod.namespace.startswith(namespace_prefix)
        }

    def _off_target_on(self, name: str) -> list[str]:
        view = self.cache.node_view(name)
        if view is None:
            return []
        # Remembering nothing: a pod whose kubelet reports Infeasible counts as backed off.
        decision = decide_node(view, self.cache.settings)
        return [r.pod.key for r in decision.result.pods if r.patch]


class BackgroundOracle:
    """An `Oracle` whose watches run on an event loop in a thread, for synchronous tests.

    Questions are answered on that loop, so they see a consistent cache.
    """

    def __init__(self, *, kubeconfig: Path) -> None:
        self.oracle = Oracle()
        self._kubeconfig = kubeconfig
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._tasks: list[asyncio.Task[None]] = []
        self._api: KubeHttp | None = None

    def __enter__(self) -> BackgroundOracle:
        self._thread.start()
        self._call(self._start())
        return self

    def __exit__(self, *exc: object) -> None:
        self._call(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    def synced(self) -> bool:
        return self._call(self._synced())

    def off_target(self) -> list[str]:
        return self._call(self._ask())

    def removed(self) -> set[str]:
        return set(self.oracle.removed)

    def _call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(timeout=60)

    async def _start(self) -> None:
        self._api = KubeHttp(await async_api_client(kubeconfig=str(self._kubeconfig)))
        self._reflectors = list(cache_reflectors(api=self._api, cache=self.oracle.cache).values())
        self._tasks = [asyncio.create_task(r.run()) for r in self._reflectors]

    async def _synced(self) -> bool:
        return all(r.synced.is_set() for r in self._reflectors)

    async def _ask(self) -> list[str]:
        return self.oracle.off_target()

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._api is not None:
            await self._api.close()
        # A closed TLS transport releases its socket on later turns of the loop (its shutdown
        # handshake): give it those turns, generously on a loaded machine, before the loop
        # stops, or the sockets are left to the garbage collector.
        await asyncio.sleep(0.5)
