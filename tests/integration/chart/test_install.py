"""The install path of the runbook, on the real control plane: `make install`,
`kubectl apply -k config/samples`, `make deploy IMG=…`, the operator chart's optional
parts, `make undeploy`, and `make uninstall` (which keeps the CRD and the live config);
the chart under `helm template | kubectl apply`; the runbook's troubleshooting commands and
its uninstall recipe.

The webhook configurations a deploy registers point at simulated pods that serve nothing,
and the HeadroomConfig one fails closed: every test removes the release before it ends.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.labels import CONFIG_NAME, MODE_LABEL, MODE_MANAGED, STATUS_ANNOTATION
from devcluster.binaries import kubernetes_version
from tests.integration.chart.conftest import CRD_RELEASE, release_pods
from tests.integration.conftest import CRD, REPO, Cluster, eventually, run_helm
from tests.integration.rbac import RELEASE, RELEASE_NAMESPACE
from tests.integration.reconciler.manifests import pod
from tests.integration.runbook import run_shell, runbook_commands, shell_environ

# A registry with a port: the port is not the tag.
IMG = "registry.example:5000/kube-headroom:test"
CA_INJECTION = "cert-manager.io/inject-ca-from"

Manifest = dict[str, Any]


def make(cluster: Cluster, helm_bin: Path, target: str, *variables: str) -> str:
    """The real `make` target, aimed at the test cluster (KUBECONFIG, PATH, HELM)."""
    result = subprocess.run(
        ["make", "--no-print-directory", target, *variables],
        cwd=REPO,
        env={**cluster.environ(), "HELM": str(helm_bin)},
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert result.returncode == 0, f"make {target} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def release_objects(cluster: Cluster, helm_bin: Path) -> list[Manifest]:
    """What the release rendered: its manifest and its hooks, as helm recorded them."""
    docs: list[Manifest] = []
    for what in ("manifest", "hooks"):
        text = run_helm(cluster, helm_bin, "get", what, RELEASE, "--namespace", RELEASE_NAMESPACE)
        docs.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return docs


def _key(obj: Manifest) -> tuple[str, str, str, str]:
    group = obj["apiVersion"].rpartition("/")[0]
    meta = obj["metadata"]
    return group, obj["kind"], meta.get("namespace", ""), meta["name"]


def stored(cluster: Cluster, objects: Sequence[Manifest]) -> dict[tuple[str, str, str, str], Any]:
    """The server's copy of each object, by identity; a missing one fails kubectl."""
    kubectl = [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}"]
    result = subprocess.run(
        [*kubectl, "get", "-f", "-", "-o", "json"],
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    found = json.loads(result.stdout)
    items = found["items"] if found["kind"] == "List" else [found]
    return {_key(item): item for item in items}


def differences(rendered: Any, server: Any, path: str = "") -> list[str]:
    """Where the server's copy lacks or changed a rendered field (defaults may be added)."""
    if isinstance(rendered, dict):
        if not isinstance(server, dict):
            return [f"{path}: {server!r}"]
        return [
            problem
            for key, value in rendered.items()
            for problem in (
                differences(value, server[key], f"{path}.{key}")
                if key in server
                else [f"{path}.{key}: dropped"]
            )
        ]
    if isinstance(rendered, list):
        if not isinstance(server, list) or len(server) != len(rendered):
            return [f"{path}: {server!r}"]
        return [
            problem
            for index, (item, kept) in enumerate(zip(rendered, server, strict=True))
            for problem in differences(item, kept, f"{path}[{index}]")
        ]
    return [] if rendered == server else [f"{path}: {server!r}, rendered {rendered!r}"]


def assert_stored_as_rendered(cluster: Cluster, objects: Sequence[Manifest]) -> None:
    """Every rendered object exists, and the API server kept every field it was given:
    nothing was rejected, and no CRD schema pruned a field away."""
    copies = stored(cluster, objects)
    assert set(copies) == {_key(obj) for obj in objects}
    problems = [
        f"{'/'.join(_key(obj)[1:])}{problem}"
        for obj in objects
        for problem in differences(obj, copies[_key(obj)])
    ]
    assert problems == []


def assert_available(cluster: Cluster, objects: Sequence[Manifest]) -> None:
    for obj in objects:
        if obj["kind"] == "Deployment":
            cluster.kubectl(
                "wait", f"deployment/{obj['metadata']['name']}",
                f"--namespace={RELEASE_NAMESPACE}", "--for=condition=Available", "--timeout=60s",
            )  # fmt: skip


def secret_token(cluster: Cluster, name: str) -> str:
    return cluster.kubectl(
        "get", "secret", name, f"--namespace={RELEASE_NAMESPACE}", "-o", "jsonpath={.data.token}"
    )


def assert_tokens_issued(cluster: Cluster, objects: Sequence[Manifest]) -> None:
    """Service-account-token Secrets get a token from the controller manager."""
    for obj in objects:
        if obj["kind"] == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
            name = obj["metadata"]["name"]
            eventually(partial(secret_token, cluster, name), what=f"a token in Secret {name}")


def kinds(objects: Sequence[Manifest]) -> set[str]:
    return {obj["kind"] for obj in objects}


def hcfg_columns(cluster: Cluster) -> dict[str, str]:
    """`kubectl get hcfg cluster` as printed, by column (a column may be blank)."""
    header, row = cluster.kubectl("get", "hcfg", CONFIG_NAME).rstrip("\n").splitlines()
    columns = [(match.group(), match.start()) for match in re.finditer(r"\S+", header)]
    ends = [start for _, start in columns[1:]] + [len(row)]
    return {name: row[start:end].strip() for (name, start), end in zip(columns, ends, strict=True)}


def test_make_install_sample_config_and_uninstall_keeps_both(
    control_plane: Cluster, helm: Path, clean_install: None
) -> None:
    make(control_plane, helm, "install")
    control_plane.kubectl("wait", f"crd/{CRD}", "--for=condition=Established", "--timeout=60s")

    applied = control_plane.kubectl("apply", "-k", "config/samples")
    assert applied.strip() == "headroomconfig.kube-headroom.dev/cluster created"
    columns = hcfg_columns(control_plane)
    assert columns["NAME"] == CONFIG_NAME
    assert columns["DRYRUN"] == "true"

    make(control_plane, helm, "uninstall")
    assert CRD_RELEASE not in run_helm(control_plane, helm, "list", "--all-namespaces", "-q")
    crd = json.loads(control_plane.kubectl("get", "crd", CRD, "-o", "json"))
    assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
    assert hcfg_columns(control_plane)["DRYRUN"] == "true"


def test_make_deploy_installs_every_object_and_undeploy_removes_them(
    control_plane: Cluster, helm: Path, clean_install: None
) -> None:
    make(control_plane, helm, "install")
    make(control_plane, helm, "deploy", f"IMG={IMG}")

    objects = release_objects(control_plane, helm)
    # The install asks the server, which serves ValidatingAdmissionPolicy: the reconciler's
    # pod-write policy is part of it.
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= kinds(objects)
    assert_stored_as_rendered(control_plane, objects)
    assert_available(control_plane, objects)
    deployments = [o for o in objects if o["kind"] == "Deployment"]
    assert {d["metadata"]["name"] for d in deployments} == {
        f"{RELEASE}-reconciler",
        f"{RELEASE}-webhook",
    }
    for deployment in deployments:
        (container,) = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == IMG

    # cert-manager injects the CA of the Certificate whose Secret the webhook serves from.
    certificate = f"{RELEASE}-webhook-cert"
    for kind in ("mutating", "validating"):
        configuration = json.loads(
            control_plane.kubectl(
                "get", f"{kind}webhookconfiguration", f"{RELEASE}-{kind}", "-o", "json"
            )
        )
        annotations = configuration["metadata"]["annotations"]
        assert annotations[CA_INJECTION] == f"{RELEASE_NAMESPACE}/{certificate}"
    secret_name = control_plane.kubectl(
        "get", "certificates.cert-manager.io", certificate, f"--namespace={RELEASE_NAMESPACE}",
        "-o", "jsonpath={.spec.secretName}",
    )  # fmt: skip
    webhook = next(d for d in deployments if d["metadata"]["name"] == f"{RELEASE}-webhook")
    volumes = webhook["spec"]["template"]["spec"]["volumes"]
    assert {"name": "webhook-certs", "secret": {"secretName": secret_name}} in volumes

    make(control_plane, helm, "undeploy")
    left = control_plane.kubectl(
        "get", "-f", "-", "--ignore-not-found", "-o", "name",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
    )  # fmt: skip
    assert left.strip() == ""
    eventually(lambda: not release_pods(control_plane), what="the release's pods to go")


VARIANTS = [
    pytest.param(
        ["prometheus.enable=true", "metrics.certManagerTLS=true"],
        {"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"},
        id="prometheus-and-metrics-tls",
    ),
    pytest.param(
        ["networkPolicy.enable=true", "replicas=2"],
        {"NetworkPolicy", "PodDisruptionBudget"},
        id="network-policies-and-disruption-budgets",
    ),
    pytest.param(
        ["webhook.enable=false", "headroomConfig.create=true"],
        {"HeadroomConfig"},
        id="webhook-off-with-config",
    ),
]


@pytest.mark.parametrize(("settings", "expected_kinds"), VARIANTS)
def test_operator_chart_variant_is_accepted_as_rendered(
    control_plane: Cluster,
    helm: Path,
    clean_install: None,
    settings: list[str],
    expected_kinds: set[str],
) -> None:
    """The optional parts validate against the real API server and the real third-party
    CRDs (cert-manager, Prometheus Operator), and their fields survive storage."""
    run_helm(
        control_plane, helm, "upgrade", "--install", RELEASE, "chart/kube-headroom",
        f"--namespace={RELEASE_NAMESPACE}", "--create-namespace", "--wait",
        *(f"--set={setting}" for setting in settings),
    )  # fmt: skip
    objects = release_objects(control_plane, helm)
    assert expected_kinds <= kinds(objects)
    assert_stored_as_rendered(control_plane, objects)
    assert_available(control_plane, objects)
    assert_tokens_issued(control_plane, objects)


def test_headroom_config_create_never_resets_a_live_config(
    control_plane: Cluster, helm: Path, clean_install: None
) -> None:
    """With headroomConfig.create=true, install creates the config; an upgrade with the
    value still set leaves an operator's edits alone; a deleted config comes back."""
    upgrade = [
        "upgrade", "--install", RELEASE, "chart/kube-headroom",
        f"--namespace={RELEASE_NAMESPACE}", "--create-namespace", "--wait",
        # The simulated webhook pods serve nothing; the config webhook would fail closed.
        "--set=webhook.enable=false", "--set=headroomConfig.create=true",
    ]  # fmt: skip

    def config() -> dict[str, Any]:
        stored: dict[str, Any] = json.loads(
            control_plane.kubectl("get", "hcfg", CONFIG_NAME, "-o", "json")
        )
        return stored

    run_helm(control_plane, helm, *upgrade)
    assert config()["spec"]["dryRun"] is True
    # Installed against the cluster, the config is a hook, not part of the release.
    recorded = {
        what: kinds(
            [
                doc
                for doc in yaml.safe_load_all(
                    run_helm(control_plane, helm, "get", what, RELEASE, "-n", RELEASE_NAMESPACE)
                )
                if doc
            ]
        )
        for what in ("hooks", "manifest")
    }
    assert "HeadroomConfig" in recorded["hooks"]
    assert "HeadroomConfig" not in recorded["manifest"]
    control_plane.kubectl(
        "patch", "hcfg", CONFIG_NAME, "--type=merge", "-p", '{"spec":{"dryRun":false}}'
    )
    enforcing = config()

    run_helm(control_plane, helm, *upgrade)
    after = config()
    assert after["spec"]["dryRun"] is False
    assert after["metadata"]["uid"] == enforcing["metadata"]["uid"]
    assert after["metadata"]["generation"] == enforcing["metadata"]["generation"]

    control_plane.kubectl("delete", "hcfg", CONFIG_NAME)
    run_helm(control_plane, helm, *upgrade)
    assert config()["spec"]["dryRun"] is True


@pytest.mark.parametrize(
    "apply",
    [
        pytest.param(["apply", "-f", "-"], id="client-side-apply"),
        # What Flux and Argo CD's server-side sync send: conflicts forced onto the applier.
        pytest.param(["apply", "--server-side", "--force-conflicts", "-f", "-"], id="server-side"),
    ],
)
def test_helm_template_applied_again_keeps_an_enforcing_config_enforcing(
    control_plane: Cluster, helm: Path, clean_install: None, apply: list[str]
) -> None:
    """GitOps: the chart rendered by `helm template` (where `lookup` sees no cluster) and
    applied with kubectl, enforced with the runbook's patch, then synced twice more: the
    config stays enforcing, the same object at the same generation."""
    rendered = run_helm(
        control_plane, helm, "template", RELEASE, "chart/kube-headroom",
        f"--namespace={RELEASE_NAMESPACE}", f"--kube-version={kubernetes_version()}",
        # The simulated webhook pods serve nothing; the config webhook would fail closed.
        "--set=webhook.enable=false", "--set=headroomConfig.create=true",
    )  # fmt: skip
    objects = [doc for doc in yaml.safe_load_all(rendered) if doc]
    (config,) = [obj for obj in objects if obj["kind"] == "HeadroomConfig"]
    hooks = [key for key in config["metadata"]["annotations"] if key.startswith("helm.sh/")]
    assert hooks == [], "a hook would become a sync hook"
    listed = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})

    def stored_config() -> dict[str, Any]:
        found: dict[str, Any] = json.loads(
            control_plane.kubectl("get", "hcfg", CONFIG_NAME, "-o", "json")
        )
        return found

    control_plane.apply(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
    )
    try:
        control_plane.kubectl(*apply, input=listed)
        assert stored_config()["spec"]["dryRun"] is True  # the CRD's default
        control_plane.kubectl(
            "patch", "hcfg", CONFIG_NAME, "--type", "merge", "-p", '{"spec":{"dryRun":false}}'
        )
        enforcing = stored_config()
        for _ in range(2):
            control_plane.kubectl(*apply, input=listed)
            synced = stored_config()
            assert synced["spec"]["dryRun"] is False
            assert synced["metadata"]["uid"] == enforcing["metadata"]["uid"]
            assert synced["metadata"]["generation"] == enforcing["metadata"]["generation"]
        assert hcfg_columns(control_plane)["DRYRUN"] == "false"
    finally:
        control_plane.kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--wait=false", input=listed
        )


