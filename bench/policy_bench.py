"""Time ``compute_node`` for a full node (110 pods) and a dense one (1,000 pods).

Run: ``python -m bench.policy_bench``. Prints the median of many runs and the cost per
pod. Pods are built deterministically with one to three containers, a sidecar on
every fifth pod, mixed limits and a LimitRange in one namespace.
"""

import statistics
import time
from collections.abc import Sequence

from app.core.config import DEFAULT_SETTINGS
from app.core.limitrange import LimitRangeCaps
from app.core.pods import PodInfo, booked_cpu_m, pod_info_from_dict
from app.core.policy import NodeInput, compute_node

_SIZES = (110, 1000)
_RUNS = 200


def _container(
    name: str, *, request_m: int, limit_m: int | None, sidecar: bool
) -> dict[str, object]:
    limits = {"memory": "256Mi"} | ({} if limit_m is None else {"cpu": f"{limit_m}m"})
    result: dict[str, object] = {
        "name": name,
        "resources": {"requests": {"cpu": f"{request_m}m", "memory": "128Mi"}, "limits": limits},
    }
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def _pod(index: int) -> PodInfo:
    request_m = 50 + (index * 37) % 950
    containers = [
        _container(
            f"c{c}",
            request_m=request_m // (c + 1),
            limit_m=None if index % 3 else 2 * request_m,
            sidecar=False,
        )
        for c in range(1 + index % 3)
    ]
    inits = (
        [_container("proxy", request_m=20, limit_m=None, sidecar=True)] if index % 5 == 0 else []
    )
    return pod_info_from_dict(
        {
            "metadata": {
                "name": f"pod-{index}",
                "namespace": f"team-{index % 4}",
                "uid": str(index),
            },
            "spec": {"nodeName": "node-1", "containers": containers, "initContainers": inits},
            "status": {"phase": "Running", "qosClass": "Burstable"},
        }
    )


def _node(pods: Sequence[PodInfo]) -> NodeInput:
    booked = booked_cpu_m(pods)
    return NodeInput(
        name="node-1",
        allocatable_m=booked * 2,
        booked_m=booked,
        pods=pods,
        limit_ranges={"team-1": LimitRangeCaps(container_max_m=4000, pod_max_m=8000)},
    )


def _median_seconds(node: NodeInput) -> float:
    samples = []
    for _ in range(_RUNS):
        start = time.perf_counter()
        compute_node(node, DEFAULT_SETTINGS)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    for size in _SIZES:
        node = _node([_pod(index) for index in range(size)])
        median = _median_seconds(node)
        print(
            f"compute_node, {size:>5} pods: median {median * 1e3:7.3f} ms"
            f" over {_RUNS} runs, {median / size * 1e6:6.2f} µs per pod"
        )


if __name__ == "__main__":
    main()
