"""Snapshots for the simulate tests, built from the shared object builders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from app.core.views import vpa_view
from kubectl_headroom.snapshot import (
    Snapshot,
    strip_controlled,
    strip_limit_range,
    strip_namespace,
    strip_node,
    strip_pod,
    strip_quota,
)
from tests.unit.app import builders as b

Obj = dict[str, Any]


def snapshot(
    *,
    pods: Sequence[Obj] = (),
    nodes: Sequence[Obj] | None = None,
    namespaces: Sequence[Obj] | None = None,
    spec: Mapping[str, Any] | None = None,
    limit_ranges: Sequence[Obj] = (),
    quotas: Sequence[Obj] = (),
    vpas: Sequence[Obj] | None = None,
    replica_sets: Sequence[Obj] = (),
    jobs: Sequence[Obj] = (),
) -> Snapshot:
    """A cluster of the given objects, stripped as a live read strips them.

    By default: one 16-core node-1, namespaces team-a (enrolled) and team-b (not), and a
    HeadroomConfig that enforces.
    """
    return Snapshot(
        server_version="v1.37.2",
        nodes=[strip_node(n) for n in (nodes if nodes is not None else [b.node("node-1")])],
        namespaces=[
            strip_namespace(ns)
            for ns in (
                namespaces
                if namespaces is not None
                else [b.namespace("team-a"), b.namespace("team-b", labels={})]
            )
        ],
        pods=[strip_pod(p) for p in pods],
        limit_ranges=[strip_limit_range(r) for r in limit_ranges],
        quotas=[strip_quota(q) for q in quotas],
        vpas=None if vpas is None else [vpa_view(v) for v in vpas],
        config=b.headroom_config(spec=dict(spec) if spec is not None else {"dryRun": False}),
        replica_sets=[strip_controlled(r) for r in replica_sets],
        jobs=[strip_controlled(j) for j in jobs],
    )


def cpu_pod(name: str, cpu: str, *, namespace: str = "team-a", **overrides: Any) -> Obj:
    containers = overrides.pop("containers", None) or [
        b.container(cpu_request=cpu, cpu_limit=overrides.pop("limit", None))
    ]
    return b.pod(name, namespace=namespace, containers=containers, **overrides)
