"""The commands that read the live cluster: preflight, explain, status, version, and simulate
without a saved snapshot. This module imports the Kubernetes client, which takes about a
second, so ``main`` loads it only when a cluster is read."""

import argparse
import asyncio
import functools
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from app.core import apipaths
from app.core.config import Settings
from app.core.explain import factor_text
from app.core.labels import LEASE_NAME
from app.core.quantity import format_cpu_millis
from app.io.http import KubeHttp
from app.io.kubeconfig import async_api_client
from kubectl_headroom import simulate_cli, version
from kubectl_headroom.exits import Exit, error
from kubectl_headroom.explain import as_dict, explain_pod, render
from kubectl_headroom.failures import FAILURES, report
from kubectl_headroom.kubeconfig import Target, resolve
from kubectl_headroom.output import emit
from kubectl_headroom.preflight import Severity, preflight
from kubectl_headroom.snapshot_fetch import fetch_snapshot
from kubectl_headroom.state import ClusterState, fetch_state, optional
from kubectl_headroom.status import event_time, leader_status, summarize
from kubectl_headroom.table import render as render_table


def run(args: argparse.Namespace) -> int:
    target: Target | None = None
    try:
        target = resolve(flag=args.kubeconfig, context=args.context)
        return asyncio.run(_run(args, target))
    except FAILURES as err:
        failure = report(err, target=target, command=args.command)
        print(failure.line, file=sys.stderr)
        return failure.code


async def _run(args: argparse.Namespace, target: Target) -> int:
    http = KubeHttp(await async_api_client(kubeconfig=target.kubeconfig, context=target.context))
    try:
        if args.command == "simulate":
            return await simulate_cli.run(
                args, read=lambda progress: fetch_snapshot(http, progress=progress)
            )
        if args.command == "version":
            server = await http.get(apipaths.VERSION_PATH)
            version.show(args.output, server=str(server.get("gitVersion", "")))
            return Exit.OK
        state = await fetch_state(http)
        settings, config_problem = state.settings()
        if config_problem:
            print(f"warning: {config_problem}; using defaults", file=sys.stderr)
        if args.command == "preflight":
            return _preflight(state, settings, args)
        if args.command == "explain":
            return await _explain(http, state, settings, args, default_namespace=target.namespace)
        return await _status(http, state, settings, args)
    finally:
        await http.close()


def _preflight(state: ClusterState, settings: Settings, args: argparse.Namespace) -> int:
    findings = preflight(state, settings=settings, planned=args.namespace)
    blockers = sum(f.severity is Severity.BLOCKER for f in findings)
    if args.output != "table":
        emit({"findings": [f.as_dict() for f in findings], "blockers": blockers}, args.output)
    elif findings:
        rows = [[str(f.severity).upper(), f.check, f.subject, f.message, f.fix] for f in findings]
        print(render_table(["SEVERITY", "CHECK", "OBJECT", "FINDING", "FIX"], rows))
        print(f"\n{blockers} blocker(s), {len(findings) - blockers} other finding(s)")
    else:
        print("preflight passed: no findings")
    return Exit.BLOCKED if blockers else Exit.OK


async def _status(
    http: KubeHttp, state: ClusterState, settings: Settings, args: argparse.Namespace
) -> int:
    events = await _items(http, apipaths.EVENTS.path(), limit="500")
    lease = await optional(
        http.get(apipaths.LEASES.path(namespace=args.lease_namespace, name=LEASE_NAME))
    )
    status = summarize(
        config=state.config,
        settings=settings,
        managed_namespaces=state.managed_namespaces(settings),
        events=events,
        node_labels=[node["metadata"].get("labels") or {} for node in state.nodes],
        leader=leader_status(lease, now=datetime.now(UTC)),
    )
    if args.output != "table":
        emit(status.as_dict(), args.output)
        return Exit.OK
    print(f"Mode:               {status.mode}")
    print(f"Config:             {'HeadroomConfig/cluster' if status.configured else 'none'}")
    print(f"Ready:              {status.ready}")
    leader = "no lease (not leader-elected?)" if status.leader is None else status.leader.text()
    print(f"Leader:             {leader}")
    print(f"Managed namespaces: {', '.join(status.managed_namespaces) or 'none'}")
    print(f"Managed pods/nodes: {_count(status.managed_pods)}/{_count(status.managed_nodes)}")
    print("Outcomes (events): " + ", ".join(f"{k}={v}" for k, v in status.outcomes.items()))
    if status.pools:
        rows = [[p.name, str(p.nodes), p.mode, ", ".join(p.overrides) or "-"] for p in status.pools]
        rows.append(["(no pool)", str(status.nodes_without_pool), status.mode, "-"])
        print(f"\n{render_table(['POOL', 'NODES', 'MODE', 'OVERRIDES'], rows)}")
    if status.recent:
        rows = [[r["time"], r["reason"], r["object"], r["message"]] for r in status.recent]
        print(f"\n{render_table(['TIME', 'REASON', 'POD', 'MESSAGE'], rows)}")
    return Exit.OK


