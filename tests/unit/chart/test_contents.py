"""What individual renderings contain: RBAC, webhooks, services, certificates, image, config."""

from typing import Any

import pytest
import yaml

from app.core.config import DEFAULT_SETTINGS, parse_config, validate_config
from reconciler.outcomes import POLICY_STOPS
from tests.unit.chart.builders import chart_values
from tests.unit.chart.helm import CHART, CRD_CHART, NAMESPACE, Manifest, render
from tests.unit.chart.objects import container, find, find_all, names, rule_triples, webhook
from tests.unit.dashboards.promql import RESIZE_RESULTS, unknown_series

MANAGED = {"matchLabels": {"kube-headroom.dev/mode": "managed"}}
NOT_OWN_NAMESPACE = {
    "key": "kubernetes.io/metadata.name",
    "operator": "NotIn",
    "values": [NAMESPACE],
}


# Their controllers say which VPA targets a pod (app.core.owners).
CONTROLLERS = (("apps", "replicasets"), ("batch", "jobs"))


def default() -> tuple[Manifest, ...]:
    return render(chart_values())


def test_reconciler_cluster_role_grants_exactly_what_it_needs() -> None:
    role = find(default(), "ClusterRole", "kube-headroom-reconciler")
    read = {"get", "list", "watch"}
    expected = {
        *(("", r, v) for r in ("pods", "nodes", "namespaces", "limitranges") for v in read),
        *(("autoscaling.k8s.io", "verticalpodautoscalers", v) for v in read),
        *((group, r, v) for group, r in CONTROLLERS for v in read),
        ("", "pods/resize", "patch"),
        ("", "pods", "patch"),
        ("", "events", "create"),
        *(("kube-headroom.dev", "headroomconfigs", v) for v in read),
        *(("kube-headroom.dev", "headroomconfigs/status", v) for v in ("get", "update", "patch")),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }
    assert rule_triples(role) == expected


def test_reconciler_never_updates_or_deletes_pods() -> None:
    role = find(default(), "ClusterRole", "kube-headroom-reconciler")
    pod_verbs = {v for g, r, v in rule_triples(role) if (g, r) == ("", "pods")}
    assert pod_verbs.isdisjoint({"update", "delete", "create", "deletecollection"})


def test_leader_election_role_is_namespaced_to_the_release() -> None:
    role = find(default(), "Role", "kube-headroom-reconciler-leader-election")
    assert role["metadata"]["namespace"] == NAMESPACE
    leases = {v for g, r, v in rule_triples(role) if r == "leases"}
    assert leases == {"get", "create", "update"}
    binding = find(default(), "RoleBinding", "kube-headroom-reconciler-leader-election")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-headroom-reconciler", "namespace": NAMESPACE}
    ]


def test_webhook_cluster_role_is_read_only_plus_metrics_auth() -> None:
    role = find(default(), "ClusterRole", "kube-headroom-webhook")
    read = {"get", "list", "watch"}
    assert rule_triples(role) == {
        *(
            ("", r, v)
            for r in ("namespaces", "resourcequotas", "limitranges", "nodes")
            for v in read
        ),
        *(("autoscaling.k8s.io", "verticalpodautoscalers", v) for v in read),
        *((group, r, v) for group, r in CONTROLLERS for v in read),
        *(("kube-headroom.dev", "headroomconfigs", v) for v in read),
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }


