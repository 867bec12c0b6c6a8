"""Every combination of the chart's toggles renders and keeps the runbook's promises."""

import itertools
from typing import Any, NamedTuple

import pytest

from tests.unit.chart.builders import BYO_CA_BUNDLE, BYO_SECRET, chart_values
from tests.unit.chart.helm import NAMESPACE, Manifest, render, render_error
from tests.unit.chart.objects import (
    container,
    find,
    find_all,
    labels_match,
    mounts,
    names,
    volumes,
)

METRICS_CERT_DIR = "/tmp/k8s-metrics-server/metrics-certs"
WEBHOOK_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"
CLUSTER_SCOPED = {
    "ClusterRole",
    "ClusterRoleBinding",
    "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "HeadroomConfig",
}


class Toggles(NamedTuple):
    webhook: bool
    certmanager: bool
    prometheus: bool
    network_policy: bool
    cert_manager_tls: bool
    headroom_config: bool

    @property
    def id(self) -> str:
        return "-".join(f"{name}={'on' if on else 'off'}" for name, on in self._asdict().items())

    def values(self) -> dict[str, Any]:
        return chart_values(**self._asdict())

    def render(self) -> tuple[Manifest, ...]:
        return render(self.values())


ALL = [Toggles(*flags) for flags in itertools.product([True, False], repeat=len(Toggles._fields))]
# Metrics TLS comes from cert-manager; without it that combination must fail to render.
VALID = [t for t in ALL if t.certmanager or not t.cert_manager_tls]
INVALID = [t for t in ALL if t not in VALID]


