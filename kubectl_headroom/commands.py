"""The commands that read the live cluster: preflight, explain, status, and simulate
without a saved snapshot. This module imports the Kubernetes client, which takes about a
second, so ``main`` loads it only when a cluster is read."""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from app.core import apipaths
from app.core.config import Settings
from app.core.explain import factor_text
from app.core.labels import LEASE_NAME
from app.core.quantity import QuantityError, format_cpu_millis, parse_cpu_millis
from app.io.http import ApiError, KubeHttp
from app.io.kubeconfig import KubeConfigError, async_api_client
from kubectl_headroom import simulate_cli
from kubectl_headroom.exits import EXIT_BLOCKED, EXIT_ERROR
from kubectl_headroom.explain import as_dict, explain_pod, render
from kubectl_headroom.preflight import Severity, preflight
from kubectl_headroom.snapshot_fetch import fetch_snapshot
from kubectl_headroom.state import ClusterState, fetch_state, optional
from kubectl_headroom.status import event_time, leader_status, summarize
from kubectl_headroom.table import render as render_table


def run(args: argparse.Namespace) -> int:
    try:
        return asyncio.run(_run(args))
    except KubeConfigError as err:
        print(f"error: {err}", file=sys.stderr)
    except ApiError as err:
        print(f"error: the API server answered {err}", file=sys.stderr)
    return EXIT_ERROR


async def _run(args: argparse.Namespace) -> int:
    http = KubeHttp(await async_api_client(kubeconfig=args.kubeconfig))
    if args.command == "simulate":
        try:
            return await simulate_cli.run(
                args, read=lambda progress: fetch_snapshot(http, progress=progress)
            )
        finally:
            await http.close()
    try:
        state = await fetch_state(http)
        settings, config_problem = state.settings()
        if config_problem:
            print(f"warning: {config_problem}; using defaults", file=sys.stderr)
        if args.command == "preflight":
            findings = preflight(state, settings=settings, planned=args.namespace)
            blockers = sum(f.severity is Severity.BLOCKER for f in findings)
            if args.output == "json":
                print(
                    json.dumps(
                        {"findings": [f.as_dict() for f in findings], "blockers": blockers},
                        indent=2,
                    )
                )
            elif findings:
                rows = [
                    [str(f.severity).upper(), f.check, f.subject, f.message, f.fix]
                    for f in findings
                ]
                print(render_table(["SEVERITY", "CHECK", "OBJECT", "FINDING", "FIX"], rows))
                print(f"\n{blockers} blocker(s), {len(findings) - blockers} other finding(s)")
            else:
                print("preflight passed: no findings")
            return EXIT_BLOCKED if blockers else 0
        if args.command == "explain":
            return await _explain(http, state, settings, args)
        events = (await http.get(apipaths.EVENTS.path(), params={"limit": "500"})).get(
            "items"
        ) or []
        lease = await optional(
            http,
            apipaths.LEASES.path(namespace=args.lease_namespace, name=LEASE_NAME),
        )
        status = summarize(
            config=state.config,
            settings=settings,
            managed_namespaces=state.managed_namespaces(settings),
            events=events,
            node_labels=[node["metadata"].get("labels") or {} for node in state.nodes],
            leader=leader_status(lease, now=datetime.now(UTC)),
        )
        if args.output == "json":
            print(json.dumps(status.as_dict(), indent=2))
            return 0
        namespaces = ", ".join(status.managed_namespaces) or "none"
        print(f"Mode:               {status.mode}")
        print(f"Config:             {'HeadroomConfig/cluster' if status.configured else 'none'}")
        print(f"Ready:              {status.ready}")
        leader = "no lease (not leader-elected?)" if status.leader is None else status.leader.text()
        print(f"Leader:             {leader}")
        print(f"Managed namespaces: {namespaces}")
        print(f"Managed pods/nodes: {_count(status.managed_pods)}/{_count(status.managed_nodes)}")
        print("Outcomes (events): " + ", ".join(f"{k}={v}" for k, v in status.outcomes.items()))
        if status.pools:
            print()
            print(
                render_table(
                    ["POOL", "NODES", "MODE", "OVERRIDES"],
                    [
                        [p.name, str(p.nodes), p.mode, ", ".join(p.overrides) or "-"]
                        for p in status.pools
                    ]
                    + [["(no pool)", str(status.nodes_without_pool), status.mode, "-"]],
                )
            )
        if status.recent:
            print()
            print(
                render_table(
                    ["TIME", "REASON", "POD", "MESSAGE"],
                    [[r["time"], r["reason"], r["object"], r["message"]] for r in status.recent],
                )
            )
        return 0
    finally:
        await http.close()


async def _explain(
    http: KubeHttp, state: ClusterState, settings: Settings, args: argparse.Namespace
) -> int:
    what_if = None
    if args.request is not None:
        try:
            what_if = parse_cpu_millis(args.request)
        except QuantityError as err:
            print(f"error: --request: {err}", file=sys.stderr)
            return EXIT_ERROR
    pod = await http.get(apipaths.PODS.path(namespace=args.namespace, name=args.pod))
    node_name = pod.get("spec", {}).get("nodeName")
    if not node_name:
        print(f"pod {args.namespace}/{args.pod} is not bound to a node yet", file=sys.stderr)
        return EXIT_ERROR
    node = await http.get(apipaths.NODES.path(name=node_name))
    node_pods = (
        await http.get(apipaths.PODS.path(), params={"fieldSelector": f"spec.nodeName={node_name}"})
    ).get("items") or []
    by_namespace = _group(state.limit_ranges)
    compute = functools.partial(
        explain_pod,
        pod=pod,
        node=node,
        node_pods=node_pods,
        namespace_labels={
            ns["metadata"]["name"]: ns["metadata"].get("labels") or {} for ns in state.namespaces
        },
        limit_ranges=by_namespace,
        vpas=_group(state.vpas or ()),
        settings=settings,
    )
    explanation = compute()
    alternative = compute(what_if_request_m=what_if) if what_if else None
    events = (
        await http.get(
            apipaths.EVENTS.path(namespace=args.namespace),
            params={"fieldSelector": f"involvedObject.name={args.pod},reason=CPULimitAdjusted"},
        )
    ).get("items") or []
    last = max(events, key=event_time, default=None)
    last_message = str(last.get("message", "")) if last else None
    if args.output == "json":
        document = as_dict(explanation)
        document["lastEvent"] = last_message
        if alternative is not None:
            document["whatIf"] = as_dict(alternative)
        print(json.dumps(document, indent=2))
        return 0
    print(render(explanation, last_event=last_message))
    if alternative is not None and alternative.result is not None:
        print(
            f"\nWhat if the request were {format_cpu_millis(what_if or 0)}: "
            f"target {alternative.result.target_m}m, ceiling {alternative.result.hi_m}m "
            f"(node factor would be {factor_text(alternative.node_result.factor)})"
        )
    elif alternative is not None:
        print(f"\nWith that request the pod would not be managed ({alternative.ineligible})")
    return 0


def _group(objects: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for obj in objects:
        grouped.setdefault(obj["metadata"]["namespace"], []).append(obj)
    return grouped


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)