def test_webhook_reads_only_the_reconcilers_lease_in_the_release_namespace() -> None:
    role = find(default(), "Role", "kube-headroom-webhook-reconciler-lease")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert role["rules"] == [
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["kube-headroom-reconciler"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    binding = find(default(), "RoleBinding", "kube-headroom-webhook-reconciler-lease")
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-headroom-webhook", "namespace": NAMESPACE}
    ]


def test_metrics_reader_grants_get_on_the_metrics_url() -> None:
    role = find(default(), "ClusterRole", "kube-headroom-metrics-reader")
    assert role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_scraper_identity_is_bound_to_metrics_reader() -> None:
    rendered = render(chart_values(prometheus=True))
    binding = find(rendered, "ClusterRoleBinding", "kube-headroom-metrics-scraper")
    assert binding["roleRef"]["name"] == "kube-headroom-metrics-reader"
    token = find(rendered, "Secret", "kube-headroom-metrics-scraper-token")
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == (
        "kube-headroom-metrics-scraper"
    )


COMMON_WEBHOOK = {
    "admissionReviewVersions": ["v1"],
    "sideEffects": "None",
    "matchPolicy": "Equivalent",
    "timeoutSeconds": 5,
}


@pytest.mark.parametrize(
    ("kind", "name", "path", "operations", "resource", "failure_policy"),
    [
        (
            "MutatingWebhookConfiguration",
            "pods.mutate.kube-headroom.dev",
            "/mutate/pods",
            ["CREATE"],
            "pods",
            "Ignore",
        ),
        (
            "ValidatingWebhookConfiguration",
            "headroomconfigs.validate.kube-headroom.dev",
            "/validate/headroomconfigs",
            ["CREATE", "UPDATE"],
            "headroomconfigs",
            "Fail",
        ),
        (
            "ValidatingWebhookConfiguration",
            "resourcequotas.validate.kube-headroom.dev",
            "/validate/resourcequotas",
            ["CREATE", "UPDATE"],
            "resourcequotas",
            "Ignore",
        ),
        (
            "ValidatingWebhookConfiguration",
            "namespaces.validate.kube-headroom.dev",
            "/validate/namespaces",
            ["CREATE", "UPDATE"],
            "namespaces",
            "Ignore",
        ),
    ],
    ids=[
        "mutate-pods",
        "validate-headroomconfigs",
        "validate-resourcequotas",
        "validate-namespaces",
    ],
)
def test_webhook_is_explicit_about_every_setting(
    kind: str,
    name: str,
    path: str,
    operations: list[str],
    resource: str,
    failure_policy: str,
) -> None:
    configuration = find_all(default(), kind)
    (hook,) = [webhook(c, name) for c in configuration]
    assert {k: hook[k] for k in COMMON_WEBHOOK} == COMMON_WEBHOOK
    assert hook["failurePolicy"] == failure_policy
    assert hook["clientConfig"]["service"] == {
        "name": "kube-headroom-webhook",
        "namespace": NAMESPACE,
        "path": path,
        "port": 443,
    }
    (rule,) = hook["rules"]
    assert rule["operations"] == operations
    assert rule["resources"] == [resource]


def test_pod_mutation_is_scoped_to_managed_namespaces_and_skips_opted_out_pods() -> None:
    mutating = find(default(), "MutatingWebhookConfiguration", "kube-headroom-mutating")
    hook = webhook(mutating, "pods.mutate.kube-headroom.dev")
    assert hook["namespaceSelector"] == MANAGED | {"matchExpressions": [NOT_OWN_NAMESPACE]}
    assert hook["objectSelector"] == {
        "matchExpressions": [
            {"key": "kube-headroom.dev/mode", "operator": "NotIn", "values": ["unmanaged"]}
        ]
    }


def test_headroomconfig_validation_targets_the_crd_version() -> None:
    validating = find(default(), "ValidatingWebhookConfiguration", "kube-headroom-validating")
    (rule,) = webhook(validating, "headroomconfigs.validate.kube-headroom.dev")["rules"]
    assert rule["apiGroups"] == ["kube-headroom.dev"]
    assert rule["apiVersions"] == ["v1alpha1"]


def test_namespace_validation_selects_by_the_enrolment_label() -> None:
    validating = find(default(), "ValidatingWebhookConfiguration", "kube-headroom-validating")
    hook = webhook(validating, "namespaces.validate.kube-headroom.dev")
    assert hook["objectSelector"] == MANAGED
    assert hook["namespaceSelector"] == {"matchExpressions": [NOT_OWN_NAMESPACE]}


def test_custom_namespace_selector_reaches_every_namespace_scoped_webhook() -> None:
    selector = {
        "matchLabels": {"team": "platform"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["batch"]}],
    }
    rendered = render(chart_values(extra={"webhook": {"namespaceSelector": selector}}))
    mutating = find(rendered, "MutatingWebhookConfiguration", "kube-headroom-mutating")
    validating = find(rendered, "ValidatingWebhookConfiguration", "kube-headroom-validating")
    scoped = {
        "matchLabels": {"team": "platform"},
        "matchExpressions": [*selector["matchExpressions"], NOT_OWN_NAMESPACE],
    }
    assert webhook(mutating, "pods.mutate.kube-headroom.dev")["namespaceSelector"] == scoped
    quotas = webhook(validating, "resourcequotas.validate.kube-headroom.dev")
    assert quotas["namespaceSelector"] == scoped
    namespaces = webhook(validating, "namespaces.validate.kube-headroom.dev")
    assert namespaces["objectSelector"] == selector