def test_the_troubleshooting_commands_show_a_missing_ca_and_the_webhooks_endpoints(
    control_plane: Cluster, helm: Path, clean_install: None
) -> None:
    """The runbook's Troubleshooting commands, as shown, on a deploy whose CA nobody injects
    (no cert-manager controller runs here) and whose webhook pods have endpoints."""
    make(control_plane, helm, "install")
    make(control_plane, helm, "deploy", f"IMG={IMG}")
    env = shell_environ(control_plane)
    outputs = {}
    for command in runbook_commands("Troubleshooting"):
        result = run_shell(command, env=env)
        assert result.returncode == 0, f"{command}: {result.stderr}"
        outputs[command.split(" -")[0]] = result
    assert outputs["kubectl get mutatingwebhookconfiguration kube-headroom-mutating"].stdout == ""
    certificate = outputs["kubectl get certificate"].stdout.splitlines()
    assert certificate[0].split()[:2] == ["NAME", "READY"]
    assert certificate[1].split()[0] == f"{RELEASE}-webhook-cert"
    assert "True" not in certificate[1]
    header, *slices = outputs["kubectl get endpointslices"].stdout.splitlines()
    assert header.split()[:4] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS"]
    (webhook_slice,) = slices
    _, _, ports, addresses, *_ = webhook_slice.split()
    assert ports == "9443"
    assert addresses != "<unset>"
    assert outputs["kubectl get networkpolicy"].stderr.startswith("No resources found")


