"""The pure policy: per-node targets and the webhook's birth limits. No I/O, no clock."""

from app.policy.arithmetic import half_up_div, quantize
from app.policy.deadband import PATCH_REASONS, decide
from app.policy.model import Cap, ContainerLimit, NodeInput, NodeResult, PodResult, Reason
from app.policy.node import compute_node
from app.policy.seed import seed_limits, seed_pod_limit
from app.policy.split import split_target

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
