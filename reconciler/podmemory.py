"""What the reconciler remembers about individual pods between reconciles.

Back-off windows (after Infeasible or quota-denied) and the reports already acted on live
only in memory: a restart or leader change starts empty. Infeasible is then re-derived
from the pod's own status; a quota-blocked pod re-issues one patch, is refused again and
backs off again, as the runbook describes.
"""

import time
from collections.abc import Callable, Hashable, Iterable


class PodMemory:
    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._backoff_until: dict[str, float] = {}
        self._reported: dict[tuple[str, str], Hashable] = {}
        self._resized: dict[str, tuple[int | None, int]] = {}
        self._annotated: dict[str, str] = {}

    def back_off(self, uid: str, *, seconds: float) -> None:
        self._backoff_until[uid] = self._clock() + seconds

    def backoff_remaining(self, uid: str) -> float:
        """Seconds left in the pod's back-off window; 0 when it is not backed off."""
        until = self._backoff_until.get(uid)
        if until is None:
            return 0.0
        remaining = until - self._clock()
        if remaining <= 0:
            del self._backoff_until[uid]
            return 0.0
        return remaining

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

    def forget_annotation(self, uid: str, text: str) -> None:
        """The write did not happen."""
        if self._annotated.get(uid) == text:
            del self._annotated[uid]

    def annotation_seen(self, uid: str, text: str | None) -> bool:
        """The watch delivered the pod's annotation: whether it is Headroom's own write.

        Either way the cache now holds the pod's annotation: a write of Headroom's still
        waiting for its echo is no longer what the pod carries.
        """
        return self._annotated.pop(uid, None) == text and text is not None

    def current_annotation(self, uid: str, *, cached: str | None) -> str | None:
        """The pod's status annotation: our write the cache has not seen yet, or the cached one."""
        written = self._annotated.get(uid)
        return cached if written is None else written

    def retain(self, uids: Iterable[str]) -> None:
        """Forget every pod not in `uids` (pods that left the cluster)."""
        live = set(uids)
        for uid in [uid for uid in self._backoff_until if uid not in live]:
            del self._backoff_until[uid]
        for key in [key for key in self._reported if key[0] not in live]:
            del self._reported[key]
        for writes in (self._resized, self._annotated):
            for uid in [uid for uid in writes if uid not in live]:
                del writes[uid]
