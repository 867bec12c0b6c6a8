"""The chart's pods as podman arguments: every field the chart renders is honoured, and
anything the translation cannot honour is refused by name."""

import copy
from typing import Any

import pytest

from devcluster.podspec import (
    HostMount,
    UnsupportedPodSpec,
    effective_user,
    field_value,
    port_number,
    run_arguments,
)
from tests.unit.chart.helm import NAMESPACE, render
from tests.unit.chart.objects import find

Json = dict[str, Any]


def chart_pod(component: str, **values: Any) -> Json:
    """The pod the chart's Deployment would create, as the API server would store it."""
    deployment = find(render(values), "Deployment", f"kube-headroom-{component}")
    # The render is cached: tests change their own copy.
    template = copy.deepcopy(deployment["spec"]["template"])
    return {
        "metadata": {
            **template["metadata"],
            "name": f"kube-headroom-{component}-abc12",
            "namespace": NAMESPACE,
            "uid": "0b9e",
        },
        "spec": {**template["spec"], "nodeName": "node-1"},
        "status": {"podIP": "10.244.0.9", "hostIP": "10.250.0.1"},
    }


def arguments(pod: Json, **overrides: Any) -> list[str]:
    (container,) = pod["spec"]["containers"]
    options: dict[str, Any] = {
        "name": "c",
        "netns": "/run/netns/p",
        "cgroup_parent": "/headroom-e2e-x",
        "image_user": "65532:65532",
        "mounts": [HostMount("/host/certs", "/tmp/k8s-webhook-server/serving-certs", True)],
        "environment": {"POD_NAME": "kube-headroom-webhook-abc12"},
        "labels": {"run": "x"},
    } | overrides
    return run_arguments(pod, container, **options)


def test_the_webhook_pod_runs_as_the_chart_says() -> None:
    args = arguments(chart_pod("webhook"))
    image = args.index("ghcr.io/karlkfi/kube-headroom:0.1.0")
    flags, after = set(args[:image]), args[image + 1 :]
    assert {
        "--user=65532:65532",
        "--group-add=65532",
        "--read-only",
        "--read-only-tmpfs=false",
        "--security-opt=no-new-privileges",
        "--cap-drop=all",
        "--security-opt=seccomp=/usr/share/containers/seccomp.json",
        f"--memory={512 * 2**20}",
        f"--memory-swap={512 * 2**20}",
        "--cpu-shares=102",
        "--network=ns:/run/netns/p",
        "--cgroup-parent=/headroom-e2e-x",
        '--entrypoint=["headroom-webhook"]',
        "--volume=/host/certs:/tmp/k8s-webhook-server/serving-certs:ro",
        "--env=POD_NAME=kube-headroom-webhook-abc12",
        "--pull=never",
    } <= flags
    assert after == [
        "--bind-address=:9443",
        "--cert-dir=/tmp/k8s-webhook-server/serving-certs",
        "--metrics-bind-address=:8443",
        "--metrics-secure=true",
        "--health-probe-bind-address=:8081",
        "--log-format=json",
    ]


def test_no_cpu_limit_means_no_cpu_quota() -> None:
    assert not [a for a in arguments(chart_pod("reconciler")) if a.startswith("--cpus")]


def test_an_entrypoint_without_args_runs_alone() -> None:
    pod = chart_pod("reconciler")
    del pod["spec"]["containers"][0]["args"]
    args = arguments(pod)
    assert args[-1] == "ghcr.io/karlkfi/kube-headroom:0.1.0"
    assert '--entrypoint=["headroom-reconciler"]' in args


def test_run_as_non_root_refuses_uid_zero() -> None:
    pod = chart_pod("reconciler")
    pod["spec"]["securityContext"]["runAsUser"] = 0
    with pytest.raises(UnsupportedPodSpec, match="runAsNonRoot and uid 0"):
        arguments(pod)


def test_the_image_user_counts_when_the_spec_sets_none() -> None:
    pod = chart_pod("reconciler")
    (container,) = pod["spec"]["containers"]
    del pod["spec"]["securityContext"]["runAsUser"]
    del pod["spec"]["securityContext"]["runAsGroup"]
    assert effective_user(pod, container, image_user="1000:2000") == (1000, 2000)
    with pytest.raises(UnsupportedPodSpec, match="non-numeric user"):
        effective_user(pod, container, image_user="nobody")


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("envFrom", [{"configMapRef": {"name": "x"}}], "envFrom"),
        ("stdin", True, "stdin"),
    ],
)
def test_fields_it_cannot_honour_are_refused_by_name(field: str, value: Any, named: str) -> None:
    pod = chart_pod("webhook")
    pod["spec"]["containers"][0][field] = value
    with pytest.raises(UnsupportedPodSpec, match=named):
        arguments(pod)


def test_privileged_and_unknown_security_fields_are_refused() -> None:
    pod = chart_pod("webhook")
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    with pytest.raises(UnsupportedPodSpec, match="privileged"):
        arguments(pod)
    pod = chart_pod("webhook")
    pod["spec"]["securityContext"]["seLinuxOptions"] = {"level": "s0"}
    with pytest.raises(UnsupportedPodSpec, match="seLinuxOptions"):
        arguments(pod)


def test_downward_api_fields() -> None:
    pod = chart_pod("webhook")
    assert field_value(pod, "metadata.name") == "kube-headroom-webhook-abc12"
    assert field_value(pod, "metadata.namespace") == NAMESPACE
    assert field_value(pod, "status.podIP") == "10.244.0.9"
    assert field_value(pod, "metadata.labels['app.kubernetes.io/component']") == "webhook"
    assert 'app.kubernetes.io/component="webhook"' in field_value(pod, "metadata.labels")
    with pytest.raises(UnsupportedPodSpec, match=r"spec\.hostname"):
        field_value(pod, "spec.hostname")


def test_probe_ports_by_name_or_number() -> None:
    (container,) = chart_pod("webhook")["spec"]["containers"]
    assert port_number(container, "health") == 8081
    assert port_number(container, 9443) == 9443
    with pytest.raises(UnsupportedPodSpec, match="no port named"):
        port_number(container, "nope")
