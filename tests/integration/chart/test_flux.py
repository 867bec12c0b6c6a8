"""The runbook's GitOps section against real Flux: source-controller pulls from the local
OCI registry, helm-controller installs the chart (a HelmRelease), kustomize-controller
applies what `helm template` rendered (a Kustomization). Each test does the runbook's
rollout, `kubectl patch hcfg cluster … dryRun:false`, then lets Flux sync again and again.

The release's pods run on a simulated node and serve nothing, so the chart is synced with
its webhook off (the config webhook would fail closed) and without cert-manager's objects.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.core.labels import CONFIG_NAME
from devcluster.addons import Registry, registry_binary
from devcluster.binaries import kubernetes_version
from devcluster.flux import CONFIG_MEDIA_TYPE, CONTENT_MEDIA_TYPE, NAMESPACE, Flux, flux_dir
from tests.integration.conftest import REPO, Cluster, eventually, run_helm
from tests.integration.rbac import RELEASE, RELEASE_NAMESPACE

SYNCS = 3
CHART_VERSION = yaml.safe_load((REPO / "chart/kube-headroom/Chart.yaml").read_text())["version"]
# What the chart is synced with (see the module's docstring).
VALUES = {"webhook": {"enable": False}, "certmanager": {"enable": False}}
CREATE = {"headroomConfig": {"create": True}}
PATCH_ENFORCE = '{"spec":{"dryRun":false}}'
Manifest = dict[str, Any]
Sync = Callable[[list[Manifest]], Manifest]


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    flux_dir()  # builds Flux, and unpacks the registry it syncs from
    registry = Registry(binary=registry_binary(), work_dir=tmp_path_factory.mktemp("registry"))
    registry.start()
    try:
        yield registry
    finally:
        registry.stop()


@pytest.fixture(scope="module")
def flux(
    control_plane: Cluster,
    registry: Registry,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Flux]:
    flux = Flux.start(
        control_plane.kubeconfig, tmp_path_factory.mktemp("flux"), control_plane.kubectl
    )
    control_plane.kubectl(
        "create", "secret", "generic", "registry-ca", f"--namespace={NAMESPACE}",
        f"--from-file=ca.crt={registry.ca_file}",
    )  # fmt: skip
    failed = request.session.testsfailed
    try:
        yield flux
    finally:
        flux.stop()
        if request.session.testsfailed > failed:
            for name in ("source-controller", "kustomize-controller", "helm-controller"):
                print(f"\n--- {name}\n{flux.tail(name)}")


@pytest.fixture
def release_namespace(control_plane: Cluster) -> str:
    """The release's namespace, as an operator creates it before the first sync."""
    control_plane.kubectl("create", "namespace", RELEASE_NAMESPACE, check=False)
    return RELEASE_NAMESPACE


