"""The pure policy: per-node targets and the webhook's birth limits. No I/O, no clock."""

from app.core.policy.arithmetic import half_up_div, quantize
from app.core.policy.deadband import PATCH_REASONS, decide
from app.core.policy.model import Cap, ContainerLimit, NodeInput, NodeResult, PodResult, Reason
from app.core.policy.node import compute_node
from app.core.policy.seed import seed_limits, seed_pod_limit
from app.core.policy.split import split_target

__all__ = [
    "PATCH_REASONS",
    "Cap",
    "ContainerLimit",
    "NodeInput",
    "NodeResult",
    "PodResult",
    "Reason",
    "compute_node",
    "decide",
    "half_up_div",
    "quantize",
    "seed_limits",
    "seed_pod_limit",
    "split_target",
]
