"""``make demo DEMO_ARGS=--real-nodes`` stays true: its walk, run on the session's workload
node, passes every check of its own, and the ``cpu.max`` it prints after each step moves
as the step says."""

from __future__ import annotations

import io
import re
from pathlib import Path

from devcluster.demo import REAL, Demo, Narrator, options
from devcluster.realnodes import WORKLOAD, RealCluster
from tests.integration.conftest import Cluster, eventually

# "cpu.max of web/app on realnode-1: max 100000 (no limit) -> 250000 100000 (2500m) (changed)"
CPU_MAX_LINE = re.compile(r"cpu\.max of [^:]+: [^(]+\(([^)]+)\) -> [^(]+\(([^)]+)\)")


def test_the_walk_on_a_real_node_shows_cpu_max_following_each_step(
    real_cluster: RealCluster, control_plane: Cluster, tmp_path: Path
) -> None:
    out = io.StringIO()
    demo = Demo(
        args=options(["--real-nodes", "--non-interactive"]),
        narrator=Narrator(interactive=False, out=out),
    )
    code = demo.on_real_nodes(real_cluster, tmp_path)
    printed = out.getvalue()
    assert code == 0, printed
    moves = [match.groups() for match in CPU_MAX_LINE.finditer(printed)]
    alone, shrunk = f"{REAL.alone_m}m", f"{REAL.shrunk_m}m"
    assert moves == [
        ("no limit", "no limit"),  # dry-run: an annotation, no limit
        ("no limit", alone),  # enforce: alone on the node, up to its cap
        (alone, shrunk),  # neighbours land
        (shrunk, shrunk),  # the quota is refused
        *[(shrunk, shrunk)] * 3,  # each rollback stop freezes it while neighbours change
    ], printed
    # The next test finds the node empty.
    eventually(
        lambda: not control_plane.kubectl(
            "get", "pods", "-A", "--field-selector", f"spec.nodeName={WORKLOAD.name}",
            "-o", "name",
        ).strip(),
        timeout=60,
        what=f"{WORKLOAD.name} empty after the walk",
    )  # fmt: skip
