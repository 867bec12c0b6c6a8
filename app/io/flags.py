"""Command-line flags the reconciler and the webhook share, and their types."""

import argparse
from pathlib import Path

from app.io.metrics_server import parse_bind_address


def boolean(text: str) -> bool:
    """``true``/``false`` (also ``1``/``0``, ``t``/``f``, ``yes``/``no``), in any case."""
    value = text.strip().lower()
    if value in ("true", "1", "t", "yes"):
        return True
    if value in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def bind_address(text: str) -> str:
    """``[HOST]:PORT``, checked as the listeners will read it."""
    try:
        parse_bind_address(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    return text


def directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory")
    return path


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    """The metrics' TLS, the cluster and the logs: the same flags in both processes."""
    flag = parser.add_argument
    flag(
        "--metrics-secure",
        type=boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="serve metrics over HTTPS behind TokenReview/SubjectAccessReview (default true)",
    )
    flag(
        "--metrics-cert-path",
        type=directory,
        default=None,
        help="directory with tls.crt/tls.key (and ca.crt), e.g. a cert-manager Secret; "
        "default: in-memory self-signed",
    )
    flag("--kubeconfig", default=None, help="kubeconfig file (default: in-cluster, then ~/.kube)")
    flag("--log-format", choices=("json", "text"), default="json")
    flag("--log-level", choices=("debug", "info", "warning", "error"), default="info")
