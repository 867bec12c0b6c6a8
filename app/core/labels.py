"""Names Headroom shares with the cluster: API group, labels, annotations, field manager."""

from typing import Final

GROUP: Final = "kube-headroom.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
CONFIG_KIND: Final = "HeadroomConfig"
CONFIG_PLURAL: Final = "headroomconfigs"
# The config is a cluster-scoped singleton; any other name is rejected.
CONFIG_NAME: Final = "cluster"

MODE_LABEL: Final = f"{GROUP}/mode"
MODE_MANAGED: Final = "managed"

MAX_CPU_ANNOTATION: Final = f"{GROUP}/max-cpu"
STATUS_ANNOTATION: Final = f"{GROUP}/status"

FIELD_MANAGER: Final = "headroom"
POLICY_VERSION: Final = "proportional-v1"

# Well-known Kubernetes names Headroom reads.
OS_LABEL: Final = "kubernetes.io/os"
OS_WINDOWS: Final = "windows"
MIRROR_POD_ANNOTATION: Final = "kubernetes.io/config.mirror"

# The Lease the reconciler's replicas elect a leader on.
LEASE_NAME: Final = "kube-headroom-reconciler"
