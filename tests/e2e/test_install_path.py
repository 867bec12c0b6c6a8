"""The runbook's install path on real parts, in the order an operator walks it.

The image built here, pushed to a local OCI registry with both charts; the runbook's
``helm`` commands against that registry; the chart's pods pulled and started by real
kubelets, their ``securityContext`` enforced by runc; cert-manager issuing and injecting,
and renewing under load, the kubelet carrying the renewed Secret into the running pod;
the upgrade to metrics TLS and Prometheus, rolled out as readiness allows; enforcement;
Prometheus scraping both processes through the chart's ServiceMonitors and loading its
PrometheusRule.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from app.core.quantity import parse_cpu_millis
from devcluster.kubeapi import KubeAPIError
from devcluster.kubepods import container_cgroup
from tests.e2e import builders
from tests.e2e.conftest import (
    BUILT_IMAGE,
    CHART,
    CHART_IMAGE,
    CHART_REPOSITORY_PATH,
    IMAGE_PATH,
    RELEASE,
    RELEASE_NAMESPACE,
    WORKLOAD_NODE,
    ChartPod,
    PrometheusServer,
    Release,
    Stack,
    Upgrade,
    eventually,
)
from tests.unit.docs.markdown import RUNBOOK, section

WEBHOOK_SERVICE = f"{RELEASE}-webhook.{RELEASE_NAMESPACE}.svc"
WEBHOOK_SECRET = "webhook-server-cert"
METRICS_SECRET = "metrics-server-cert"
QUOTA_HOOK = 'admission webhook "resourcequotas.validate.kube-headroom.dev" denied the request'
SERIES = re.compile(r"\bheadroom_[a-z0-9_]*[a-z0-9]\b")


def secret_data(stack: Stack, name: str) -> dict[str, bytes]:
    found = stack.api.get(f"/api/v1/namespaces/{RELEASE_NAMESPACE}/secrets/{name}")
    assert found is not None, f"Secret {name} missing"
    return {key: base64.b64decode(value) for key, value in found["data"].items()}


def served_certificate(pod: ChartPod, *, port: int, server_name: str, ca: bytes) -> bytes:
    """The leaf the container serves, verified against ``ca`` for ``server_name``."""
    context = ssl.create_default_context(cadata=ca.decode())
    with (
        socket.create_connection((pod.ip, port), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=server_name) as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return der


def leaf_der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(serialization.Encoding.DER)


def container_status(stack: Stack, running: ChartPod) -> dict[str, Any]:
    """The kubelet's report of the pod's one container."""
    pod = stack.get("pod", running.name, "-n", RELEASE_NAMESPACE)
    (status,) = pod["status"]["containerStatuses"]
    found: dict[str, Any] = status
    return found


# -- the image ----------------------------------------------------------------------


# The image's budget, uncompressed (docs/development.md, "The image").
IMAGE_BUDGET_BYTES = 150_000_000
# Where a shell, an installer or a compiler would be found, were one in the image.
_SEARCH_PATH = "/opt/headroom/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_TOOLS = ("sh", "bash", "dash", "busybox", "pip", "pip3", "gcc", "cc", "make", "apt-get", "dpkg")
_PROBE = (
    "import importlib.util, os, shutil; "
    f"found = [shutil.which(t, path={_SEARCH_PATH!r}) for t in {_TOOLS!r}]; "
    "print(os.getuid(), importlib.util.find_spec('pip'), *[f for f in found if f])"
)


def test_image_is_small_non_root_without_a_shell_pip_or_compilers(stack: Stack) -> None:
    image = stack.build.inspect("image", BUILT_IMAGE)
    assert image is not None, f"{BUILT_IMAGE} was not built (make e2e builds it)"
    stack.say(f"    {BUILT_IMAGE}: {image['Size'] / 1e6:.0f} MB, user {image['Config']['User']}")
    assert image["Size"] <= IMAGE_BUDGET_BYTES
    assert image["Config"]["User"] == "65532:65532"
    assert "headroom-reconciler" in json.dumps(image["Config"].get("Cmd"))
    # A cgroup parent of its own: a container's cgroup left below the build steps' would
    # make runc refuse the next build step (cgroup v1 denies a device rule change to a
    # cgroup with children).
    engine = dataclasses.replace(stack.build, cgroup_parent="/headroom-e2e-image")
    try:
        probe = engine.podman(
            "run", "--rm", "--network=none", "--read-only",
            f"--cgroup-parent={engine.cgroup_parent}",
            "--entrypoint=python3", BUILT_IMAGE, "-c", _PROBE,
        ).stdout.split()  # fmt: skip
    finally:
        # conmon reports the container's exit from a cgroup of its own below the parent,
        # and on a busy machine outlives podman's return by a moment.
        eventually(
            lambda: engine.remove_cgroup_parent() == [],
            timeout=30,
            what=f"{engine.cgroup_parent} to empty once the container and conmon are gone",
        )
    assert probe == ["65532", "None"], probe


# -- the runbook's install, from OCI ------------------------------------------------


def test_runbook_installs_both_charts_and_the_image_from_the_oci_registry(
    stack: Stack, installed: Release
) -> None:
    registry = stack.registry
    for chart in ("kube-headroom-crds", "kube-headroom"):
        assert CHART["version"] in registry.tags(f"{CHART_REPOSITORY_PATH}/{chart}")
    assert CHART["appVersion"] in registry.tags(IMAGE_PATH)
    releases = json.loads(stack.sh("helm list --all-namespaces -o json", show=False).stdout)
    charts = {release["name"]: release["chart"] for release in releases}
    assert charts == {
        "kube-headroom-crds": f"kube-headroom-crds-{CHART['version']}",
        RELEASE: f"{RELEASE}-{CHART['version']}",
    }
    # The kubelets pulled the chart's image by its published name through the registry
    # mirror: the digest they report is the one the registry holds.
    digest = registry.digest(IMAGE_PATH, CHART["appVersion"])
    for running in (installed.webhook, installed.reconciler):
        pod = stack.get("pod", running.name, "-n", RELEASE_NAMESPACE)
        (status,) = pod["status"]["containerStatuses"]
        assert status["image"] == CHART_IMAGE
        assert status["imageID"] == f"{CHART_IMAGE.rsplit(':', 1)[0]}@{digest}", status["imageID"]
    rendered = stack.sh(stack.runbook("helm template kube-headroom oci://"), show=False)
    assert rendered.returncode == 0, rendered.stderr
    # The chart in the registry is the checkout's, rendering the same objects.
    local = stack.sh("helm template kube-headroom chart/kube-headroom", show=False)
    assert rendered.stdout == local.stdout
    assert f"image: {CHART_IMAGE}" in rendered.stdout


def test_cert_manager_issues_the_certificates_and_injects_the_ca(
    stack: Stack, installed: Release
) -> None:
    for kind in ("issuers", "certificates"):
        listed = stack.get(f"{kind}.cert-manager.io", "-n", RELEASE_NAMESPACE)["items"]
        assert listed, f"no {kind}"
        for item in listed:
            ready = [c for c in item["status"].get("conditions", []) if c["type"] == "Ready"]
            assert [c["status"] for c in ready] == ["True"], (kind, item["metadata"]["name"])
            stack.say(f"    {kind[:-1]} {item['metadata']['name']}: Ready")
    webhook = secret_data(stack, WEBHOOK_SECRET)
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(webhook)
    certificate = x509.load_pem_x509_certificate(webhook["tls.crt"])
    names = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert WEBHOOK_SERVICE in names.get_values_for_type(x509.DNSName)
    for kind in ("mutating", "validating"):
        configuration = stack.get(f"{kind}webhookconfiguration", f"{RELEASE}-{kind}")
        for hook in configuration["webhooks"]:
            injected = base64.b64decode(hook["clientConfig"].get("caBundle", ""))
            assert injected == webhook["ca.crt"], f"{hook['name']}: caBundle not injected"
    stack.say("    caBundle of every webhook = ca.crt of webhook-server-cert")


# What the container itself sees: its uid, whether / takes a write, its seccomp mode, its
# capability sets and no_new_privs, its pod IP on eth0, and its ServiceAccount token.
_INSIDE = """
import errno, fcntl, os, socket, struct
try:
    open("/probe", "w")
    written = "written"
