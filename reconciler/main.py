"""`headroom-reconciler`: the leader-elected controller process.

Flags follow the runbook's manager (`--metrics-bind-address`, `--metrics-secure`,
`--metrics-cert-path`, `--health-probe-bind-address`, `--leader-elect`, `--kubeconfig`).
SIGTERM stops the watches and workers, releases the lease and exits 0.
"""

import argparse
import asyncio
import gc
import logging
import random
import signal
import sys
from collections.abc import Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Final

from app.core.cluster import ClusterCache, Quiet, Unreadable
from app.core.config import DEFAULT_SETTINGS, DurationError, parse_duration_seconds
from app.io.budget import Lane, WriteBudget
from app.io.clock import Clock, LoopClock
from app.io.flags import add_process_flags, boolean, process_listeners
from app.io.http import KubeHttp
from app.io.kubeconfig import (
    DEFAULT_LEASE_NAMESPACE,
    KubeConfigError,
    async_api_client,
    default_lease_namespace,
)
from app.io.logs import configure_logging
from app.io.metrics_server import ListenError
from app.io.reflector import Reflector, cache_reflectors
from reconciler.activity import Activity
from reconciler.actuator import Actuator
from reconciler.answers import ResizeAnswers
from reconciler.controller import Controller
from reconciler.explanations import Explanations
from reconciler.gate import Outlet, WriteGate
from reconciler.leader import ElectionConfig, LeaderElector, default_identity
from reconciler.memory import malloc_trim, release_after_waves
from reconciler.metrics import ReconcilerMetrics
from reconciler.podmemory import PodMemory
from reconciler.ratelimit import Limiters, NodeBuckets
from reconciler.reconcile import NodeReconciler
from reconciler.requeue import requeue
from reconciler.resizer import Resizer
from reconciler.status import ConfigStatus
from reconciler.workqueue import MAX_DEBOUNCE_PERIODS, NodeQueue
from reconciler.writer import Writer

log = logging.getLogger(__name__)

USER_AGENT: Final = "headroom-reconciler"


def _duration(text: str) -> float:
    try:
        seconds = parse_duration_seconds(text)
    except DurationError as err:
        raise argparse.ArgumentTypeError(str(err)) from err
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"duration {text!r} must be positive")
    return seconds


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="headroom-reconciler",
        description="Sets managed containers' CPU limits from node slack via in-place resize.",
    )
    flag = parser.add_argument
    flag(
        "--leader-elect",
        type=boolean,
        nargs="?",
        const=True,
        default=False,
        help="elect a leader on the Lease so only one replica writes (default false); "
        "without it, the one replica holds the Lease without waiting for it",
    )
    flag(
        "--leader-election-namespace",
        default=None,
        help=f"namespace of the Lease (default: this pod's, else {DEFAULT_LEASE_NAMESPACE})",
    )
    flag("--leader-election-lease-duration", type=_duration, default=15.0, metavar="DURATION")
    flag("--leader-election-renew-deadline", type=_duration, default=10.0, metavar="DURATION")
    flag("--leader-election-retry-period", type=_duration, default=2.0, metavar="DURATION")
    add_process_flags(parser)
    args = parser.parse_args(argv)
    if args.leader_election_renew_deadline >= args.leader_election_lease_duration:
        parser.error("--leader-election-renew-deadline must be shorter than the lease duration")
    if args.leader_election_retry_period >= args.leader_election_renew_deadline:
        parser.error("--leader-election-retry-period must be shorter than the renew deadline")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configure_logging(log_format=args.log_format, level=args.log_level)
    try:
        return asyncio.run(run(args))
    except KubeConfigError as err:
        log.error("%s", err)
        return 1


def _not_synced(watches: Sequence[Reflector]) -> list[str]:
    missing = [r.path for r in watches if not r.synced.is_set()]
    return [f"not ready until the caches sync: {', '.join(missing)}"] if missing else []