@pytest.mark.parametrize(
    ("values", "quota_policy", "namespace_policy", "timeout"),
    [
        ({}, "Ignore", "Ignore", 5),
        ({"resourceQuotaFailurePolicy": "Fail"}, "Fail", "Ignore", 5),
        ({"namespaceFailurePolicy": "Fail", "timeoutSeconds": 3}, "Ignore", "Fail", 3),
    ],
    ids=["defaults", "quota-fail", "namespace-fail-short-timeout"],
)
def test_failure_policies_and_timeout_are_values(
    values: dict[str, Any], quota_policy: str, namespace_policy: str, timeout: int
) -> None:
    rendered = render(chart_values(extra={"webhook": values}))
    validating = find(rendered, "ValidatingWebhookConfiguration", "kube-headroom-validating")
    quotas = webhook(validating, "resourcequotas.validate.kube-headroom.dev")
    namespaces = webhook(validating, "namespaces.validate.kube-headroom.dev")
    assert quotas["failurePolicy"] == quota_policy
    assert namespaces["failurePolicy"] == namespace_policy
    assert {h["timeoutSeconds"] for h in validating["webhooks"]} == {timeout}


def test_services_expose_webhook_on_443_and_metrics_on_8443() -> None:
    rendered = default()
    assert names(rendered, "Service") == {
        "kube-headroom-webhook",
        "kube-headroom-reconciler-metrics",
        "kube-headroom-webhook-metrics",
    }
    (port,) = find(rendered, "Service", "kube-headroom-webhook")["spec"]["ports"]
    assert (port["port"], port["targetPort"]) == (443, "webhook")
    webhook_ports = {
        p["name"]: p["containerPort"]
        for p in container(find(rendered, "Deployment", "kube-headroom-webhook"))["ports"]
    }
    assert webhook_ports["webhook"] == 9443
    for name in ("kube-headroom-reconciler-metrics", "kube-headroom-webhook-metrics"):
        (port,) = find(rendered, "Service", name)["spec"]["ports"]
        assert (port["port"], port["targetPort"]) == (8443, "metrics")


def test_certificates_chain_to_a_chart_ca() -> None:
    rendered = render(chart_values(cert_manager_tls=True))
    assert find(rendered, "Issuer", "kube-headroom-selfsigned")["spec"] == {"selfSigned": {}}
    ca = find(rendered, "Certificate", "kube-headroom-ca")["spec"]
    assert ca["isCA"] is True
    assert ca["issuerRef"]["name"] == "kube-headroom-selfsigned"
    ca_issuer = find(rendered, "Issuer", "kube-headroom-ca")["spec"]
    assert ca_issuer == {"ca": {"secretName": ca["secretName"]}}
    for name in ("kube-headroom-webhook-cert", "kube-headroom-metrics-cert"):
        assert find(rendered, "Certificate", name)["spec"]["issuerRef"]["name"] == (
            "kube-headroom-ca"
        )


