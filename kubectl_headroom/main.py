"""Entry point of ``kubectl-headroom`` (run as ``kubectl headroom …``)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from kubectl_headroom import simulate_cli


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubectl headroom",
        description=(
            "Preflight, explain, status and simulate for Headroom (CPU limits from node slack)."
        ),
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

    ex = sub.add_parser("explain", help="the arithmetic behind a pod's CPU limit")
    ex.add_argument("pod", metavar="POD")
    ex.add_argument("--namespace", "-n", default="default", metavar="NS")
    ex.add_argument(
        "--request",
        metavar="CPU",
        help="what-if: the ceiling this pod would get on its node now with this CPU request",
    )
    ex.add_argument("--output", "-o", choices=("table", "json"), default="table")

    st = sub.add_parser("status", help="mode, managed scope, leader and recent outcomes")
    st.add_argument("--output", "-o", choices=("table", "json"), default="table")
    st.add_argument(
        "--lease-namespace",
        default="kube-headroom-system",
        metavar="NS",
        help="where the reconciler's leader-election Lease lives (default kube-headroom-system)",
    )

    sim = sub.add_parser(
        "simulate",
        help="what Headroom would do to every pod under a what-if; never writes",
        description=(
            "Runs the reconciler's eligibility and policy over the live cluster (or a saved "
            "snapshot) under a what-if config and enrolment, and prints every managed pod's "
            "current and simulated CPU limit. Nothing in the cluster changes."
        ),
    )
    simulate_cli.add_arguments(sim)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "simulate" and args.snapshot is not None:
        # Offline: no cluster is read, so the Kubernetes client (a second to import) is not.
        return asyncio.run(simulate_cli.run(args, read=simulate_cli.from_file(args.snapshot)))
    from kubectl_headroom import commands

    return commands.run(args)


if __name__ == "__main__":
    sys.exit(main())
