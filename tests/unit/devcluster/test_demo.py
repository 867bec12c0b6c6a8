"""``make demo`` picks a real cluster only when told to."""

from __future__ import annotations

from pathlib import Path

import pytest

from devcluster.demo import current_kubeconfig, parser


def test_the_embedded_cluster_is_the_default_even_with_kubeconfig_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KUBECONFIG", "/home/me/.kube/prod")
    assert parser().parse_args([]).cluster == "embedded"
    assert parser().parse_args(["--cluster=current"]).cluster == "current"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({"KUBECONFIG": "/a:/b"}, Path("/a")),
        ({"KUBECONFIG": ""}, Path("/home/me/.kube/config")),
        ({}, Path("/home/me/.kube/config")),
    ],
    ids=["first-listed", "empty", "unset"],
)
def test_the_current_kubeconfig_is_the_one_kubectl_reads_first(
    monkeypatch: pytest.MonkeyPatch, environ: dict[str, str], expected: Path
) -> None:
    monkeypatch.setenv("HOME", "/home/me")
    assert current_kubeconfig(environ) == expected
