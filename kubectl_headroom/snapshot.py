"""What ``kubectl headroom simulate`` reads: the cluster, live or saved to a file.

A snapshot keeps, of every object, only the fields Headroom's decisions read (and pod
labels, for ``-l``), so a 150,000-pod cluster saves to tens of megabytes, and a saved one
simulates offline (in CI, or on a laptop) exactly like the live cluster it came from.
Files are JSON, gzip-compressed when the name ends in ``.gz``.
"""

import gzip
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
import orjson

from app.core.labels import STATUS_ANNOTATION
from app.core.pods import pod_wire

Obj = Mapping[str, Any]
KIND: Final = "HeadroomSnapshot"
FORMAT_VERSION: Final = 1
# Conditions the reconciler reads from a pod's status.
_RESIZE_CONDITIONS: Final = frozenset({"PodResizePending", "PodResizeInProgress"})


class SnapshotError(ValueError):
    """A snapshot file that cannot be read; the message says which file and why."""


@dataclass(frozen=True)
class Snapshot:
    server_version: str
    nodes: Sequence[Obj]
    namespaces: Sequence[Obj]
    # Bound pods only: an unbound pod books nothing on any node.
    pods: Sequence[Obj]
    limit_ranges: Sequence[Obj]
    quotas: Sequence[Obj]
    # None when the VerticalPodAutoscaler API is not served.
    vpas: Sequence[Obj] | None
    config: Obj | None
    # Their controllers, which say which VPA targets a pod (app.core.owners); a snapshot
    # saved before they were kept has none.
    replica_sets: Sequence[Obj] = ()
    jobs: Sequence[Obj] = ()

    def as_document(self) -> dict[str, Any]:
        return {
            "kind": KIND,
            "version": FORMAT_VERSION,
            "serverVersion": self.server_version,
            "config": self.config,
            "nodes": list(self.nodes),
            "namespaces": list(self.namespaces),
            "pods": list(self.pods),
            "limitRanges": list(self.limit_ranges),
            "resourceQuotas": list(self.quotas),
            "verticalPodAutoscalers": None if self.vpas is None else list(self.vpas),
            "replicaSets": list(self.replica_sets),
            "jobs": list(self.jobs),
        }


def save(snapshot: Snapshot, path: Path) -> None:
    data = orjson.dumps(snapshot.as_document())
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=6)
    path.write_bytes(data)


def load(path: Path) -> Snapshot:
    try:
        data = path.read_bytes()
        if path.suffix == ".gz":
            data = gzip.decompress(data)
        document = orjson.loads(data)
    except (OSError, EOFError, gzip.BadGzipFile, orjson.JSONDecodeError) as err:
        raise SnapshotError(f"cannot read snapshot {path}: {err}") from err
    if not isinstance(document, dict) or document.get("kind") != KIND:
        raise SnapshotError(
            f"{path} is not a Headroom snapshot (write one with kubectl headroom simulate --save)"
        )
    if document.get("version") != FORMAT_VERSION:
        raise SnapshotError(
            f"{path} is snapshot format {document.get('version')!r}; this plugin reads "
            f"format {FORMAT_VERSION}: save it again with this version"
        )
    try:
        return Snapshot(
            server_version=str(document["serverVersion"]),
            nodes=_list(document, "nodes"),
            namespaces=_list(document, "namespaces"),
            pods=_list(document, "pods"),
            limit_ranges=_list(document, "limitRanges"),
            quotas=_list(document, "resourceQuotas"),
            vpas=None
            if document.get("verticalPodAutoscalers") is None
            else _list(document, "verticalPodAutoscalers"),
            config=document.get("config"),
            replica_sets=_list(document, "replicaSets") if "replicaSets" in document else (),
            jobs=_list(document, "jobs") if "jobs" in document else (),
        )
    except (KeyError, TypeError) as err:
        raise SnapshotError(f"{path} is an incomplete snapshot: missing {err}") from err


def _list(document: Mapping[str, Any], key: str) -> list[Obj]:
    value = document[key]
    if not isinstance(value, list):
        raise TypeError(key)
    return value


def _pick(obj: Obj, *keys: str) -> dict[str, Any]:
    return {key: obj[key] for key in keys if obj.get(key) is not None}


def strip_pod(obj: Obj) -> Obj:
    """What ``app.core.pods`` decodes of a pod (its schema, ``PodWire``), plus its labels
    for ``-l``: but Headroom's own status annotation, which no decision reads, and of its
    status conditions only the resize ones."""
    stripped: dict[str, Any] = msgspec.to_builtins(pod_wire(obj))
    metadata = stripped.setdefault("metadata", {})
    annotations = metadata.pop("annotations", {})
    annotations.pop(STATUS_ANNOTATION, None)
    if annotations:
        metadata["annotations"] = annotations
    labels = (obj.get("metadata") or {}).get("labels")
    if labels:
        metadata["labels"] = dict(labels)
    status = stripped.get("status") or {}
    conditions = [c for c in status.pop("conditions", ()) if c.get("type") in _RESIZE_CONDITIONS]
    if conditions:
        status["conditions"] = conditions
    return stripped


def strip_node(obj: Obj) -> Obj:
    status = obj.get("status") or {}
    node_info = _pick(status.get("nodeInfo") or {}, "kubeletVersion", "operatingSystem")
    stripped_status = _pick(status, "declaredFeatures")
    cpu = (status.get("allocatable") or {}).get("cpu")
    if cpu is not None:
        stripped_status["allocatable"] = {"cpu": cpu}
    if node_info:
        stripped_status["nodeInfo"] = node_info
    return {
        "metadata": _pick(obj.get("metadata") or {}, "name", "labels"),
        "status": stripped_status,
    }


def strip_namespace(obj: Obj) -> Obj:
    return {"metadata": _pick(obj.get("metadata") or {}, "name", "labels")}


def strip_quota(obj: Obj) -> Obj:
    return {
        "metadata": _pick(obj.get("metadata") or {}, "name", "namespace"),
        "spec": _pick(obj.get("spec") or {}, "hard"),
        "status": _pick(obj.get("status") or {}, "hard", "used"),
    }


def strip_limit_range(obj: Obj) -> Obj:
    return {
        "metadata": _pick(obj.get("metadata") or {}, "name", "namespace"),
        "spec": obj.get("spec") or {},
    }


def strip_controlled(obj: Obj) -> Obj:
    """A ReplicaSet or Job: its name and its controller alone."""
    metadata = obj.get("metadata") or {}
    kept = _pick(metadata, "name", "namespace")
    controllers = [ref for ref in _owner_refs(metadata) if ref.get("controller") is True]
    if controllers:
        kept["ownerReferences"] = controllers
    return {"metadata": kept}


def _owner_refs(metadata: Obj) -> list[dict[str, Any]]:
    return [
        _pick(ref, "apiVersion", "kind", "name", "controller")
        for ref in metadata.get("ownerReferences") or ()
    ]
