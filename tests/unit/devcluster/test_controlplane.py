"""The control plane's real-kubelet option: where kubelets dial it."""

from pathlib import Path

import pytest

from devcluster.controlplane import ControlPlane, ControlPlaneError, KubeletAccess


def test_kubelets_dial_the_address_they_were_given(tmp_path: Path) -> None:
    plane = ControlPlane(
        work_dir=tmp_path, bin_dir=tmp_path, kubelets=KubeletAccess(address="10.251.0.1")
    )
    plane.apiserver_port = 6443
    assert plane.kubelet_server == "https://10.251.0.1:6443"


def test_without_kubelet_access_no_kubelet_can_reach_it(tmp_path: Path) -> None:
    plane = ControlPlane(work_dir=tmp_path, bin_dir=tmp_path)
    with pytest.raises(ControlPlaneError, match="KubeletAccess"):
        _ = plane.kubelet_server