def toggles(cases: list[Toggles]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("t", cases, ids=[c.id for c in cases])


def deployments(t: Toggles) -> dict[str, Manifest]:
    rendered = t.render()
    components = ["reconciler", "webhook"] if t.webhook else ["reconciler"]
    assert names(rendered, "Deployment") == {f"kube-headroom-{c}" for c in components}
    return {c: find(rendered, "Deployment", f"kube-headroom-{c}") for c in components}


@toggles(INVALID)
def test_metrics_tls_without_cert_manager_fails_with_what_to_set(t: Toggles) -> None:
    assert "set certmanager.enable=true" in render_error(t.values())


@toggles(VALID)
def test_objects_are_unique_and_namespaced_into_the_release_namespace(t: Toggles) -> None:
    rendered = t.render()
    keys = [(m["kind"], m["metadata"]["name"]) for m in rendered]
    assert len(keys) == len(set(keys))
    for m in rendered:
        if m["kind"] not in CLUSTER_SCOPED:
            assert m["metadata"]["namespace"] == NAMESPACE, m["metadata"]["name"]


@toggles(VALID)
def test_pods_meet_restricted_pod_security(t: Toggles) -> None:
    for deployment in deployments(t).values():
        pod = deployment["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        security = container(deployment)["securityContext"]
        assert security["allowPrivilegeEscalation"] is False
        assert security["readOnlyRootFilesystem"] is True
        assert security["capabilities"] == {"drop": ["ALL"]}
        assert pod.get("hostNetwork", False) is False
        assert pod["topologySpreadConstraints"]


@toggles(VALID)
def test_processes_get_their_flags_probes_and_resources(t: Toggles) -> None:
    shared = {
        "--metrics-bind-address=:8443",
        "--metrics-secure=true",
        "--health-probe-bind-address=:8081",
        "--log-format=json",
    }
    if t.cert_manager_tls:
        shared.add(f"--metrics-cert-path={METRICS_CERT_DIR}")
    own = {
        "reconciler": {"--leader-elect"},
        "webhook": {"--bind-address=:9443", f"--cert-dir={WEBHOOK_CERT_DIR}"},
    }
    for component, deployment in deployments(t).items():
        c = container(deployment)
        assert c["command"] == [f"headroom-{component}"]
        assert set(c["args"]) == shared | own[component]
        assert len(c["args"]) == len(set(c["args"]))
        ports = {p["name"]: p["containerPort"] for p in c["ports"]}
        assert ports["health"] == 8081
        assert ports["metrics"] == 8443
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
        # Liveness waits for the start (a restart mid-rollout left no Ready webhook).
        startup = c["startupProbe"]
        assert startup["httpGet"] == {"path": "/healthz", "port": "health"}
        assert startup["periodSeconds"] * startup["failureThreshold"] >= 120
        assert "initialDelaySeconds" not in c["livenessProbe"]
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
        assert c["resources"]["requests"]


@toggles(VALID)
def test_metrics_cert_secret_is_mounted_exactly_when_cert_manager_tls(t: Toggles) -> None:
    for deployment in deployments(t).values():
        mount = mounts(deployment).get(METRICS_CERT_DIR)
        if t.cert_manager_tls:
            assert mount is not None
            assert mount["readOnly"] is True
            assert volumes(deployment)[mount["name"]]["secret"]["secretName"] == (
                "metrics-server-cert"
            )
        else:
            assert mount is None
        assert "/tmp" in mounts(deployment), "a writable /tmp under the read-only root"


@toggles([t for t in VALID if t.webhook])
def test_webhook_serving_cert_comes_from_cert_manager_or_your_secret(t: Toggles) -> None:
    deployment = deployments(t)["webhook"]
    mount = mounts(deployment)[WEBHOOK_CERT_DIR]
    secret = volumes(deployment)[mount["name"]]["secret"]["secretName"]
    assert secret == ("webhook-server-cert" if t.certmanager else BYO_SECRET)


@toggles(VALID)
def test_certificates_follow_cert_manager_webhook_and_metrics_tls(t: Toggles) -> None:
    rendered = t.render()
    expected = set()
    if t.certmanager and (t.webhook or t.cert_manager_tls):
        expected.add("kube-headroom-ca")
        if t.webhook:
            expected.add("kube-headroom-webhook-cert")
        if t.cert_manager_tls:
            expected.add("kube-headroom-metrics-cert")
    assert names(rendered, "Certificate") == expected
    issuers = names(rendered, "Issuer")
    assert issuers == ({"kube-headroom-selfsigned", "kube-headroom-ca"} if expected else set())


@toggles(VALID)
def test_webhook_configurations_trust_the_right_ca(t: Toggles) -> None:
    rendered = t.render()
    configurations = find_all(rendered, "MutatingWebhookConfiguration") + find_all(
        rendered, "ValidatingWebhookConfiguration"
    )
    assert len(configurations) == (2 if t.webhook else 0)
    for configuration in configurations:
        annotations = configuration["metadata"].get("annotations", {})
        for hook in configuration["webhooks"]:
            if t.certmanager:
                assert annotations["cert-manager.io/inject-ca-from"] == (
                    f"{NAMESPACE}/kube-headroom-webhook-cert"
                )
                assert "caBundle" not in hook["clientConfig"]
            else:
                assert "cert-manager.io/inject-ca-from" not in annotations
                assert hook["clientConfig"]["caBundle"] == BYO_CA_BUNDLE


@toggles(VALID)
def test_service_monitors_verify_tls_when_cert_manager_tls(t: Toggles) -> None:
    monitors = find_all(t.render(), "ServiceMonitor")
    if not t.prometheus:
        assert monitors == []
        return
    assert len(monitors) == (2 if t.webhook else 1)
    for monitor in monitors:
        (endpoint,) = monitor["spec"]["endpoints"]
        assert endpoint["scheme"] == "https"
        assert endpoint["path"] == "/metrics"
        assert endpoint["authorization"]["credentials"]["key"] == "token"
        # The series' own namespace and pod labels name managed pods; they must survive.
        assert endpoint["honorLabels"] is True
        tls = endpoint["tlsConfig"]
        if t.cert_manager_tls:
            assert "insecureSkipVerify" not in tls
            assert tls["ca"]["secret"] == {"name": "metrics-server-cert", "key": "ca.crt"}
            assert tls["cert"]["secret"] == {"name": "metrics-server-cert", "key": "tls.crt"}
            assert tls["keySecret"] == {"name": "metrics-server-cert", "key": "tls.key"}
        else:
            assert tls == {"insecureSkipVerify": True}


@toggles([t for t in VALID if t.prometheus and t.cert_manager_tls])
def test_service_monitor_server_name_is_a_san_of_the_metrics_cert(t: Toggles) -> None:
    rendered = t.render()
    sans = set(find(rendered, "Certificate", "kube-headroom-metrics-cert")["spec"]["dnsNames"])
    for monitor in find_all(rendered, "ServiceMonitor"):
        assert monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"] in sans


@toggles(VALID)
def test_selectors_reach_their_targets(t: Toggles) -> None:
    rendered = t.render()
    pod_labels = [
        d["spec"]["template"]["metadata"]["labels"] for d in find_all(rendered, "Deployment")
    ]
    for deployment in find_all(rendered, "Deployment"):
        assert labels_match(
            deployment["spec"]["selector"]["matchLabels"],
            deployment["spec"]["template"]["metadata"]["labels"],
        )
    for service in find_all(rendered, "Service"):
        matched = [p for p in pod_labels if labels_match(service["spec"]["selector"], p)]
        assert len(matched) == 1, service["metadata"]["name"]
    for kind in ("PodDisruptionBudget", "NetworkPolicy"):
        for policy in find_all(rendered, kind):
            selector = policy["spec"].get("selector") or policy["spec"]["podSelector"]
            assert any(labels_match(selector["matchLabels"], p) for p in pod_labels)
    for monitor in find_all(rendered, "ServiceMonitor"):
        matched = [
            s
            for s in find_all(rendered, "Service")
            if labels_match(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
        ]
        assert [p["name"] for s in matched for p in s["spec"]["ports"]] == ["metrics"]


@toggles(VALID)
def test_bindings_name_rendered_roles_and_service_accounts(t: Toggles) -> None:
    rendered = t.render()
    accounts = names(rendered, "ServiceAccount")
    for kind, role_kind in (("ClusterRoleBinding", "ClusterRole"), ("RoleBinding", "Role")):
        for binding in find_all(rendered, kind):
            assert binding["roleRef"]["name"] in names(rendered, role_kind)
            for subject in binding["subjects"]:
                assert subject["name"] in accounts
    for deployment in find_all(rendered, "Deployment"):
        assert deployment["spec"]["template"]["spec"]["serviceAccountName"] in accounts


@toggles(VALID)
def test_optional_objects_follow_their_toggles(t: Toggles) -> None:
    rendered = t.render()
    components = {"reconciler", "webhook"} if t.webhook else {"reconciler"}
    assert names(rendered, "NetworkPolicy") == (
        {f"kube-headroom-{c}" for c in components} if t.network_policy else set()
    )
    assert names(rendered, "PrometheusRule") == ({"kube-headroom"} if t.prometheus else set())
    assert names(rendered, "HeadroomConfig") == ({"cluster"} if t.headroom_config else set())
    # One replica by default: a PodDisruptionBudget would block every drain.
    assert find_all(rendered, "PodDisruptionBudget") == []