def test_the_uninstall_recipe_leaves_nothing_behind(
    control_plane: Cluster, helm: Path, clean_install: None, install_node: str
) -> None:
    """The runbook's Uninstalling commands, as shown, after an install with the config, an
    enrolled namespace and a pod carrying the status annotation."""
    tenant = "team-a"
    make(control_plane, helm, "install")
    run_helm(
        control_plane, helm, "upgrade", "--install", RELEASE, "chart/kube-headroom",
        f"--namespace={RELEASE_NAMESPACE}", "--create-namespace", "--wait",
        "--set=webhook.enable=false", "--set=headroomConfig.create=true",
    )  # fmt: skip
    # Another test on this control plane may have left it terminating.
    control_plane.kubectl("wait", "--for=delete", f"namespace/{tenant}", "--timeout=120s")
    control_plane.kubectl("create", "namespace", tenant)
    try:
        control_plane.kubectl("label", "namespace", tenant, f"{MODE_LABEL}={MODE_MANAGED}")
        web = pod("web-0", namespace=tenant, node=install_node)
        # What the reconciler writes on a pod it manages.
        web["metadata"]["annotations"] = {STATUS_ANNOTATION: '{"targetLimit":"1000m"}'}
        control_plane.apply(web)
        env = shell_environ(control_plane)
        for command in runbook_commands("Uninstalling"):
            result = run_shell(command, env=env)
            assert result.returncode == 0, f"{command}: {result.stderr}"
        control_plane.kubectl(
            "wait", "--for=delete", f"namespace/{RELEASE_NAMESPACE}", "--timeout=120s"
        )

        releases = run_helm(control_plane, helm, "list", "--all-namespaces", "-q").split()
        assert {RELEASE, CRD_RELEASE}.isdisjoint(releases)
        assert control_plane.kubectl("get", "crd", CRD, "--ignore-not-found") == ""
        assert MODE_LABEL not in json.loads(
            control_plane.kubectl("get", "namespace", tenant, "-o", "json")
        )["metadata"].get("labels", {})
        left = json.loads(control_plane.kubectl("get", "pod", "web-0", "-n", tenant, "-o", "json"))
        assert STATUS_ANNOTATION not in left["metadata"].get("annotations", {})
    finally:
        control_plane.kubectl("delete", "namespace", tenant, "--ignore-not-found")
        # The rest of the session, and this module's clean-up, expect the CRD chart.
        run_helm(control_plane, helm, "upgrade", "--install", CRD_RELEASE, f"chart/{CRD_RELEASE}")
        control_plane.kubectl("wait", f"crd/{CRD}", "--for=condition=Established", "--timeout=60s")
