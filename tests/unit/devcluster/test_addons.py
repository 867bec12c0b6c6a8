import json
from pathlib import Path

import jsonpatch
import yaml

from devcluster.addons import OPERATOR_ARGS, AddonPaths, prometheus_operator_kustomization

RELEASE_ARGS = ["--kubelet-service=kube-system/kubelet", "--kubelet-endpoints=true"]


def _paths(deploy: Path) -> AddonPaths:
    unused = Path("/nonexistent")
    return AddonPaths(
        cert_manager_bin=unused, prometheus_operator_bin=unused, prometheus_operator_crds=unused,
        prometheus_operator_deploy=deploy, prometheus=unused, docker_registry=unused,
        base_rootfs=unused,
    )  # fmt: skip


def test_the_operator_runs_from_its_release_manifests_with_only_our_arguments_added(
    tmp_path: Path,
) -> None:
    deploy = tmp_path / "deploy"
    deploy.mkdir()
    deployment = {
        "kind": "Deployment",
        "metadata": {"name": "prometheus-operator", "namespace": "default"},
        "spec": {"template": {"spec": {"containers": [{"args": list(RELEASE_ARGS)}]}}},
    }
    (deploy / "prometheus-operator-deployment.yaml").write_text(yaml.safe_dump(deployment))
    (deploy / "prometheus-operator-service-account.yaml").write_text("kind: ServiceAccount\n")
    (deploy / ".complete").touch()

    directory = prometheus_operator_kustomization(_paths(deploy), tmp_path / "k", "monitoring")

    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text())
    assert kustomization["namespace"] == "monitoring"
    assert kustomization["resources"] == [
        "prometheus-operator-deployment.yaml",
        "prometheus-operator-service-account.yaml",
    ]
    for name in kustomization["resources"]:
        assert (directory / name).read_bytes() == (deploy / name).read_bytes()
    [patch] = kustomization["patches"]
    assert patch["target"] == {"kind": "Deployment", "name": "prometheus-operator"}
    patched = jsonpatch.apply_patch(deployment, json.loads(patch["patch"]))
    assert patched["spec"]["template"]["spec"]["containers"][0]["args"] == [
        *RELEASE_ARGS,
        *OPERATOR_ARGS,
    ]
