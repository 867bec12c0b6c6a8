"""`make deploy IMG=…` splits an image reference into the chart's repository, tag and
digest: a registry port is not a tag, and a digest pins the image. Rendered through the
real make and helm (`make helm-template` sets the image exactly as `make deploy` does)."""

import re
import subprocess

import pytest
import yaml

from tests.unit.chart.helm import REPO_ROOT, helm_binary
from tests.unit.chart.objects import container, find_all

DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGES = [
    pytest.param(
        "registry.example:5000/kube-headroom:dev",
        "registry.example:5000/kube-headroom:dev",
        id="registry-port-and-tag",
    ),
    pytest.param(
        f"registry.example:5000/kube-headroom@{DIGEST}",
        f"registry.example:5000/kube-headroom@{DIGEST}",
        id="registry-port-and-digest",
    ),
    pytest.param(
        f"registry.example:5000/team/kube-headroom:v1@{DIGEST}",
        f"registry.example:5000/team/kube-headroom@{DIGEST}",
        id="tag-and-digest-digest-wins",
    ),
    pytest.param(
        "ghcr.io/karlkfi/kube-headroom:0.1.0",
        "ghcr.io/karlkfi/kube-headroom:0.1.0",
        id="registry-and-tag",
    ),
    pytest.param(
        "registry.example:5000/kube-headroom",
        "registry.example:5000/kube-headroom:latest",
        id="no-tag-means-latest",
    ),
]


def _make(*args: str) -> str:
    result = subprocess.run(
        ["make", "--no-print-directory", *args, f"HELM={helm_binary()}"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.parametrize(("img", "image"), IMAGES)
def test_helm_template_renders_the_image_make_deploy_sets(img: str, image: str) -> None:
    rendered = [
        doc for doc in yaml.safe_load_all(_make("-s", "helm-template", f"IMG={img}")) if doc
    ]
    deployments = find_all(rendered, "Deployment")
    assert len(deployments) == 2
    assert {container(deployment)["image"] for deployment in deployments} == {image}


@pytest.mark.parametrize(("img", "image"), IMAGES)
def test_make_deploy_sets_the_same_image_values(img: str, image: str) -> None:
    def image_values(target: str) -> list[str]:
        return re.findall(r"--set image\.\S+", _make("-n", target, f"IMG={img}"))

    assert len(image_values("deploy")) == 3
    assert image_values("deploy") == image_values("helm-template")
