"""``kubectl headroom simulate``: its arguments and its run, over any snapshot source."""

import argparse
import gc
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from kubectl_headroom.exits import Exit, error
from kubectl_headroom.labelselector import SelectorSyntaxError, parse_selector
from kubectl_headroom.output import add_output, emit
from kubectl_headroom.simulate import SortKey, WhatIf, select, simulate
from kubectl_headroom.simulate_output import Progress, document, table
from kubectl_headroom.snapshot import Snapshot, SnapshotError, load, save
from kubectl_headroom.whatif import WhatIfError, what_if_config, what_if_settings

Reader = Callable[[Callable[[str, int], None]], Awaitable[Snapshot]]


def add_arguments(sim: argparse.ArgumentParser) -> None:
    for flag, text in (
        ("--enroll", "simulate NS enrolled"),
        ("--unenroll", "simulate NS released"),
    ):
        sim.add_argument(flag, action="append", default=[], metavar="NS", help=text)
    sim.add_argument(
        "--set",
        dest="sets",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="change a HeadroomConfig spec field, e.g. maxMultiplier=5 or deadband.growPercent=20",
    )
    sim.add_argument(
        "--weight",
        dest="weights",
        action="append",
        default=[],
        metavar="PRIORITYCLASS=WEIGHT",
        help="weigh the pods of a PriorityClass, before every weight rule, e.g. critical=4",
    )
    for flag, text in (
        ("--config", "simulate this whole HeadroomConfig instead"),
        ("--snapshot", "read a saved snapshot, not the cluster"),
        ("--save", "save the snapshot read (.gz compresses)"),
    ):
        sim.add_argument(flag, type=Path, metavar="FILE", help=text)
    sim.add_argument(
        "--namespace", "-n", action="append", default=[], metavar="NS", help="show pods of NS"
    )
    sim.add_argument("--node", action="append", default=[], metavar="NODE", help="show NODE")
    sim.add_argument("--selector", "-l", metavar="SELECTOR", help="show pods with these labels")
    sim.add_argument(
        "--sort-by", choices=[key.value for key in SortKey], default=SortKey.NODE.value
    )
    add_output(sim)


async def run(args: argparse.Namespace, *, read: Reader | None = None) -> int:
    """Simulate over the snapshot ``read`` lists from the cluster, or (None) the saved one
    ``--snapshot`` names."""
    # A simulation builds millions of objects and frees none until it ends; garbage
    # collection passes over them would cost most of the time (perf-facts: 3-6x).
    gc.disable()
    try:
        return await _run(args, read=read)
    finally:
        gc.enable()


async def _run(args: argparse.Namespace, *, read: Reader | None) -> int:
    try:
        selector = None if args.selector is None else parse_selector(args.selector)
    except SelectorSyntaxError as err:
        return error(str(err))
    progress = Progress()
    try:
        snapshot = load(args.snapshot) if read is None else await read(progress.listed)
        if args.save is not None:
            save(snapshot, args.save)
        config = what_if_config(
            snapshot.config, config_file=args.config, sets=args.sets, weights=args.weights
        )
        settings, warnings = what_if_settings(config)
    except (SnapshotError, WhatIfError, OSError) as err:
        progress.done()
        problems = err.problems if isinstance(err, WhatIfError) else (str(err),)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return Exit.ERROR
    what_if = WhatIf(enroll=frozenset(args.enroll), unenroll=frozenset(args.unenroll))
    simulation = simulate(snapshot, settings, what_if=what_if, progress=progress.computed)
    progress.done()
    # The cluster's own config warned when it was applied; only a changed one warns here.
    changed = args.config is not None or bool(args.sets)
    for line in [*(warnings if changed else []), *simulation.notes]:
        print(f"warning: {line}", file=sys.stderr)
    view = select(
        simulation,
        namespaces=args.namespace,
        nodes=args.node,
        selector=selector,
        sort=SortKey(args.sort_by),
    )
    if args.output == "table":
        print(table(simulation, view))
        return 0
    emit(document(simulation, view), args.output)
    return 0
