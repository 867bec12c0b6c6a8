"""What the reconciler remembers about individual pods between reconciles, owned by the
actuator: back-offs, the reports already acted on, and writes the watch has not shown yet.

A reconcile reads it as a value (`Recall`, with `app.core.decision.Remembered` inside) and
asks for changes through its plan; the lanes that write note what they sent and what the
API server answered. Nothing else enters it.

It lives only in memory: a restart or leader change starts empty. Infeasible is then
re-derived from the pod's own status; a quota-blocked pod re-issues one patch, is refused
again and backs off again, as the runbook describes.

Back-offs the kubelet (Infeasible) or a ResourceQuota (quota-denied) caused run their
whole window, whatever else changes. A refusal Headroom could not classify is tied to
the settings it was computed under: it holds only while the pod's node is under them (the
config edited or recreated, the node in another pool, lift it).
"""

import time
from collections.abc import Callable, Hashable, Iterable, Mapping, MutableMapping
from types import MappingProxyType
from typing import Any

from app.core.config import Settings
from app.core.decision import Backoff, Remembered
from reconciler.plan import Recall


class PodMemory:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._backoff: dict[str, Backoff] = {}
        # By topic, the marker of each pod's report acted on.
        self._reported: dict[str, dict[str, Hashable]] = {}
        self._resized: dict[str, tuple[int | None, int]] = {}
        self._annotated: dict[str, str] = {}
        # Pods whose status annotation someone else edited since Headroom last wrote it.
        self._edited: set[str] = set()

    def recall(self, queued: Mapping[str, str]) -> Recall:
        """A read-only view for one reconcile; ``queued``: annotations not yet written."""
        return Recall(
            remembered=Remembered(
                now=self._clock(),
                backoffs=MappingProxyType(self._backoff),
                reported=MappingProxyType(self._reported),
            ),
            resized=self.resized,
            queued=queued,
            annotated=MappingProxyType(self._annotated),
            edited=self._edited,
        )

    def back_off(self, uid: str, *, seconds: float, settings: Settings | None = None) -> None:
        """Leave the pod alone for ``seconds``; given ``settings``, only while they stay the
        pod's node's."""
        self._backoff[uid] = Backoff(until=self._clock() + seconds, settings=settings)

    def note_report(self, uid: str, topic: str, *, marker: Hashable) -> None:
        """`topic` was acted on for this pod with this `marker`.

        A kubelet report stays on the pod until its next resize (the marker is the pod's
        generation), and a bad annotation stays until someone edits it (the marker is the
        message); acting on it at every reconcile would turn one episode into many.
        """
        self._reported.setdefault(topic, {})[uid] = marker

    def note_resize(self, uid: str, *, generation: int | None, target_m: int) -> None:
        """Remember an accepted resize until the pod's watch event shows it."""
        self._resized[uid] = (generation, target_m)

    @property
    def resized(self) -> Mapping[str, tuple[int | None, int]]:
        return MappingProxyType(self._resized)

    def note_annotation(self, uid: str, text: str) -> None:
        """Remember an annotation about to be written, until the pod's watch event shows it."""
        self._annotated[uid] = text
        self._edited.discard(uid)

    def forget_annotation(self, uid: str, text: str) -> None:
        """The write did not happen."""
        if self._annotated.get(uid) == text:
            del self._annotated[uid]

    def annotation_seen(self, uid: str, text: str | None) -> bool:
        """The watch delivered the pod's annotation: whether it is Headroom's own write.

        Either way the cache now holds the pod's annotation: a write of Headroom's still
        waiting for its echo is no longer what the pod carries. Anything else is an edit,
        remembered until Headroom writes the annotation again.
        """
        ours = self._annotated.pop(uid, None) == text and text is not None
        if not ours:
            self._edited.add(uid)
        return ours

    def retain(self, uids: Iterable[str]) -> None:
        """Forget every pod not in `uids` (pods that left the cluster), and back-offs that
        ended."""
        live = set(uids)
        now = self._clock()
        ended = {uid for uid, entry in self._backoff.items() if entry.until <= now}
        by_uids: list[MutableMapping[str, Any]] = [*self._reported.values(), self._resized]
        for by_uid in (*by_uids, self._annotated):
            _keep(by_uid, live)
        _keep(self._backoff, live - ended)
        self._edited &= live


def _keep(by_uid: MutableMapping[str, Any], live: set[str]) -> None:
    for uid in [uid for uid in by_uid if uid not in live]:
        del by_uid[uid]
