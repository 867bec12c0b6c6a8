"""Entry point of ``kubectl-headroom`` (run as ``kubectl headroom …``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence

from app.kube.config import KubeConfigError, async_api_client
from app.kube.http import ApiError, KubeHttp
from kubectl_headroom.preflight import Severity, preflight
from kubectl_headroom.state import fetch_state
from kubectl_headroom.status import summarize
from kubectl_headroom.table import render

EXIT_BLOCKED = 1
EXIT_ERROR = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl headroom",
        description="Preflight, explain and status for Headroom (CPU limits from node slack).",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube)")
    sub = parser.add_subparsers(dest="command", required=True)

    pre = sub.add_parser("preflight", help="check the cluster against the runbook's preflight")
    pre.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="a namespace you are about to enrol (repeatable)",
    )
    pre.add_argument("--output", "-o", choices=("table", "json"), default="table")

    st = sub.add_parser("status", help="mode, managed scope and recent outcomes")
    st.add_argument("--output", "-o", choices=("table", "json"), default="table")
    return parser


async def _run(args: argparse.Namespace) -> int:
    http = KubeHttp(await async_api_client(kubeconfig=args.kubeconfig))
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
                print(render(["SEVERITY", "CHECK", "OBJECT", "FINDING", "FIX"], rows))
                print(f"\n{blockers} blocker(s), {len(findings) - blockers} other finding(s)")
            else:
                print("preflight passed: no findings")
            return EXIT_BLOCKED if blockers else 0
        events = (await http.get("/api/v1/events", params={"limit": "500"})).get("items") or []
        status = summarize(
            config=state.config,
            settings=settings,
            managed_namespaces=state.managed_namespaces(settings),
            events=events,
        )
        if args.output == "json":
            print(json.dumps(status.as_dict(), indent=2))
            return 0
        namespaces = ", ".join(status.managed_namespaces) or "none"
        print(f"Mode:               {status.mode}")
        print(f"Config:             {'HeadroomConfig/cluster' if status.configured else 'none'}")
        print(f"Ready:              {status.ready}")
        print(f"Managed namespaces: {namespaces}")
        print(f"Managed pods/nodes: {_count(status.managed_pods)}/{_count(status.managed_nodes)}")
        print("Outcomes (events): " + ", ".join(f"{k}={v}" for k, v in status.outcomes.items()))
        if status.recent:
            print()
            print(
                render(
                    ["TIME", "REASON", "POD", "MESSAGE"],
                    [[r["time"], r["reason"], r["object"], r["message"]] for r in status.recent],
                )
            )
        return 0
    finally:
        await http.close()


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_run(args))
    except KubeConfigError as err:
        print(f"error: {err}", file=sys.stderr)
    except ApiError as err:
        print(f"error: the API server answered {err}", file=sys.stderr)
    return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