def test_webhook_certificate_names_the_webhook_service() -> None:
    spec = find(default(), "Certificate", "kube-headroom-webhook-cert")["spec"]
    assert spec["secretName"] == "webhook-server-cert"
    assert spec["dnsNames"] == [
        f"kube-headroom-webhook.{NAMESPACE}.svc",
        f"kube-headroom-webhook.{NAMESPACE}.svc.cluster.local",
    ]


def test_metrics_certificate_names_both_metrics_services_and_allows_client_auth() -> None:
    spec = find(
        render(chart_values(cert_manager_tls=True)), "Certificate", "kube-headroom-metrics-cert"
    )["spec"]
    assert spec["secretName"] == "metrics-server-cert"
    assert spec["dnsNames"] == [
        f"kube-headroom-{component}-metrics.{NAMESPACE}.svc{suffix}"
        for component in ("reconciler", "webhook")
        for suffix in ("", ".cluster.local")
    ]
    assert {"server auth", "client auth"} <= set(spec["usages"])


def test_service_monitor_server_name_matches_its_service() -> None:
    rendered = render(chart_values(prometheus=True, cert_manager_tls=True))
    for component in ("reconciler", "webhook"):
        monitor = find(rendered, "ServiceMonitor", f"kube-headroom-{component}")
        assert monitor["spec"]["endpoints"][0]["tlsConfig"]["serverName"] == (
            f"kube-headroom-{component}-metrics.{NAMESPACE}.svc"
        )