async def run(args: argparse.Namespace) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)

    # Writes spend client-side budgets: resizes the config's clientQPS/clientBurst, their
    # explanations explanationQPS/explanationBurst. Reads and the Lease spend none: a queue
    # of writes must never delay a lease renewal or a relist.
    budget = WriteBudget(
        rate=float(DEFAULT_SETTINGS.client_qps), burst=DEFAULT_SETTINGS.client_burst
    )
    explanation_budget = WriteBudget(
        rate=float(DEFAULT_SETTINGS.explanation_qps), burst=DEFAULT_SETTINGS.explanation_burst
    )
    http = KubeHttp(
        await async_api_client(kubeconfig=args.kubeconfig),
        budgets={Lane.PRIMARY: budget, Lane.SECONDARY: explanation_budget},
        user_agent=USER_AGENT,
    )
    identity = default_identity()
    metrics = ReconcilerMetrics()
    # Held with or without leader election: it is how the webhook knows a reconciler is live.
    elector = LeaderElector(
        api=http,
        config=ElectionConfig(
            namespace=args.leader_election_namespace or default_lease_namespace(),
            identity=identity,
            lease_duration=args.leader_election_lease_duration,
            renew_deadline=args.leader_election_renew_deadline,
            retry_period=args.leader_election_retry_period,
            exclusive=args.leader_elect,
        ),
    )
    controller = build_controller(
        writer=Writer(http=http, instance=identity),
        metrics=metrics,
        budgets=(budget, explanation_budget),
        may_write=(lambda: elector.is_leader) if args.leader_elect else (lambda: True),
    )
    watches = list(cache_reflectors(api=http, cache=controller.cache).values())

    servers = process_listeners(
        args, registry=metrics.registry, api=http, not_ready=lambda: _not_synced(watches)
    )
    try:
        for server in servers:
            server.bind()
    except ListenError as err:
        log.error("%s", err)
        await http.close()
        return 1

    tasks: list[asyncio.Task[None]] = []

    def spawn(coroutine: Coroutine[Any, Any, None]) -> None:
        tasks.append(asyncio.create_task(coroutine))

    for server in servers:
        spawn(server.serve())
    for reflector in watches:
        spawn(reflector.run())
    log.info("starting", extra={"identity": identity, "leaderElect": args.leader_elect})
    stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    synced: asyncio.Future[Any] = asyncio.ensure_future(
        asyncio.gather(*(r.synced.wait() for r in watches))
    )
    exit_code = 0
    try:
        ended = await _first_done([stopped, synced, *tasks])
        if ended is synced:
            # The cache is long-lived: keep the collector from rescanning it forever.
            gc.freeze()
            log.info("caches synced", extra={"pods": len(controller.cache.pods)})
            if args.leader_elect:
                spawn(
                    elector.run(
                        on_started=controller.start_leading, on_stopped=controller.stop_leading
                    )
                )
            else:
                controller.start_leading()
                spawn(elector.run(on_started=lambda: None, on_stopped=lambda: None))
            spawn(controller.work())
            spawn(controller.actuator.run())
            spawn(controller.status.run(each=controller.retain_live_pods))
            trim = malloc_trim()
            if trim is not None:
                activity = controller.actuator.activity
                spawn(release_after_waves(lambda quiet: activity.wave_settled(quiet=quiet), trim))
            ended = await _first_done([stopped, *tasks])
        if ended is not stopped:
            # Every task runs until shutdown; one that ends means the process cannot work.
            log.error("a component stopped unexpectedly; exiting", exc_info=ended.exception())
            exit_code = 1
    finally:
        log.info("shutting down")
        controller.queue.shutdown()
        for future in (stopped, synced, *tasks):
            future.cancel()
        for server in servers:
            server.stop()
        await asyncio.gather(stopped, synced, *tasks, return_exceptions=True)
        await elector.release()
        await http.close()
    return exit_code


def build_controller(
    *,
    writer: Writer,
    metrics: ReconcilerMetrics,
    budgets: tuple[WriteBudget, WriteBudget],
    may_write: Callable[[], bool],
    clock: Clock | None = None,
    rand: random.Random | None = None,
) -> Controller:
    """The reconciler's object graph, built here only. ``budgets``: the resize and the
    explanation budgets the transport spends."""
    clock = clock if clock is not None else LoopClock()
    pace = NodeBuckets(rate=float(DEFAULT_SETTINGS.per_node_patches_per_second), clock=clock)
    queue = NodeQueue(clock=clock, rand=rand)
    cache = ClusterCache(listener=Quiet(), on_unreadable=_log_unreadable)
    resizes, explanations = budgets
    actuator = build_actuator(
        writer=writer,
        gate=WriteGate(cache=cache, may_write=may_write),
        limiters=Limiters(pace=pace, resizes=resizes, explanations=explanations),
        metrics=metrics,
        queue=queue,
        clock=clock,
    )
    reconciler = NodeReconciler(cache=cache, executor=actuator, metrics=metrics, clock=clock)
    controller = Controller(
        queue=queue,
        cache=cache,
        reconciler=reconciler,
        actuator=actuator,
        status=ConfigStatus(
            cache=cache,
            writer=writer,
            counts=lambda: (reconciler.managed_pods, reconciler.managed_nodes),
            may_write=may_write,
            clock=clock,
        ),
    )
    cache.listen(controller)
    return controller


def _reconcile_soon(queue: NodeQueue, gate: WriteGate, node: str) -> bool:
    """Whether the node is due for another look within the debounce's cap: changes to it are
    settling, and that look plans what they lead to. A retry after a back-off, minutes away,
    is not: explanations held for it would leave the node's pods unexplained until then."""
    due = queue.due_in(node)
    cap = MAX_DEBOUNCE_PERIODS * gate.cache.settings.debounce_seconds
    return due is not None and due <= cap


def build_actuator(
    *,
    writer: Writer,
    gate: WriteGate,
    limiters: Limiters,
    metrics: ReconcilerMetrics,
    queue: NodeQueue,
    clock: Clock,
) -> Actuator:
    """The two writing lanes over one memory of pods, reporting outcomes to ``queue``."""
    memory = PodMemory(clock=clock)
    outlet = Outlet(writer=writer, gate=gate, activity=Activity(clock=clock))
    report = partial(requeue, queue)
    explanations = Explanations(
        outlet=outlet,
        memory=memory,
        settling=lambda node: _reconcile_soon(queue, gate, node) or resizer.resizing(node),
        report=report,
    )
    resizer = Resizer(
        outlet=outlet,
        answers=ResizeAnswers(
            memory=memory, explanations=explanations, metrics=metrics, report=report
        ),
        buckets=limiters.pace,
        nodes=queue,
        clock=clock,
    )
    return Actuator(
        memory=memory, explanations=explanations, resizer=resizer, outlet=outlet, limiters=limiters
    )


def _log_unreadable(pod: Unreadable) -> None:
    log.error("ignoring pod %s with an invalid quantity: %s", pod.key, pod.reason)


async def _first_done(futures: Sequence[asyncio.Future[Any]]) -> asyncio.Future[Any]:
    done, _ = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    return next(iter(done))


if __name__ == "__main__":
    sys.exit(main())
