"""``headroom-webhook``: the admission server (:9443), its metrics (:8443) and probes (:8081).

All three servers, the certificate watchers and the cluster cache share one event loop.
SIGTERM or SIGINT stops them together: listeners close, in-flight requests finish.
"""

import argparse
import asyncio
import gc
import logging
import signal
import sys
from collections.abc import Sequence

from prometheus_client import CollectorRegistry

from app.io.flags import add_process_flags, bind_address, directory, process_listeners
from app.io.http import KubeHttp
from app.io.kubeconfig import (
    DEFAULT_LEASE_NAMESPACE,
    KubeConfigError,
    async_api_client,
    default_lease_namespace,
)
from app.io.logs import configure_logging
from app.io.metrics_server import Listener, ListenError
from certs.source import certificate_source
from certs.tls import CertificateError
from webhook.app import create_app
from webhook.cache import AdmissionCache
from webhook.health import Health
from webhook.metrics import WebhookMetrics
from webhook.transport import DeadlineProtocol, HandshakeDeadlineLoop

logger = logging.getLogger(__name__)

# Longer than the API server's idle-connection timeout (90s), so the client closes idle
# keep-alive connections first and never sends a request into one the server is closing.
_KEEP_ALIVE_SECONDS = 120


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="headroom-webhook", description="Headroom's admission webhook server."
    )
    parser.add_argument("--bind-address", type=bind_address, default=":9443", metavar="[HOST]:PORT")
    parser.add_argument(
        "--cert-dir",
        type=directory,
        help="directory holding tls.crt and tls.key; without it, an in-memory self-signed "
        "certificate is served (with a warning)",
    )
    parser.add_argument(
        "--reconciler-lease-namespace",
        help="namespace of the reconciler's Lease, which says a live reconciler will take "
        f"over birth limits (default: this pod's, else {DEFAULT_LEASE_NAMESPACE})",
    )
    add_process_flags(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(log_format=args.log_format, level=args.log_level)
    try:
        with asyncio.Runner(loop_factory=HandshakeDeadlineLoop) as runner:
            return runner.run(_serve(args))
    except (CertificateError, KubeConfigError, ListenError) as err:
        logger.error("cannot start: %s", err)
        return 1


async def _serve(args: argparse.Namespace) -> int:
    certificates = certificate_source(cert_dir=args.cert_dir, purpose="webhook")
    kube = KubeHttp(await async_api_client(kubeconfig=args.kubeconfig))
    try:
        registry = CollectorRegistry()
        cluster = AdmissionCache(
            api=kube, lease_namespace=args.reconciler_lease_namespace or default_lease_namespace()
        )
        health = Health(certificates=certificates, cluster=cluster)
        listeners = [
            Listener(
                name="webhook",
                app=create_app(cluster=cluster, health=health, metrics=WebhookMetrics(registry)),
                address=args.bind_address,
                certificates=certificates,
                keep_alive_seconds=_KEEP_ALIVE_SECONDS,
                http_protocol=DeadlineProtocol,
            ),
            *process_listeners(
                args,
                registry=registry,
                api=kube,
                not_ready=health.not_ready,
                probe_protocol=DeadlineProtocol,
            ),
        ]
        for listener in listeners:
            listener.bind()
        await cluster.start()
        # Everything loaded so far (the web framework, the client, the cache) lives as
        # long as the process: keep the collector from rescanning it, which is what a full
        # collection in the middle of a burst of admissions would otherwise cost.
        gc.collect()
        gc.freeze()
        try:
            return await _run_until_stopped(listeners)
        finally:
            await cluster.stop()
    finally:
        await kube.close()


async def _run_until_stopped(listeners: Sequence[Listener]) -> int:
    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()

    def stop(signum: signal.Signals) -> None:
        logger.info("received %s; shutting down", signum.name)
        stopping.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum)
    tasks = [asyncio.create_task(listener.serve()) for listener in listeners]
    stop_waiter = asyncio.create_task(stopping.wait())
    done, _ = await asyncio.wait([*tasks, stop_waiter], return_when=asyncio.FIRST_COMPLETED)
    for listener in listeners:
        listener.stop()
    await asyncio.gather(*tasks, return_exceptions=True)
    stop_waiter.cancel()
    failed = [task for task in tasks if task in done]
    for task in failed:
        if task.exception() is not None:
            logger.error("a server failed", exc_info=task.exception())
    # A server that ended before a signal asked it to is a failure, whatever its cause.
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
