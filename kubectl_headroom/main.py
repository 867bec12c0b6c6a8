"""Entry point of ``kubectl-headroom`` (run as ``kubectl headroom …``)."""

import argparse
import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from app.core.quantity import QuantityError, parse_cpu_millis
from kubectl_headroom import simulate_cli, version
from kubectl_headroom.exits import error
from kubectl_headroom.labelselector import SelectorSyntaxError, parse_selector
from kubectl_headroom.output import add_output


def _connection_flags(*, suppress: bool) -> argparse.ArgumentParser:
    """kubectl's connection flags. The subcommands take them too (their defaults
    suppressed, so a flag given before the subcommand is kept): they go anywhere."""
    flags = argparse.ArgumentParser(
        add_help=False, argument_default=argparse.SUPPRESS if suppress else None
    )
    flags.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
    )
    flags.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    return flags


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="kubectl headroom",
        description=(
            "Preflight, explain, status and simulate for Headroom (CPU limits from node slack)."
        ),
        parents=[_connection_flags(suppress=False)],
    )
    top.add_argument(
        "--version", action="version", version=f"kubectl-headroom {version.client_version()}"
    )
    sub = top.add_subparsers(dest="command", required=True)
    flags = [_connection_flags(suppress=True)]

    def command(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        """A subcommand; it takes the connection flags too."""
        return sub.add_parser(name, parents=flags, **kwargs)

    pre = command("preflight", help="check the cluster against the runbook's preflight")
    pre.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="a namespace you are about to enrol (repeatable; enrolled ones are always checked)",
    )
    add_output(pre)

    ex = command(
        "explain",
        help="the arithmetic behind a pod's CPU limit",
        description="Explain POD, or every pod -l selects, in one namespace.",
    )
    ex.add_argument("pod", metavar="POD", nargs="?")
    ex.add_argument(
        "--namespace", "-n", metavar="NS", help="the pod's namespace (default: the context's)"
    )
    ex.add_argument(
        "--selector", "-l", metavar="SELECTOR", help="explain every pod with these labels"
    )
    ex.add_argument(
        "--request",
        metavar="CPU",
        help="what-if: the ceiling this pod would get on its node now with this CPU request",
    )
    add_output(ex)

    st = command("status", help="mode, managed scope, leader and recent outcomes")
    add_output(st)
    st.add_argument(
        "--lease-namespace",
        default="kube-headroom-system",
        metavar="NS",
        help="where the reconciler's leader-election Lease lives (default kube-headroom-system)",
    )

    sim = command(
        "simulate",
        help="what Headroom would do to every pod under a what-if; never writes",
        description=(
            "Runs the reconciler's eligibility and policy over the live cluster (or a saved "
            "snapshot) under a what-if config and enrolment, and prints every managed pod's "
            "current and simulated CPU limit. Nothing in the cluster changes."
        ),
    )
    simulate_cli.add_arguments(sim)

    ver = command("version", help="the plugin's version and the API server's")
    ver.add_argument("--client", action="store_true", help="the plugin's version only")
    add_output(ver)
    return top


def main(argv: Sequence[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.command == "explain":
        if (args.pod is None) == (args.selector is None):
            cli.error("explain takes a POD or -l SELECTOR (one of them)")
        if args.selector is not None and args.request is not None:
            cli.error("explain --request takes a POD, not -l")
        # Bad input is refused before any cluster is read.
        try:
            args.request_m = None if args.request is None else parse_cpu_millis(args.request)
            if args.selector is not None:
                parse_selector(args.selector)
        except QuantityError as err:
            return error(f"--request: {err}")
        except SelectorSyntaxError as err:
            return error(str(err))
    if args.command == "simulate" and args.snapshot is not None:
        # Offline: no cluster is read, so the Kubernetes client (a second to import) is not.
        return asyncio.run(simulate_cli.run(args))
    if args.command == "version" and args.client:
        version.show(args.output, server=None)
        return 0
    from kubectl_headroom import commands

    return commands.run(args)


if __name__ == "__main__":
    sys.exit(main())
