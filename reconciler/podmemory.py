"""What the reconciler remembers about individual pods between reconciles.

Back-off windows and the reports already acted on live only in memory: a restart or
leader change starts empty. Infeasible is then re-derived from the pod's own status; a
quota-blocked pod re-issues one patch, is refused again and backs off again, as the
runbook describes.

A back-off has a cause. Those the kubelet (Infeasible) or a ResourceQuota (quota-denied)
caused run their whole window, whatever else changes. A refusal Headroom could not
classify is tied to the settings it was computed under: it ends as soon as the pod's
node is under other settings (the config edited or recreated, the node in another pool).
"""

import time
from collections.abc import Callable, Hashable, Iterable
from enum import StrEnum
from typing import Final, NamedTuple

from app.core.config import Settings
from app.core.decision import INFEASIBLE
from app.core.pods import PodInfo


class Cause(StrEnum):
    KUBELET = "kubelet"
    QUOTA = "quota"
    # A refusal no rule explains: a bug, or settings the API server's admission disagrees
    # with; other settings may not be refused.
    REJECTED = "rejected"


class _Backoff(NamedTuple):
    until: float
    cause: Cause
    # The settings a REJECTED back-off holds under; None for the other causes.
    settings: Settings | None


_NOT_REPORTED: Final = object()


class PodMemory:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._backoff: dict[str, _Backoff] = {}
        self._reported: dict[tuple[str, str], Hashable] = {}
        self._resized: dict[str, tuple[int | None, int]] = {}
        self._annotated: dict[str, str] = {}
        # Pods whose status annotation someone else edited since Headroom last wrote it.
        self._edited: set[str] = set()

    def back_off(
        self,
        uid: str,
        *,
        seconds: float,
        cause: Cause = Cause.KUBELET,
        settings: Settings | None = None,
    ) -> None:
        """Leave the pod alone for ``seconds``; a REJECTED back-off only while ``settings``
        stay the pod's node's."""
        self._backoff[uid] = _Backoff(self._clock() + seconds, cause, settings)

    def backoff_remaining(self, uid: str, *, settings: Settings | None = None) -> float:
        """Seconds left in the pod's back-off window; 0 when it is not backed off.

        Given the settings now in force on the pod's node, a REJECTED back-off computed
        under others has ended.
        """
        entry = self._backoff.get(uid)
        if entry is None:
            return 0.0
        remaining = entry.until - self._clock()
        lifted = (
            entry.cause is Cause.REJECTED and settings is not None and settings != entry.settings
        )
        if remaining <= 0 or lifted:
            del self._backoff[uid]
            return 0.0
        return remaining

    # `app.core.decision.Remembered`.

    def pod_backoff(self, pod: PodInfo, settings: Settings) -> float:
        return self.backoff_remaining(pod.uid, settings=settings)

    def infeasible_acknowledged(self, pod: PodInfo) -> bool:
        return self._reported.get((pod.uid, INFEASIBLE), _NOT_REPORTED) == pod.report_generation

    def first_report(self, uid: str, topic: str, *, marker: Hashable) -> bool:
        """True the first time `topic` is seen for this pod with this `marker`.

        A kubelet report stays on the pod until its next resize (the marker is the pod's
        generation), and a bad annotation stays until someone edits it (the marker is the
        message); acting on it at every reconcile would turn one episode into many.
        """
        key = (uid, topic)
        if key in self._reported and self._reported[key] == marker:
            return False
        self._reported[key] = marker
        return True

    def note_resize(self, uid: str, *, generation: int | None, target_m: int) -> None:
        """Remember an accepted resize until the pod's watch event shows it."""
        self._resized[uid] = (generation, target_m)

    def resize_unseen(self, uid: str, *, generation: int | None, target_m: int) -> bool:
        """Whether this exact resize was accepted and the cache has not caught up yet.

        An accepted resize bumps the pod's generation; until the watch delivers that, the
        cached pod still shows the old limit, and patching again would be a duplicate.
        """
        noted = self._resized.get(uid)
        if noted is None:
            return False
        if noted[0] != generation:
            del self._resized[uid]
            return False
        return noted[1] == target_m

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

    def annotation_edited(self, uid: str) -> bool:
        return uid in self._edited

    def current_annotation(self, uid: str, *, cached: str | None) -> str | None:
        """The pod's status annotation: our write the cache has not seen yet, or the cached one."""
        return self._annotated.get(uid, cached)

    def retain(self, uids: Iterable[str]) -> None:
        """Forget every pod not in `uids` (pods that left the cluster)."""
        live = set(uids)
        for key in [key for key in self._reported if key[0] not in live]:
            del self._reported[key]
        for by_uid in (self._backoff, self._resized, self._annotated):
            for uid in [uid for uid in by_uid if uid not in live]:
                del by_uid[uid]
        self._edited &= live
