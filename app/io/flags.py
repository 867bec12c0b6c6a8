"""Command-line flags the reconciler and the webhook share, their types, and the
listeners they describe."""

import argparse
import asyncio
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Final

from prometheus_client import CollectorRegistry

from app.io.metrics_server import (
    AccessReviewer,
    JsonPoster,
    KubeAccessReviewer,
    Listener,
    MetricsApp,
    parse_bind_address,
)
from app.io.probes import ProbeApp
from certs.source import CertificateSource, certificate_source

logger = logging.getLogger(__name__)

# A bind address of "0" turns its listener off.
DISABLED: Final = "0"


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


def listen_address(text: str) -> str:
    """A bind address, or ``DISABLED``."""
    return text if text == DISABLED else bind_address(text)


def directory(text: str) -> Path:
    path = Path(text)
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is not a directory")
    return path


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    """The metrics, the probes, the cluster and the logs: the same flags in both processes."""
    flag = parser.add_argument
    flag(
        "--metrics-bind-address",
        type=listen_address,
        default=":8443",
        help=f'address of the metrics endpoint; "{DISABLED}" disables it (default :8443)',
    )
    flag(
        "--health-probe-bind-address",
        type=listen_address,
        default=":8081",
        help=f'address of /healthz and /readyz; "{DISABLED}" disables it (default :8081)',
    )
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


def process_listeners(
    args: argparse.Namespace,
    *,
    registry: CollectorRegistry,
    api: JsonPoster | None,
    not_ready: Callable[[], list[str]],
    probe_protocol: type[asyncio.Protocol] | None = None,
) -> list[Listener]:
    """The metrics and probe listeners ``add_process_flags`` describes, less any disabled.
    Secure metrics need ``api``, for TokenReview and SubjectAccessReview."""
    listeners = []
    if args.metrics_bind_address != DISABLED:
        reviewer: AccessReviewer | None = None
        certificates: CertificateSource | None = None
        if not args.metrics_secure:
            logger.warning(
                "metrics are served over plain HTTP without authentication (--metrics-secure=false)"
            )
        elif api is None:
            raise ValueError("secure metrics need an API client for token and access reviews")
        else:
            reviewer = KubeAccessReviewer(api)
            certificates = certificate_source(cert_dir=args.metrics_cert_path, purpose="metrics")
        app = MetricsApp(registry=registry, reviewer=reviewer)
        listeners.append(
            Listener(
                name="metrics",
                app=app,
                address=args.metrics_bind_address,
                certificates=certificates,
            )
        )
    if args.health_probe_bind_address != DISABLED:
        listeners.append(
            Listener(
                name="health probe",
                app=ProbeApp(not_ready=not_ready),
                address=args.health_probe_bind_address,
                certificates=None,
                http_protocol=probe_protocol,
            )
        )
    return listeners