async def _explain(
    http: KubeHttp,
    state: ClusterState,
    settings: Settings,
    args: argparse.Namespace,
    *,
    default_namespace: str,
) -> int:
    namespace = args.namespace or default_namespace
    if args.pod is not None:
        pod = await optional(http.get(apipaths.PODS.path(namespace=namespace, name=args.pod)))
        if pod is None:
            defaulted = "" if args.namespace else " (the context's namespace; -n names another)"
            return error(f'pod "{args.pod}" not found in namespace "{namespace}"{defaulted}')
        pods = [pod]
    else:
        pods = await _items(
            http, apipaths.PODS.path(namespace=namespace), labelSelector=args.selector
        )
    explainer = _Explainer(http, state, settings)
    documents, texts = [], []
    for pod in pods:
        if not (pod.get("spec") or {}).get("nodeName"):
            unbound = f"pod {namespace}/{pod['metadata']['name']} is not bound to a node yet"
            if args.pod is not None:
                return error(f"{unbound}: explain it once it is scheduled")
            print(f"warning: {unbound}; skipped", file=sys.stderr)
            continue
        document, text = await explainer.explain(pod, what_if=args.request_m)
        documents.append(document)
        texts.append(text)
    if args.pod is None and not pods:
        print(f"No pods in namespace {namespace} match -l {args.selector}", file=sys.stderr)
    if args.output == "table":
        if texts:
            print("\n\n".join(texts))
    else:
        # One POD prints as itself, a -l selection as a list.
        emit(documents[0] if args.pod is not None else {"items": documents}, args.output)
    return Exit.OK


class _Explainer:
    """Explains pods one by one, reading each node and its pods once."""

    def __init__(self, http: KubeHttp, state: ClusterState, settings: Settings) -> None:
        self._http = http
        # What every explanation shares, bound once.
        self._explain_pod = functools.partial(
            explain_pod,
            namespaces=state.namespaces,
            limit_ranges=state.limit_ranges,
            vpas=state.vpas or (),
            replica_sets=state.replica_sets,
            jobs=state.jobs,
            settings=settings,
        )
        self._nodes: dict[str, tuple[Mapping[str, Any], list[Mapping[str, Any]]]] = {}

    async def _node(self, name: str) -> tuple[Mapping[str, Any], list[Mapping[str, Any]]]:
        if name not in self._nodes:
            node = await self._http.get(apipaths.NODES.path(name=name))
            node_pods = await _items(
                self._http, apipaths.PODS.path(), fieldSelector=f"spec.nodeName={name}"
            )
            self._nodes[name] = (node, node_pods)
        return self._nodes[name]

    async def explain(
        self, pod: Mapping[str, Any], *, what_if: int | None
    ) -> tuple[dict[str, Any], str]:
        """The pod's explanation as a document and as text."""
        node, node_pods = await self._node(pod["spec"]["nodeName"])
        compute = functools.partial(self._explain_pod, pod=pod, node=node, node_pods=node_pods)
        explanation = compute()
        meta = pod["metadata"]
        events = await _items(
            self._http,
            apipaths.EVENTS.path(namespace=meta["namespace"]),
            fieldSelector=f"involvedObject.name={meta['name']},reason=CPULimitAdjusted",
        )
        last = max(events, key=event_time, default=None)
        last_message = str(last.get("message", "")) if last else None
        document = {**as_dict(explanation), "lastEvent": last_message}
        text = render(explanation, last_event=last_message)
        if not what_if:
            return document, text
        alternative = compute(what_if_request_m=what_if)
        document["whatIf"] = as_dict(alternative)
        if alternative.result is None:
            text += f"\n\nWith that request the pod would not be managed ({alternative.ineligible})"
        else:
            text += (
                f"\n\nWhat if the request were {format_cpu_millis(what_if)}: "
                f"target {alternative.result.target_m}m, ceiling {alternative.result.hi_m}m "
                f"(node factor would be {factor_text(alternative.node_result.factor)})"
            )
        return document, text


async def _items(http: KubeHttp, path: str, **params: str) -> list[Any]:
    """The items of one GET of a collection, with these query parameters."""
    items: list[Any] = (await http.get(path, params=params)).get("items") or []
    return items


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)