except OSError as err:
    written = errno.errorcode[err.errno]
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", b"eth0"))
print(os.getuid(), os.getgid(), written, status["Seccomp"].strip(), status["NoNewPrivs"].strip())
print(*[status[c].strip() for c in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")])
print(socket.inet_ntoa(packed[20:24]))
print(open("/var/run/secrets/kubernetes.io/serviceaccount/token").read())
"""


def test_the_kubelet_and_runc_enforce_the_chart_security_context(
    stack: Stack, installed: Release
) -> None:
    for running in (installed.webhook, installed.reconciler):
        pod = stack.get("pod", running.name, "-n", RELEASE_NAMESPACE)
        (spec,) = pod["spec"]["containers"]
        context = {**pod["spec"].get("securityContext", {}), **spec["securityContext"]}
        assert context["runAsNonRoot"] is True
        assert context["readOnlyRootFilesystem"] is True
        assert context["allowPrivilegeEscalation"] is False
        assert context["capabilities"] == {"drop": ["ALL"]}
        assert context["seccompProfile"] == {"type": "RuntimeDefault"}
        inside = stack.kubectl(
            "exec", "-n", RELEASE_NAMESPACE, running.name, "-c", spec["name"], "--",
            "python3", "-c", _INSIDE,
        ).split()  # fmt: skip
        # Not root; the root filesystem mounted read-only; a seccomp filter (mode 2, the
        # runtime's default profile) and no_new_privs; every capability set empty.
        assert inside[:5] == ["65532", "65532", "EROFS", "2", "1"], inside[:5]
        assert inside[5:10] == ["0000000000000000"] * 5, inside[5:10]
        assert inside[10] == running.ip
        review = stack.api.post(
            "/apis/authentication.k8s.io/v1/tokenreviews",
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
             "spec": {"token": inside[11]}},
        )  # fmt: skip
        account = pod["spec"]["serviceAccountName"]
        assert review["status"]["authenticated"] is True
        assert review["status"]["user"]["username"] == (
            f"system:serviceaccount:{RELEASE_NAMESPACE}:{account}"
        )
        assert review["status"]["user"]["extra"]["authentication.kubernetes.io/pod-uid"] == [
            running.uid
        ]
        # The memory limit, as runc wrote it into the container's cgroup on its node.
        path = f"{container_cgroup(pod, spec['name'])}/memory.max"
        limit = stack.cluster.guest(running.node).read(path)[path].strip()
        assert limit == str(512 * 2**20)
        stack.say(
            f"    {running.name}: uid 65532, / read-only (EROFS), seccomp filter, no "
            f"capabilities, memory.max {limit}, token bound to the pod"
        )


MANAGED_PROBE_NAMESPACE = "e2e-admission"


@pytest.fixture(scope="module")
def managed_namespace(stack: Stack, installed: Release) -> str:
    stack.apply(
        builders.namespace(MANAGED_PROBE_NAMESPACE, labels={"kube-headroom.dev/mode": "managed"})
    )
    return MANAGED_PROBE_NAMESPACE


def quota_admission(stack: Stack, namespace: str, name: str) -> str:
    """A dry-run create of a limits.cpu quota: the webhook's answer, or what went wrong."""
    try:
        stack.api.request(
            "POST",
            f"/api/v1/namespaces/{namespace}/resourcequotas",
            body=builders.limits_cpu_quota(name),
            params={"dryRun": "All"},
        )
    except KubeAPIError as err:
        return err.reason
    # failurePolicy Ignore: an unreachable or untrusted webhook lets the quota through.
    return "admitted without the webhook"


def test_the_api_server_calls_the_webhook_container_over_tls_with_the_injected_ca(
    stack: Stack, installed: Release, managed_namespace: str
) -> None:
    webhook = secret_data(stack, WEBHOOK_SECRET)
    served = served_certificate(
        installed.webhook, port=9443, server_name=WEBHOOK_SERVICE, ca=webhook["ca.crt"]
    )
    assert served == leaf_der(webhook["tls.crt"])
    answer = quota_admission(stack, managed_namespace, "probe")
    stack.say(f"    limits.cpu quota: {answer[answer.find('admission') :][:100]}…")
    assert QUOTA_HOOK in answer, answer
    assert "requests.cpu" in answer, answer


@pytest.fixture
def admissions(stack: Stack, managed_namespace: str) -> Iterator[list[str]]:
    """Admission calls through the webhook, back to back, until the test ends."""
    answers: list[str] = []
    stop = threading.Event()

    def call() -> None:
        while not stop.is_set():
            answers.append(quota_admission(stack, managed_namespace, f"probe-{len(answers)}"))
            time.sleep(0.1)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    yield answers
    stop.set()
    thread.join(timeout=30)


# Admissions the test sees answered before the renewal, and again once the webhook serves
# the renewed certificate: each one a refused limits.cpu quota, none failed.
ADMISSIONS_AROUND = 5


def test_renewal_reaches_the_running_webhook_without_a_restart(
    stack: Stack, installed: Release, admissions: list[str]
) -> None:
    before = container_status(stack, installed.webhook)
    eventually(lambda: len(admissions) >= ADMISSIONS_AROUND, what="admissions before the renewal")
    old = secret_data(stack, WEBHOOK_SECRET)
    old_serial = x509.load_pem_x509_certificate(old["tls.crt"]).serial_number
    certificate = f"{RELEASE}-webhook-cert"
    path = f"/apis/cert-manager.io/v1/namespaces/{RELEASE_NAMESPACE}/certificates/{certificate}"
    # What `cmctl renew` does: set the Issuing condition; cert-manager reissues.
    current = stack.api.get(path)
    assert current is not None
    conditions = [c for c in current["status"]["conditions"] if c["type"] != "Issuing"]
    conditions.append(
        {
            "type": "Issuing",
            "status": "True",
            "reason": "ManuallyTriggered",
            "message": "Certificate re-issuance manually triggered",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    current["status"]["conditions"] = conditions
    with stack.narrator.step("renew: mark the webhook Certificate for reissue (cmctl renew)"):
        stack.api.put(f"{path}/status", current)
        new = eventually(
            lambda: (
                (data := secret_data(stack, WEBHOOK_SECRET))["tls.crt"] != old["tls.crt"] and data
            ),
            timeout=60,
            what="cert-manager to write a new certificate",
        )
    written = time.monotonic()
    new_leaf = leaf_der(new["tls.crt"])
    # The kubelet rewrites a Secret volume at its next sync of the pod (up to its sync
    # period, a minute, plus its cache's): the webhook then reloads the files.
    with stack.narrator.step("the kubelet updates the Secret volume; the process reloads it"):
        eventually(
            lambda: (
                served_certificate(
                    installed.webhook, port=9443, server_name=WEBHOOK_SERVICE, ca=new["ca.crt"]
                )
                == new_leaf
            ),
            timeout=180,
            what="the webhook to serve the renewed certificate",
        )
    served_after = time.monotonic() - written
    served_at = len(admissions)
    eventually(
        lambda: len(admissions) >= served_at + ADMISSIONS_AROUND,
        what="admissions once the renewed certificate is served",
    )
    after = container_status(stack, installed.webhook)
    new_serial = x509.load_pem_x509_certificate(new["tls.crt"]).serial_number
    stack.say(
        f"    serial {old_serial:x} -> {new_serial:x}, served {served_after:.1f}s after the "
        f"Secret changed; {len(admissions)} admissions around it"
    )
    assert new_serial != old_serial
    # The same container, never restarted.
    assert after["containerID"] == before["containerID"]
    assert after["state"]["running"]["startedAt"] == before["state"]["running"]["startedAt"]
    assert after["restartCount"] == 0
    failed = [answer for answer in admissions if QUOTA_HOOK not in answer]
    assert failed == []


# -- upgrade, enforce ---------------------------------------------------------------


def test_upgrade_serves_metrics_with_the_cert_manager_certificate(
    stack: Stack, upgraded: Release
) -> None:
    metrics = secret_data(stack, METRICS_SECRET)
    for running, service in (
        (upgraded.reconciler, f"{RELEASE}-reconciler-metrics"),
        (upgraded.webhook, f"{RELEASE}-webhook-metrics"),
    ):
        served = served_certificate(
            running, port=8443, server_name=f"{service}.{RELEASE_NAMESPACE}.svc",
            ca=metrics["ca.crt"],
        )  # fmt: skip
        assert served == leaf_der(metrics["tls.crt"])
    log = stack.kubectl("logs", "-n", RELEASE_NAMESPACE, upgraded.reconciler.name)
    assert "Initializing metrics certificate watcher using provided certificates" in log


def test_the_webhook_rollout_waits_on_the_new_pod_readiness(upgrade: Upgrade) -> None:
    """maxUnavailable 0: the old webhook pod goes only once its replacement is Ready, and
    Ready is the kubelet's readiness probe passing, some time after the container runs."""
    old, new = upgrade.old.webhook.uid, upgrade.release.webhook.uid
    moments = [m.pods for m in upgrade.rollout]
    assert moments, "the rollout was not watched"
    # Every moment had a Ready webhook pod that was not being deleted.
    assert all(any(ready and not gone for _, ready, gone in m.values()) for m in moments)
    # The new pod ran unready for a while, with the old one still serving...
    waiting = [m for m in moments if new in m and m[new][:2] == (True, False)]
    assert waiting, "the new pod was never seen running before it was Ready"
    assert all(old in m and not m[old][2] for m in waiting)
    # ...and the old one was deleted only once the new one was Ready.
    first_deleted = next(i for i, m in enumerate(moments) if old not in m or m[old][2])
    assert any(new in m and m[new][1] for m in moments[: first_deleted + 1])


def cpu_limit(pod: dict[str, Any]) -> str | None:
    limits = pod["spec"]["containers"][0].get("resources", {}).get("limits", {})
    value = limits.get("cpu")
    return None if value is None else str(value)


def test_enforce_converges_a_pod_while_the_webhook_container_seeds_new_ones(
    stack: Stack, enforcing: str
) -> None:
    namespace = enforcing
    stack.apply(builders.deployment("web", namespace, cpu="500m", node=WORKLOAD_NODE))

    def web() -> dict[str, Any] | None:
        pods = stack.get("pods", "-n", namespace, "-l", "app=web")["items"]
        return pods[0] if pods else None

    def adjusted(pod: dict[str, Any]) -> list[str]:
        """Where the reconciler's CPULimitAdjusted events said the pod's limit went."""
        events = stack.get("events", "-n", namespace)["items"]
        return [
            e["message"].split(" (")[0].rsplit("-> ", 1)[-1]
            for e in events
            if e["reason"] == "CPULimitAdjusted"
            and e["involvedObject"]["name"] == pod["metadata"]["name"]
        ]

    def raised() -> dict[str, Any] | None:
        pod = web()
        limit = None if pod is None else cpu_limit(pod)
        if pod is None or limit is None or parse_cpu_millis(limit) <= 500:
            return None
        return pod if f"{parse_cpu_millis(limit)}m" in adjusted(pod) else None

    with stack.narrator.step(f"web (500m) on {WORKLOAD_NODE} climbs into the node's slack"):
        pod = eventually(raised, timeout=180, what="the reconciler pod to raise web's limit")
    stack.say(f"    web's limits.cpu: {cpu_limit(pod)}, as its CPULimitAdjusted event says")
    manifest = stack.work / "seeded.json"
    manifest.write_text(
        json.dumps(builders.pod("seeded", namespace, cpu="250m", node=WORKLOAD_NODE))
    )

    def admitted(*flags: str) -> tuple[str | None, str]:
        """The pod's CPU limit as admission leaves it, and kubectl's stderr: the admission
        warnings that say why a pod was not seeded."""
        result = stack.sh(
            f"kubectl create -n {namespace} -o json {' '.join(flags)} -f {manifest}", show=False
        )
        assert result.returncode == 0, result.stderr
        return cpu_limit(json.loads(result.stdout)), result.stderr

    # The webhook's watches see the config switched to enforcing a moment after the patch.
    eventually(
        lambda: admitted("--dry-run=server")[0] == "500m", what="the webhook to seed new pods"
    )
    limit, warnings = admitted()
    stack.say(f"    a new 250m pod is admitted with limits.cpu {limit}")
    assert limit == "500m", warnings


# -- Prometheus -----------------------------------------------------------------------


def test_prometheus_scrapes_both_processes_over_verified_tls(
    stack: Stack, prometheus: PrometheusServer
) -> None:
    targets = eventually(
        lambda: (
            (
                found := [
                    r
                    for r in prometheus.query('up{namespace="kube-headroom-system"}')
                    if r["value"][1] == "1"
                ]
            )
            and len(found) == 2
            and found
        ),
        timeout=120,
        what="up == 1 for both metrics endpoints",
    )
    services = sorted(r["metric"]["service"] for r in targets)
    stack.say(f"    up == 1: {', '.join(services)}")
    assert services == [f"{RELEASE}-reconciler-metrics", f"{RELEASE}-webhook-metrics"]
    config = prometheus.api("/api/v1/status/config")["yaml"]
    jobs = [j for j in _scrape_jobs(config) if "kube-headroom" in j["job_name"]]
    assert len(jobs) == 2
    for job in jobs:
        tls = job["tls_config"]
        assert tls.get("insecure_skip_verify") is not True
        assert tls["server_name"].endswith(f"-metrics.{RELEASE_NAMESPACE}.svc")
        assert tls["ca_file"]
        assert tls["cert_file"]
        assert job["scheme"] == "https"
        assert job["authorization"]["type"] == "Bearer"


def _scrape_jobs(config: str) -> list[dict[str, Any]]:
    jobs: list[dict[str, Any]] = yaml.safe_load(config)["scrape_configs"]
    return jobs


def test_the_runbook_series_are_queryable(
    stack: Stack, prometheus: PrometheusServer, enforcing: str
) -> None:
    names = sorted(set(SERIES.findall(section(RUNBOOK.read_text(), "Metrics and alerts"))))
    assert len(names) >= 9

    def missing() -> list[str]:
        return [name for name in names if not prometheus.query(f'{{__name__=~"{name}(_count)?"}}')]

    # A pool's series exists while the pool has managed pods, a weight rule's while it
    # matches some: a pool without overrides around web's node, and a rule of weight 1 for
    # every pod, change no limit.
    pods = json.loads(stack.kubectl("get", "pods", "-n", enforcing, "-o", "json"))["items"]
    node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"].startswith("web-"))
    stack.kubectl("label", "node", node, "pool=e2e")
    pool = {"name": "e2e", "nodeSelector": {"matchLabels": {"pool": "e2e"}}}
    weights = [{"podSelector": {}, "weight": 1}]
    stack.kubectl(
        "patch", "hcfg", "cluster", "--type", "merge",
        "-p", json.dumps({"spec": {"nodePools": [pool], "weights": weights}}),
    )  # fmt: skip
    try:
        eventually(lambda: not missing(), timeout=90, what="every runbook series")
    finally:
        stack.kubectl(
            "patch", "hcfg", "cluster", "--type", "merge",
            "-p", '{"spec":{"nodePools":null,"weights":null}}',
        )  # fmt: skip
        stack.kubectl("label", "node", node, "pool-")
    web = next(p for p in pods if p["metadata"]["name"].startswith("web-"))
    web = stack.get("pod", web["metadata"]["name"], "-n", enforcing)
    cores = parse_cpu_millis(str(web["spec"]["containers"][0]["resources"]["limits"]["cpu"])) / 1000
    limit = prometheus.query(
        f'headroom_pod_limit_cores{{namespace="{enforcing}",pod="{web["metadata"]["name"]}"}}'
    )
    stack.say(f"    {len(names)} runbook series present; web's limit {limit[0]['value'][1]} cores")
    assert [float(r["value"][1]) for r in limit] == [cores]


def test_the_chart_prometheus_rule_loads_without_errors(
    stack: Stack, prometheus: PrometheusServer
) -> None:
    groups = eventually(
        lambda: [g for g in prometheus.api("/api/v1/rules")["groups"] if g["name"] == "headroom"],
        timeout=120,
        what="the chart's rule group in Prometheus",
    )
    (group,) = groups
    rules = {rule["name"]: rule for rule in group["rules"]}
    assert set(rules) == {
        "HeadroomResizesDeferred",
        "HeadroomResizeQuotaDenied",
        "HeadroomReconcileSlow",
    }

    def healthy() -> bool:
        groups = prometheus.api("/api/v1/rules")["groups"]
        return all(r.get("health") == "ok" and not r.get("lastError") for g in groups
                   for r in g["rules"])  # fmt: skip

    eventually(healthy, timeout=60, what="every rule evaluated, healthy")
    # Prometheus's own telemetry (its /metrics; nothing scrapes Prometheus itself here).
    samples = prometheus.telemetry()
    ours = [s for s in samples if s.labels.get("rule_group", "").endswith(";headroom")]
    assert [s.value for s in ours if s.name == "prometheus_rule_group_rules"] == [3.0]
    failures = [s.value for s in ours if s.name == "prometheus_rule_evaluation_failures_total"]
    assert failures == [0.0]
    assert [s.value for s in samples if s.name == "prometheus_config_last_reload_successful"] == [
        1.0
    ]
    stack.say(f"    rule group headroom: {len(rules)} rules, health ok, 0 evaluation failures")


# -- the ServiceAccount token, refreshed -------------------------------------------------

TOKEN_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/token"
# A kubelet refreshes a projected token once 80 % of the lifetime it asked for has passed
# (3607 s for the default token volume: about 48 minutes after issue), give or take its
# 10 s of jitter.
TOKEN_SECONDS = 3607
REFRESH_AT = 0.8 * TOKEN_SECONDS
# How far past that point the reconciler's node's clock is moved: past the jitter, and
# short of the point at which the new token would need refreshing too.
PAST_REFRESH = 30.0
# The Kubernetes client re-reads its token file on a request a minute after its last read,
# by the wall clock: once the new token is in the volume, the node's clock moves on by that
# minute, and a second more.
CLIENT_REREAD = 61.0
# How often the test makes the reconciler write (a new pod to resize) once the token is new.
POD_EVERY = 20.0


def token_claims(token: str) -> dict[str, Any]:
    """The token's claims (read, not verified): its ``jti`` is what the API server's audit
    records as the credential a request carried."""
    payload = token.split(".")[1]
    claims: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return claims


def test_the_kubelet_refreshes_the_reconciler_token_and_the_process_uses_the_new_one(
    stack: Stack, upgraded: Release, enforcing: str
) -> None:
    """Last in this module: the moved clock would confuse a Prometheus on that node."""
    running = upgraded.reconciler
    pod = stack.get("pod", running.name, "-n", RELEASE_NAMESPACE)
    container = pod["spec"]["containers"][0]["name"]
    user = f"system:serviceaccount:{RELEASE_NAMESPACE}:{pod['spec']['serviceAccountName']}"

    def token() -> str:
        return stack.kubectl(
            "exec", "-n", RELEASE_NAMESPACE, running.name, "-c", container, "--",
            "python3", "-c", f"print(open({TOKEN_FILE!r}).read())",
        ).strip()  # fmt: skip

    def used() -> list[str]:
        """The credentials the reconciler's audited requests (pod resizes, events) carried,
        in order, once each."""
        extra = "authentication.kubernetes.io/credential-id"
        return list(
            dict.fromkeys(
                credential
                for event in stack.plane.audit_events()
                if event["user"]["username"] == user
                for credential in event["user"].get("extra", {}).get(extra, [])
            )
        )

    old = token_claims(token())
    assert f"JTI={old['jti']}" in used()
    # Just past the refresh point of the token in the volume, by the node's clock.
    ahead = old["iat"] + REFRESH_AT + PAST_REFRESH - time.time()
    guest = stack.cluster.guest(running.node)
    with stack.narrator.step(
        f"{running.node}'s clock {ahead / 60:.0f} minutes ahead: the kubelet refreshes"
    ):
        guest.shift_clock(ahead)
        try:
            moved = time.monotonic()
            new = token_claims(
                eventually(
                    lambda: (
                        (found := token()) and token_claims(found)["jti"] != old["jti"] and found
                    ),
                    timeout=240,
                    what="the kubelet to write a new token into the reconciler's volume",
                )
            )
            refreshed = time.monotonic() - moved
            # The process keeps working, on the new token. Its client re-reads the token
            # file at most a minute after its last read, so a request may carry the old
            # one (valid for a fifth of its lifetime yet) until then: that minute passes
            # on the node's clock at once, and a new pod in the enforced namespace every
            # 20 s, each resized, makes requests until the audit log shows one with the
            # new token.
            guest.shift_clock(CLIENT_REREAD)
            ahead += CLIENT_REREAD
            pods: list[str] = []
            carried = f"JTI={new['jti']}"

            def switched_over() -> bool:
                if carried in used():
                    return True
                if len(pods) * POD_EVERY <= time.monotonic() - moved - refreshed:
                    pods.append(f"after-refresh-{len(pods)}")
                    stack.apply(builders.pod(pods[-1], enforcing, cpu="100m", node=WORKLOAD_NODE))
                return False

            try:
                eventually(
                    switched_over,
                    timeout=180,
                    what="a request of the reconciler's carrying the new token",
                )
            except pytest.fail.Exception as failure:
                raise AssertionError(
                    f"{failure}; old JTI={old['jti']}, new JTI={new['jti']}; the reconciler's "
                    f"credentials, in order: {used()}; pods made: {pods}; its log:\n"
                    + stack.kubectl("logs", "-n", RELEASE_NAMESPACE, running.name, "--tail=40")
                ) from failure
            switched = time.monotonic() - moved - refreshed
        finally:
            guest.shift_clock(-ahead)
    stack.say(
        f"    new token in the volume {refreshed:.1f}s after the clock moved; the reconciler "
        f"sent it {switched:.1f}s later, with the resize of pod {len(pods)} made since"
    )
    assert new["kubernetes.io"]["pod"]["uid"] == running.uid
    assert container_status(stack, running)["restartCount"] == 0
