"""A local Kubernetes control plane for tests and the demo.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and KWOK run as
real processes built from Go modules (``hack/build-control-plane.sh``); nothing
here imitates the API server.
"""

from devcluster.binaries import BinaryNotFoundError, crds_dir, locate_binaries
from devcluster.controlplane import ControlPlane

__all__ = ["BinaryNotFoundError", "ControlPlane", "crds_dir", "locate_binaries"]