def test_prometheus_additional_labels_reach_monitors_and_rules() -> None:
    labels = {"release": "kube-prometheus-stack"}
    rendered = render(
        chart_values(prometheus=True, extra={"prometheus": {"additionalLabels": labels}})
    )
    for kind in ("ServiceMonitor", "PrometheusRule"):
        for obj in find_all(rendered, kind):
            assert obj["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def alerts() -> dict[str, dict[str, Any]]:
    rule = find(render(chart_values(prometheus=True)), "PrometheusRule", "kube-headroom")
    return {r["alert"]: r for group in rule["spec"]["groups"] for r in group["rules"]}


@pytest.mark.parametrize(
    ("alert", "must_query", "runbook_section"),
    [
        ("HeadroomResizesDeferred", 'headroom_resizes_total{result="Deferred"}', "Resize outcomes"),
        ("HeadroomResizeQuotaDenied", 'headroom_resizes_total{result="quota-denied"}', "Preflight"),
        ("HeadroomReconcileSlow", "histogram_quantile(0.99", "Failure modes"),
    ],
    ids=["deferred", "quota-denied", "reconcile-p99"],
)
def test_runbook_alerts_point_at_the_section_that_fixes_them(
    alert: str, must_query: str, runbook_section: str
) -> None:
    rule = alerts()[alert]
    assert must_query in rule["expr"]
    assert runbook_section in rule["annotations"]["description"]
    assert "runbook" in rule["annotations"]["description"]


def test_alerts_query_only_exported_series_and_result_values() -> None:
    rules = alerts()
    assert len(rules) == 3
    for rule in rules.values():
        assert unknown_series(rule["expr"], external={}) == set()
        for result in ("Deferred", "quota-denied"):
            if f'result="{result}"' in rule["expr"]:
                assert result in RESIZE_RESULTS


def test_network_policies_open_webhook_to_all_and_metrics_to_labelled_namespaces() -> None:
    scrapers = {"matchLabels": {"monitoring": "yes"}}
    rendered = render(
        chart_values(
            network_policy=True, extra={"networkPolicy": {"metricsNamespaceSelector": scrapers}}
        )
    )
    webhook_policy = find(rendered, "NetworkPolicy", "kube-headroom-webhook")["spec"]
    assert webhook_policy["policyTypes"] == ["Ingress", "Egress"]
    open_rule, metrics_rule = webhook_policy["ingress"]
    assert "from" not in open_rule
    assert open_rule["ports"] == [{"port": "webhook", "protocol": "TCP"}]
    assert metrics_rule["from"] == [{"namespaceSelector": scrapers}]
    assert metrics_rule["ports"] == [{"port": "metrics", "protocol": "TCP"}]
    reconciler_policy = find(rendered, "NetworkPolicy", "kube-headroom-reconciler")["spec"]
    assert reconciler_policy["ingress"] == [metrics_rule]
    for policy in (webhook_policy, reconciler_policy):
        (egress,) = policy["egress"]
        assert {p["port"] for p in egress["ports"]} == {443, 6443}
        assert "to" not in egress


def test_network_policy_egress_can_be_pinned_to_api_server_cidrs() -> None:
    rendered = render(
        chart_values(
            network_policy=True, extra={"networkPolicy": {"apiServerCIDRs": ["10.0.0.1/32"]}}
        )
    )
    (egress,) = find(rendered, "NetworkPolicy", "kube-headroom-reconciler")["spec"]["egress"]
    assert egress["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]


@pytest.mark.parametrize(
    ("replicas", "webhook_on", "budgets"),
    [
        (1, True, set()),
        (2, True, {"kube-headroom-reconciler", "kube-headroom-webhook"}),
        (3, False, {"kube-headroom-reconciler"}),
    ],
    ids=["single-replica", "two-replicas", "three-replicas-no-webhook"],
)
def test_disruption_budgets_only_with_more_than_one_replica(
    replicas: int, webhook_on: bool, budgets: set[str]
) -> None:
    rendered = render(chart_values(webhook=webhook_on, extra={"replicas": replicas}))
    assert names(rendered, "PodDisruptionBudget") == budgets
    for deployment in find_all(rendered, "Deployment"):
        assert deployment["spec"]["replicas"] == replicas
    for budget in find_all(rendered, "PodDisruptionBudget"):
        assert budget["spec"]["minAvailable"] == 1


def test_webhook_replicas_scale_the_webhook_alone() -> None:
    rendered = render(chart_values(webhook=True, extra={"webhook": {"replicas": 3}}))
    assert find(rendered, "Deployment", "kube-headroom-webhook")["spec"]["replicas"] == 3
    assert find(rendered, "Deployment", "kube-headroom-reconciler")["spec"]["replicas"] == 1
    # The webhook's pods may be drained one at a time; a lone reconciler has no budget.
    assert names(rendered, "PodDisruptionBudget") == {"kube-headroom-webhook"}


@pytest.mark.parametrize(
    ("image", "expected"),
    [
        ({}, "ghcr.io/karlkfi/kube-headroom:0.1.0"),
        (
            {"repository": "registry.example/headroom", "tag": "dev"},
            "registry.example/headroom:dev",
        ),
        (
            {"tag": "dev", "digest": "sha256:" + "a" * 64},
            "ghcr.io/karlkfi/kube-headroom@sha256:" + "a" * 64,
        ),
    ],
    ids=["app-version", "repository-and-tag", "digest-pins"],
)
def test_image_reference(image: dict[str, str], expected: str) -> None:
    rendered = render(chart_values(extra={"image": image}))
    for deployment in find_all(rendered, "Deployment"):
        assert container(deployment)["image"] == expected


def test_resources_apply_to_both_processes() -> None:
    resources = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    rendered = render(chart_values(extra={"resources": resources}))
    for deployment in find_all(rendered, "Deployment"):
        assert container(deployment)["resources"] == resources


def test_headroom_config_renders_no_field_an_operator_changes() -> None:
    config = find(render(chart_values(headroom_config=True)), "HeadroomConfig", "cluster")
    assert config["apiVersion"] == "kube-headroom.dev/v1alpha1"
    # Every field, dryRun among them, is left to the CRD's defaults, so a re-applied render
    # never resets what an operator patched.
    assert config["spec"] == {}
    assert parse_config(config) == DEFAULT_SETTINGS
    assert DEFAULT_SETTINGS.dry_run
    assert validate_config(config).allowed


FLUX_PRUNE = "kustomize.toolkit.fluxcd.io/prune"
FLUX_SSA = "kustomize.toolkit.fluxcd.io/ssa"


@pytest.mark.parametrize(
    ("spec", "annotations"),
    [
        # Nothing in Git to enforce: created once, then the operator's.
        pytest.param({}, {FLUX_PRUNE: "disabled", FLUX_SSA: "IfNotPresent"}, id="no-field-set"),
        # A field set in the values is one every sync enforces.
        pytest.param({"dryRun": False}, {FLUX_PRUNE: "disabled"}, id="dry-run-set"),
    ],
)
def test_headroom_config_under_helm_template(
    spec: dict[str, Any], annotations: dict[str, str]
) -> None:
    # No cluster to ask: GitOps tools apply it like any object. A Helm hook would become an
    # Argo CD sync hook, deleted and created again at every sync; Flux's annotations keep
    # it as an install does (see the runbook, GitOps).
    values = chart_values(headroom_config=True, extra={"headroomConfig": {"spec": spec}})
    config = find(render(values), "HeadroomConfig", "cluster")
    assert config["metadata"]["annotations"] == annotations


def test_headroom_config_spec_passes_through() -> None:
    spec = {"dryRun": False, "deadband": {"growPercent": 20}, "excludedNamespaces": ["batch"]}
    rendered = render(chart_values(headroom_config=True, extra={"headroomConfig": {"spec": spec}}))
    config = find(rendered, "HeadroomConfig", "cluster")
    assert config["spec"] == spec
    assert validate_config(config).allowed


def test_values_schema_knows_exactly_the_crd_spec_fields() -> None:
    schema = yaml.safe_load((CHART / "values.schema.json").read_text())
    chart_spec = schema["properties"]["headroomConfig"]["properties"]["spec"]["properties"]
    crd = find(
        render({}, chart=CRD_CHART), "CustomResourceDefinition", "headroomconfigs.kube-headroom.dev"
    )
    (version,) = crd["spec"]["versions"]
    crd_spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(chart_spec) == set(crd_spec)
    for parent in ("deadband", "rateLimits", "webhook"):
        assert set(chart_spec[parent]["properties"]) == set(crd_spec[parent]["properties"])
    chart_pool = chart_spec["nodePools"]["items"]["properties"]
    crd_pool = crd_spec["nodePools"]["items"]["properties"]
    assert set(chart_pool) == set(crd_pool)
    assert set(chart_pool["deadband"]["properties"]) == set(crd_pool["deadband"]["properties"])


def test_the_reconciler_reads_the_resize_policy_s_stops_in_its_own_words() -> None:
    """What the reconciler takes for a stop landing in flight (reconciler.outcomes) is what
    the chart's resize policy says, or the API server's words for its missing params."""
    [policy] = [
        obj
        for obj in render({})
        if obj["kind"] == "ValidatingAdmissionPolicy"
        and obj["metadata"]["name"].endswith("-pod-resizes")
    ]
    messages = [v["message"] for v in policy["spec"]["validations"]]
    own = [stop for stop in POLICY_STOPS if not stop.startswith("no params")]
    assert all(any(stop in message for message in messages) for stop in own), messages
    # Only the gates a stop button changes are stops; the field check stays a bug.
    assert len(own) == len(messages) - 1
    [binding] = [
        obj
        for obj in render({})
        if obj["kind"] == "ValidatingAdmissionPolicyBinding"
        and obj["spec"]["policyName"] == policy["metadata"]["name"]
    ]
    assert binding["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"