def flux_object(api_version: str, kind: str, name: str, **spec: Any) -> Manifest:
    """A Flux object in its namespace, reconciled hourly unless asked (see `reconciled`)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"interval": "1h", **spec},
    }


def oci_repository(name: str, url: str, tag: str, **spec: Any) -> Manifest:
    return flux_object(
        "source.toolkit.fluxcd.io/v1", "OCIRepository", name,
        url=url, ref={"tag": tag}, certSecretRef={"name": "registry-ca"}, **spec,
    )  # fmt: skip


def reconciled(cluster: Cluster, kind: str, name: str, *, timeout: float = 90) -> Manifest:
    """Ask Flux to reconcile the object now (as `flux reconcile` does) and wait until it
    has, at its current generation, and is Ready."""
    token = uuid.uuid4().hex
    cluster.kubectl(
        "annotate", kind, name, f"--namespace={NAMESPACE}", "--overwrite",
        f"reconcile.fluxcd.io/requestedAt={token}",
    )  # fmt: skip

    def done() -> Manifest | None:
        obj: Manifest = json.loads(
            cluster.kubectl("get", kind, name, f"--namespace={NAMESPACE}", "-o", "json")
        )
        status = obj.get("status", {})
        ready = [c for c in status.get("conditions", []) if c["type"] == "Ready"]
        current = status.get("observedGeneration") == obj["metadata"]["generation"]
        handled = status.get("lastHandledReconcileAt") == token
        return obj if handled and current and ready and ready[0]["status"] == "True" else None

    found: Manifest = eventually(done, timeout=timeout, what=f"{kind}/{name} reconciled")
    return found


def stored_config(cluster: Cluster) -> Manifest:
    found: Manifest = json.loads(
        cluster.kubectl("get", "hcfg", CONFIG_NAME, "-o", "json", "--show-managed-fields")
    )
    return found


def managers(config: Manifest) -> set[str]:
    return {entry["manager"] for entry in config["metadata"]["managedFields"]}


def assert_unchanged(cluster: Cluster, enforcing: Manifest) -> None:
    """The config an operator enforced is the same object, untouched: still enforcing."""
    synced = stored_config(cluster)
    assert synced["spec"]["dryRun"] is False
    assert synced["metadata"]["uid"] == enforcing["metadata"]["uid"]
    assert synced["metadata"]["generation"] == enforcing["metadata"]["generation"]


def render(cluster: Cluster, helm: Path, *values: dict[str, Any]) -> list[Manifest]:
    """`helm template` of the operator chart, as a GitOps repository would hold it."""
    sets = [f"--set-json={key}={json.dumps(value)}" for v in values for key, value in v.items()]
    rendered = run_helm(
        cluster, helm, "template", RELEASE, "chart/kube-headroom",
        f"--namespace={RELEASE_NAMESPACE}", f"--kube-version={kubernetes_version()}", *sets,
    )  # fmt: skip
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def publish(cluster: Cluster, registry: Registry, name: str, tag: str, text: str) -> None:
    """Push ``text`` as a Git repository's content (an OCI artifact, as `flux push
    artifact` does), have source-controller pull it, and point a Kustomization at it."""
    registry.push_files(
        f"gitops/{name}", tag, {f"{name}.yaml": text.encode()},
        media_type=CONTENT_MEDIA_TYPE, config_media_type=CONFIG_MEDIA_TYPE,
    )  # fmt: skip
    cluster.apply(oci_repository(name, f"oci://{registry.host}/gitops/{name}", tag))
    reconciled(cluster, "ocirepository", name)
    cluster.apply(
        flux_object(
            "kustomize.toolkit.fluxcd.io/v1", "Kustomization", name,
            sourceRef={"kind": "OCIRepository", "name": name}, path="./", prune=True,
        )
    )  # fmt: skip


def delete_flux_objects(cluster: Cluster, name: str, *kinds: str) -> None:
    """Delete them and wait for their finalizers (a Kustomization prunes what it applied,
    a HelmRelease uninstalls its release)."""
    for kind in kinds:
        cluster.kubectl(
            "delete", kind, name, f"--namespace={NAMESPACE}", "--ignore-not-found",
            "--timeout=120s",
        )  # fmt: skip


@pytest.fixture
def kustomization(
    control_plane: Cluster, registry: Registry, flux: Flux, release_namespace: str
) -> Iterator[Sync]:
    """A function that publishes manifests as a new revision and has the Kustomization
    `headroom` apply them; deleted, with what it applied, at the end."""
    revisions = iter(range(1, 100))

    def sync(manifests: list[Manifest]) -> Manifest:
        text = yaml.safe_dump_all(manifests)
        publish(control_plane, registry, "headroom", f"r{next(revisions)}", text)
        return reconciled(control_plane, "kustomization", "headroom")

    try:
        yield sync
    finally:
        delete_flux_objects(control_plane, "headroom", "kustomization", "ocirepository")


def without_create_once(manifests: list[Manifest]) -> list[Manifest]:
    """The same manifests with the config's `ssa: IfNotPresent` taken out: the control."""
    for obj in manifests:
        if obj["kind"] == "HeadroomConfig":
            del obj["metadata"]["annotations"]["kustomize.toolkit.fluxcd.io/ssa"]
    return manifests


@pytest.mark.parametrize("create_once", [True, False], ids=["as-rendered", "control"])
def test_a_kustomization_keeps_the_runbook_patch_only_with_the_charts_annotation(
    control_plane: Cluster,
    helm: Path,
    clean_install: None,
    kustomization: Sync,
    create_once: bool,
) -> None:
    """As rendered, the config is created once in dry-run and the runbook's `kubectl patch`
    holds through every sync. Without the chart's `ssa: IfNotPresent` (the control),
    kustomize-controller takes over the fields `kubectl` set and its apply of `spec: {}`
    drops dryRun back to the CRD's default at the first sync."""
    manifests = render(control_plane, helm, VALUES, CREATE)
    kustomization(manifests if create_once else without_create_once(manifests))
    assert stored_config(control_plane)["spec"]["dryRun"] is True
    control_plane.kubectl("patch", "hcfg", CONFIG_NAME, "--type=merge", "-p", PATCH_ENFORCE)
    enforcing = stored_config(control_plane)
    assert "kubectl-patch" in managers(enforcing)
    if create_once:
        for _ in range(SYNCS):
            reconciled(control_plane, "kustomization", "headroom")
            assert_unchanged(control_plane, enforcing)
    else:
        reconciled(control_plane, "kustomization", "headroom")
        undone = stored_config(control_plane)
        assert undone["spec"]["dryRun"] is True
        assert "kubectl-patch" not in managers(undone)


def test_a_dry_run_set_in_git_is_enforced_and_outlives_its_kustomization(
    control_plane: Cluster, helm: Path, clean_install: None, kustomization: Sync
) -> None:
    """The switch kept in Git: `headroomConfig.spec.dryRun` in the values. Each sync
    enforces it, undoing a `kubectl patch`; deleting the Kustomization leaves the config."""
    kustomization(render(control_plane, helm, VALUES, CREATE))
    git = {"headroomConfig": {"create": True, "spec": {"dryRun": False}}}
    kustomization(render(control_plane, helm, VALUES, git))
    assert stored_config(control_plane)["spec"]["dryRun"] is False
    control_plane.kubectl(
        "patch", "hcfg", CONFIG_NAME, "--type=merge", "-p", '{"spec":{"dryRun":true}}'
    )
    reconciled(control_plane, "kustomization", "headroom")
    enforced = stored_config(control_plane)
    assert enforced["spec"]["dryRun"] is False
    delete_flux_objects(control_plane, "headroom", "kustomization")
    assert stored_config(control_plane)["metadata"]["uid"] == enforced["metadata"]["uid"]


def test_a_misspelt_field_fails_the_sync_and_creates_nothing(
    control_plane: Cluster, registry: Registry, flux: Flux, clean_install: None
) -> None:
    """kustomize-controller dry-runs with strict field validation: a config with
    `spec.dryrun` is refused with the field's name, not stored in dry-run without it."""
    config = {
        "apiVersion": "kube-headroom.dev/v1alpha1",
        "kind": "HeadroomConfig",
        "metadata": {"name": CONFIG_NAME},
        "spec": {"dryrun": False},
    }
    name = "misspelt"
    publish(control_plane, registry, name, "r1", yaml.safe_dump(config))
    try:

        def refused() -> str:
            return control_plane.kubectl(
                "get", "kustomization", name, f"--namespace={NAMESPACE}",
                "-o", "jsonpath={.status.conditions[?(@.type=='Ready')].message}",
            )  # fmt: skip

        message = eventually(
            lambda: "not declared in schema" in refused() and refused(),
            timeout=60,
            what="the sync refused",
        )
        assert ".spec.dryrun" in message
        absent = control_plane.kubectl("get", "hcfg", "--ignore-not-found", "-o", "name")
        assert absent == ""
    finally:
        delete_flux_objects(control_plane, name, "kustomization", "ocirepository")


def helm_push(cluster: Cluster, helm: Path, registry: Registry, work_dir: Path) -> str:
    """Package the chart and push it with the real helm; returns the repository's URL."""
    run_helm(cluster, helm, "package", "chart/kube-headroom", f"--destination={work_dir}")
    (package,) = work_dir.glob("kube-headroom-*.tgz")
    run_helm(
        cluster, helm, "push", str(package), f"oci://{registry.host}/charts",
        f"--ca-file={registry.ca_file}",
    )  # fmt: skip
    return f"oci://{registry.host}/charts/kube-headroom"


def test_a_helm_release_keeps_the_runbook_patch_through_upgrades(
    control_plane: Cluster,
    helm: Path,
    registry: Registry,
    flux: Flux,
    clean_install: None,
    tmp_path: Path,
) -> None:
    """helm-controller installs with the Helm SDK, so `lookup` sees the cluster: the config
    is the install's hook, created once. The runbook's patch holds through upgrades (a new
    image tag each time) and a sync with nothing to change."""
    url = helm_push(control_plane, helm, registry, tmp_path)
    layer = {"mediaType": "application/vnd.cncf.helm.chart.content.v1.tar+gzip"}
    control_plane.apply(
        oci_repository(
            "kube-headroom", url, CHART_VERSION, layerSelector=layer | {"operation": "copy"}
        )
    )
    reconciled(control_plane, "ocirepository", "kube-headroom")

    def release(tag: str) -> Manifest:
        return flux_object(
            "helm.toolkit.fluxcd.io/v2", "HelmRelease", RELEASE,
            releaseName=RELEASE, targetNamespace=RELEASE_NAMESPACE,
            storageNamespace=RELEASE_NAMESPACE, install={"createNamespace": True},
            chartRef={"kind": "OCIRepository", "name": "kube-headroom"},
            values=VALUES | CREATE | {"image": {"tag": tag}},
        )  # fmt: skip

    try:
        control_plane.apply(release("v0"))
        reconciled(control_plane, "helmrelease", RELEASE, timeout=180)
        assert stored_config(control_plane)["spec"]["dryRun"] is True
        hooks = run_helm(control_plane, helm, "get", "hooks", RELEASE, "-n", RELEASE_NAMESPACE)
        assert "kind: HeadroomConfig" in hooks
        control_plane.kubectl("patch", "hcfg", CONFIG_NAME, "--type=merge", "-p", PATCH_ENFORCE)
        enforcing = stored_config(control_plane)
        for upgrade in range(1, SYNCS + 1):
            control_plane.apply(release(f"v{upgrade}"))
            synced = reconciled(control_plane, "helmrelease", RELEASE, timeout=180)
            assert synced["status"]["history"][0]["version"] == upgrade + 1
            assert_unchanged(control_plane, enforcing)
        reconciled(control_plane, "helmrelease", RELEASE)
        assert_unchanged(control_plane, enforcing)
    finally:
        delete_flux_objects(control_plane, RELEASE, "helmrelease")
        delete_flux_objects(control_plane, "kube-headroom", "ocirepository")
