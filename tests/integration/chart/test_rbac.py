"""The operator chart's RBAC on the real API server: each process's ServiceAccount may do
what the design says that process does (§5 reconciler, §6 webhook, §7 metrics auth) and
nothing else. Checked three ways: `kubectl auth can-i` impersonating the account, the
account's own SelfSubjectRulesReview, and real requests with its token."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from app.core.labels import API_VERSION, CONFIG_KIND, CONFIG_NAME, CONFIG_PLURAL, GROUP, VERSION
from devcluster.ports import free_port
from tests.integration.conftest import REPO, Cluster, eventually
from tests.integration.rbac import (
    JSON,
    JSON_PATCH,
    MERGE_PATCH,
    RECONCILER,
    RELEASE,
    RELEASE_NAMESPACE,
    WEBHOOK,
    ServiceAccount,
    can_i,
    chart_rbac,
    request_as,
    service_account_kubeconfig,
    service_account_token,
)

CONFIGS = f"{CONFIG_PLURAL}.{GROUP}"
VPAS = "verticalpodautoscalers.autoscaling.k8s.io"
# A VPA's target is found up a pod's chain of controllers.
CONTROLLERS = ("replicasets.apps", "jobs.batch")
LEASES = "leases.coordination.k8s.io"
READ = ("get", "list", "watch")
TEST_LABEL = "kube-headroom.dev/rbac-test"


class Workload(NamedTuple):
    """What the real requests act on: a pod on a simulated node, and its neighbours."""

    namespace: str
    node: str
    pod: str
    secret: str
    configmap: str


# -- builders ---------------------------------------------------------------------------


def pod_manifest(
    name: str, *, node: str, cpu: str = "100m", memory: str = "64Mi"
) -> dict[str, Any]:
    """A Burstable pod bound straight to a simulated node (KWOK runs it)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [
                {
                    "name": "app",
                    "image": "registry.example/app:1",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ],
        },
    }


def event_body(*, namespace: str, pod: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{pod}.", "namespace": namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": namespace, "name": pod},
        "reason": "CPULimitAdjusted",
        "message": "100m -> 300m (node factor 2.00, slack 8/16 cores)",
        "type": "Normal",
        "source": {"component": "headroom"},
    }


def lease_body() -> dict[str, Any]:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"generateName": "rbac-test-", "labels": {TEST_LABEL: "true"}},
        "spec": {"holderIdentity": "rbac-test", "leaseDurationSeconds": 15},
    }


def review(kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    group = "authentication.k8s.io" if kind == "TokenReview" else "authorization.k8s.io"
    return {"apiVersion": f"{group}/v1", "kind": kind, "spec": dict(spec)}


def policy_refuses_a_label(cluster: Cluster, token: str, *, namespace: str, pod: str) -> bool:
    """A server-side dry run of a label change by the reconciler: admission runs, nothing
    is stored."""
    result = request_as(
        cluster,
        token=token,
        method="PATCH",
        path=f"/api/v1/namespaces/{namespace}/pods/{pod}?dryRun=All",
        body={"metadata": {"labels": {"app": "x"}}},
        content_type=MERGE_PATCH,
    )
    return result.status == 403


# -- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chart_accounts(
    control_plane: Cluster, helm: Path, headroom_crd: str, third_party_crds: list[str]
) -> Iterator[None]:
    """The chart's ServiceAccounts with their grants, and nothing else of the chart."""
    with chart_rbac(control_plane, helm):
        try:
            yield
        finally:
            control_plane.kubectl(
                "delete", "leases", f"--namespace={RELEASE_NAMESPACE}", f"--selector={TEST_LABEL}"
            )


@pytest.fixture(scope="module")
def tokens(control_plane: Cluster, chart_accounts: None) -> dict[ServiceAccount, str]:
    return {
        account: service_account_token(control_plane, account) for account in (RECONCILER, WEBHOOK)
    }


@pytest.fixture(scope="module")
def workload(control_plane: Cluster, chart_accounts: None) -> Iterator[Workload]:
    suffix = uuid.uuid4().hex[:8]
    namespace, node = f"rbac-{suffix}", f"rbac-node-{suffix}"
    control_plane.kubectl("create", "namespace", namespace)
    control_plane.create_node(node)
    config = {"apiVersion": API_VERSION, "kind": CONFIG_KIND, "metadata": {"name": CONFIG_NAME}}
    try:
        control_plane.kubectl("create", "-f", "-", input=json.dumps(config))
        control_plane.kubectl(
            "create", f"--namespace={namespace}", "-f", "-",
            input=json.dumps(pod_manifest("app", node=node)),
        )  # fmt: skip
        control_plane.kubectl(
            "create", "secret", "generic", "credentials", f"--namespace={namespace}",
            "--from-literal=password=hunter2",
        )  # fmt: skip
        control_plane.kubectl(
            "create", "configmap", "settings", f"--namespace={namespace}", "--from-literal=a=b"
        )
        control_plane.kubectl(
            "wait", "pod/app", f"--namespace={namespace}", "--for=condition=Ready", "--timeout=60s"
        )
        # Admission policies take effect a moment after they are created.
        token = service_account_token(control_plane, RECONCILER)
        eventually(
            partial(policy_refuses_a_label, control_plane, token, namespace=namespace, pod="app"),
            what="the pod-write policy to take effect",
        )
        yield Workload(
            namespace=namespace, node=node, pod="app", secret="credentials", configmap="settings"
        )
    finally:
        control_plane.kubectl("delete", CONFIGS, CONFIG_NAME, "--ignore-not-found")
        control_plane.kubectl("delete", "namespace", namespace, "--wait=false")
        control_plane.delete_node(node)


@pytest.mark.parametrize("account", [RECONCILER, WEBHOOK], ids=["reconciler", "webhook"])
def test_service_account_kubeconfig_authenticates_as_the_account(
    control_plane: Cluster, chart_accounts: None, account: ServiceAccount
) -> None:
    kubeconfig = service_account_kubeconfig(control_plane, account)
    kubectl = str(control_plane.bin_dir / "kubectl")
    whoami = subprocess.run(
        [kubectl, f"--kubeconfig={kubeconfig}", "auth", "whoami", "-o", "json"],
        capture_output=True,
        text=True,
        check=True,
    )
    user = json.loads(whoami.stdout)["status"]["userInfo"]
    assert user["username"] == account.username
    assert f"system:serviceaccounts:{account.namespace}" in user["groups"]


# -- kubectl auth can-i -----------------------------------------------------------------


def ask(
    account: ServiceAccount,
    verb: str,
    resource: str,
    *,
    allowed: bool,
    subresource: str | None = None,
    namespace: str | None = None,
) -> Any:
    target = f"{resource}/{subresource}" if subresource else resource
    where = f"-in-{namespace}" if namespace else ""
    answer = "yes" if allowed else "no"
    account_name = account.name.removeprefix(f"{RELEASE}-")
    return pytest.param(
        account,
        verb,
        resource,
        subresource,
        namespace,
        allowed,
        id=f"{account_name}-{verb}-{target}{where}-{answer}",
    )


OTHER_NAMESPACE = "default"
CAN_I = [
    # Reconciler (§5): reads what it watches, writes limits, its annotation, events, status.
    *(
        ask(RECONCILER, verb, resource, allowed=True)
        for resource in ("pods", "nodes", "namespaces", "limitranges", VPAS, *CONTROLLERS, CONFIGS)
        for verb in READ
    ),
    ask(RECONCILER, "patch", "pods", subresource="resize", allowed=True),
    ask(RECONCILER, "patch", "pods", allowed=True),
    ask(RECONCILER, "create", "events", allowed=True),
    ask(RECONCILER, "update", CONFIGS, subresource="status", allowed=True),
    ask(RECONCILER, "patch", CONFIGS, subresource="status", allowed=True),
    ask(RECONCILER, "create", "tokenreviews.authentication.k8s.io", allowed=True),
    ask(RECONCILER, "create", "subjectaccessreviews.authorization.k8s.io", allowed=True),
    *(
        ask(RECONCILER, verb, LEASES, namespace=RELEASE_NAMESPACE, allowed=True)
        for verb in ("get", "create", "update")
    ),
    *(
        ask(RECONCILER, verb, "pods", allowed=False)
        for verb in ("create", "update", "delete", "deletecollection")
    ),
    ask(RECONCILER, "update", "pods", subresource="resize", allowed=False),
    ask(RECONCILER, "patch", "pods", subresource="status", allowed=False),
    ask(RECONCILER, "patch", "pods", subresource="ephemeralcontainers", allowed=False),
    ask(RECONCILER, "create", "pods", subresource="eviction", allowed=False),
    ask(RECONCILER, "create", "pods", subresource="exec", allowed=False),
    *(
        ask(RECONCILER, verb, resource, allowed=False)
        for resource in ("secrets", "configmaps")
        for verb in ("get", "list", "watch", "create")
    ),
    *(
        ask(RECONCILER, verb, CONFIGS, allowed=False)
        for verb in ("create", "update", "patch", "delete")
    ),
    *(
        ask(RECONCILER, verb, LEASES, namespace=namespace, allowed=False)
        for namespace in (OTHER_NAMESPACE, "kube-system")
        for verb in ("get", "create", "update")
    ),
    ask(RECONCILER, "patch", "nodes", allowed=False),
    ask(RECONCILER, "patch", "namespaces", allowed=False),
    ask(RECONCILER, "list", "resourcequotas", allowed=False),
    ask(RECONCILER, "create", "serviceaccounts", subresource="token", allowed=False),
    ask(RECONCILER, "impersonate", "serviceaccounts", allowed=False),
    # Webhook (§6): reads enrolment, quotas, LimitRanges, VPAs and the config; writes nothing.
    *(
        ask(WEBHOOK, verb, resource, allowed=True)
        for resource in ("namespaces", "resourcequotas", "limitranges", VPAS, *CONTROLLERS)
        for verb in READ
    ),
    *(ask(WEBHOOK, verb, CONFIGS, allowed=True) for verb in READ),
    ask(WEBHOOK, "create", "tokenreviews.authentication.k8s.io", allowed=True),
    ask(WEBHOOK, "create", "subjectaccessreviews.authorization.k8s.io", allowed=True),
    *(
        ask(WEBHOOK, verb, resource, allowed=False)
        for resource in ("namespaces", "resourcequotas", "limitranges", VPAS, *CONTROLLERS, CONFIGS)
        for verb in ("create", "update", "patch", "delete")
    ),
    ask(WEBHOOK, "patch", CONFIGS, subresource="status", allowed=False),
    ask(WEBHOOK, "list", "pods", allowed=False),
    ask(WEBHOOK, "patch", "pods", allowed=False),
    ask(WEBHOOK, "patch", "pods", subresource="resize", allowed=False),
    ask(WEBHOOK, "get", "secrets", allowed=False),
    ask(WEBHOOK, "create", "events", allowed=False),
    ask(WEBHOOK, "create", LEASES, namespace=RELEASE_NAMESPACE, allowed=False),
    # Neither process scrapes metrics: get on /metrics is for the scraper (metrics-reader).
    ask(RECONCILER, "get", "/metrics", allowed=False),
    ask(WEBHOOK, "get", "/metrics", allowed=False),
]


@pytest.mark.parametrize(
    ("account", "verb", "resource", "subresource", "namespace", "allowed"), CAN_I
)
def test_can_i(
    control_plane: Cluster,
    chart_accounts: None,
    account: ServiceAccount,
    verb: str,
    resource: str,
    subresource: str | None,
    namespace: str | None,
    allowed: bool,
) -> None:
    answer = can_i(
        control_plane,
        account,
        verb=verb,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
    )
    assert answer is allowed


# -- the whole grant, from the account's own view ---------------------------------------


def writes(cluster: Cluster, token: str, namespace: str) -> set[tuple[str, str, str]]:
    """Every (apiGroup, resource, verb) other than a read the token may use in `namespace`."""
    result = request_as(
        cluster,
        token=token,
        method="POST",
        path="/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
        body=review("SelfSubjectRulesReview", {"namespace": namespace}),
    )
    assert result.status == 201, result.message
    return {
        (group, resource, verb)
        for rule in result.body["status"]["resourceRules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule["verbs"]
        if verb not in READ
    }


METRICS_AUTH = {
    ("authentication.k8s.io", "tokenreviews", "create"),
    ("authorization.k8s.io", "subjectaccessreviews", "create"),
}
RECONCILER_WRITES = METRICS_AUTH | {
    ("", "pods/resize", "patch"),
    ("", "pods", "patch"),
    ("", "events", "create"),
    (GROUP, f"{CONFIG_PLURAL}/status", "update"),
    (GROUP, f"{CONFIG_PLURAL}/status", "patch"),
}
LEASE_WRITES = {
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
}


@pytest.mark.parametrize(
    ("account", "in_release_namespace", "expected"),
    [
        pytest.param(
            RECONCILER, True, RECONCILER_WRITES | LEASE_WRITES, id="reconciler-release-ns"
        ),
        pytest.param(RECONCILER, False, RECONCILER_WRITES, id="reconciler-workload-ns"),
        pytest.param(WEBHOOK, True, METRICS_AUTH, id="webhook-release-ns"),
        pytest.param(WEBHOOK, False, METRICS_AUTH, id="webhook-workload-ns"),
    ],
)
def test_writable_resources_are_exactly_what_the_process_needs(
    control_plane: Cluster,
    tokens: dict[ServiceAccount, str],
    workload: Workload,
    account: ServiceAccount,
    in_release_namespace: bool,
    expected: set[tuple[str, str, str]],
) -> None:
    """Compared with a ServiceAccount bound to nothing, so grants every authenticated
    identity has (self reviews) are not counted."""
    namespace = RELEASE_NAMESPACE if in_release_namespace else workload.namespace
    control_plane.kubectl("create", "serviceaccount", "bare", f"--namespace={namespace}")
    try:
        bare = service_account_token(
            control_plane, ServiceAccount(namespace=namespace, name="bare")
        )
        baseline = writes(control_plane, bare, namespace)
        assert writes(control_plane, tokens[account], namespace) - baseline == expected
    finally:
        control_plane.kubectl("delete", "serviceaccount", "bare", f"--namespace={namespace}")


# -- real requests with the accounts' tokens --------------------------------------------


class Call(NamedTuple):
    method: str
    # Formatted with the Workload's fields and `release_ns`.
    path: str
    # A constant, or built from the Workload.
    body: Any = None
    content_type: str = JSON


POD = "/api/v1/namespaces/{namespace}/pods/{pod}"
PODS = "/api/v1/namespaces/{namespace}/pods"
SECRET = "/api/v1/namespaces/{namespace}/secrets/{secret}"
CONFIGMAP = "/api/v1/namespaces/{namespace}/configmaps/{configmap}"
EVENTS = "/api/v1/namespaces/{namespace}/events"
RELEASE_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{release_ns}/leases"
WORKLOAD_LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"
# The list (and watch) the webhook makes: one Lease, by name.
RECONCILER_LEASE = RELEASE_LEASES + "?fieldSelector=metadata.name%3Dkube-headroom-reconciler"
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
CONFIG = f"/apis/{GROUP}/{VERSION}/{CONFIG_PLURAL}/{CONFIG_NAME}"
STATUS_ANNOTATION = {"metadata": {"annotations": {"kube-headroom.dev/status": '{"factor":"2.00"}'}}}
CONFIG_STATUS = {"status": {"managedPods": 1}}
CONFIG_SPEC = {"spec": {"dryRun": False}}
NEW_IMAGE = [
    {"op": "replace", "path": "/spec/containers/0/image", "value": "registry.example/other:1"}
]
TOKEN_REVIEW = review("TokenReview", {"token": "not-a-token"})
ACCESS_REVIEW = review(
    "SubjectAccessReview",
    {"user": "scraper", "nonResourceAttributes": {"path": "/metrics", "verb": "get"}},
)


def event(w: Workload) -> dict[str, Any]:
    return event_body(namespace=w.namespace, pod=w.pod)


def lease(_: Workload) -> dict[str, Any]:
    return lease_body()


def whole_pod(w: Workload) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": w.pod}}


def call(account: ServiceAccount, name: str, request: Call, status: int) -> Any:
    account_name = account.name.removeprefix(f"{RELEASE}-")
    return pytest.param(account, request, status, id=f"{account_name}-{name}-{status}")


REQUESTS = [
    call(RECONCILER, "list-pods", Call("GET", "/api/v1/pods"), 200),
    call(
        RECONCILER,
        "list-vpas",
        Call("GET", "/apis/autoscaling.k8s.io/v1/verticalpodautoscalers"),
        200,
    ),
    call(RECONCILER, "annotate-status", Call("PATCH", POD, STATUS_ANNOTATION, MERGE_PATCH), 200),
    call(RECONCILER, "create-event", Call("POST", EVENTS, event), 201),
    call(
        RECONCILER,
        "patch-config-status",
        Call("PATCH", CONFIG + "/status", CONFIG_STATUS, MERGE_PATCH),
        200,
    ),
    call(RECONCILER, "lease-in-release-ns", Call("POST", RELEASE_LEASES, lease), 201),
    call(RECONCILER, "token-review", Call("POST", TOKEN_REVIEWS, TOKEN_REVIEW), 201),
    call(RECONCILER, "access-review", Call("POST", ACCESS_REVIEWS, ACCESS_REVIEW), 201),
    call(
        RECONCILER,
        "annotate-other",
        Call("PATCH", POD, {"metadata": {"annotations": {"owner": "x"}}}, MERGE_PATCH),
        403,
    ),
    call(
        RECONCILER,
        "label-pod",
        Call("PATCH", POD, {"metadata": {"labels": {"app": "x"}}}, MERGE_PATCH),
        403,
    ),
    call(RECONCILER, "patch-image", Call("PATCH", POD, NEW_IMAGE, JSON_PATCH), 403),
    call(RECONCILER, "update-pod", Call("PUT", POD, whole_pod), 403),
    call(RECONCILER, "delete-pod", Call("DELETE", POD), 403),
    call(RECONCILER, "create-pod", Call("POST", PODS, whole_pod), 403),
    call(
        RECONCILER,
        "patch-pod-status",
        Call("PATCH", POD + "/status", {"status": {"phase": "Failed"}}, MERGE_PATCH),
        403,
    ),
    call(RECONCILER, "get-secret", Call("GET", SECRET), 403),
    call(RECONCILER, "list-secrets", Call("GET", "/api/v1/secrets"), 403),
    call(RECONCILER, "get-configmap", Call("GET", CONFIGMAP), 403),
    call(RECONCILER, "patch-config-spec", Call("PATCH", CONFIG, CONFIG_SPEC, MERGE_PATCH), 403),
    call(RECONCILER, "lease-elsewhere", Call("POST", WORKLOAD_LEASES, lease), 403),
    call(WEBHOOK, "list-namespaces", Call("GET", "/api/v1/namespaces"), 200),
    call(WEBHOOK, "list-quotas", Call("GET", "/api/v1/resourcequotas"), 200),
    call(WEBHOOK, "list-limitranges", Call("GET", "/api/v1/limitranges"), 200),
    call(WEBHOOK, "get-config", Call("GET", CONFIG), 200),
    call(WEBHOOK, "token-review", Call("POST", TOKEN_REVIEWS, TOKEN_REVIEW), 201),
    call(WEBHOOK, "access-review", Call("POST", ACCESS_REVIEWS, ACCESS_REVIEW), 201),
    call(WEBHOOK, "list-pods", Call("GET", "/api/v1/pods"), 403),
    call(WEBHOOK, "annotate-pod", Call("PATCH", POD, STATUS_ANNOTATION, MERGE_PATCH), 403),
    call(WEBHOOK, "get-secret", Call("GET", SECRET), 403),
    call(
        WEBHOOK,
        "label-namespace",
        Call(
            "PATCH",
            "/api/v1/namespaces/{namespace}",
            {"metadata": {"labels": {"a": "b"}}},
            MERGE_PATCH,
        ),
        403,
    ),
    call(WEBHOOK, "patch-config-spec", Call("PATCH", CONFIG, CONFIG_SPEC, MERGE_PATCH), 403),
    call(
        WEBHOOK,
        "patch-config-status",
        Call("PATCH", CONFIG + "/status", CONFIG_STATUS, MERGE_PATCH),
        403,
    ),
    call(WEBHOOK, "create-event", Call("POST", EVENTS, event), 403),
    call(WEBHOOK, "lease-in-release-ns", Call("POST", RELEASE_LEASES, lease), 403),
    # Where a new pod may land, and whether a live reconciler holds its Lease.
    call(WEBHOOK, "list-nodes", Call("GET", "/api/v1/nodes"), 200),
    call(WEBHOOK, "list-the-reconciler-lease", Call("GET", RECONCILER_LEASE), 200),
    call(WEBHOOK, "list-every-lease", Call("GET", RELEASE_LEASES), 403),
]


@pytest.mark.parametrize(("account", "request_", "status"), REQUESTS)
def test_real_request(
    control_plane: Cluster,
    tokens: dict[ServiceAccount, str],
    workload: Workload,
    account: ServiceAccount,
    request_: Call,
    status: int,
) -> None:
    """RBAC cannot restrict which fields a `patch` on `pods` touches: the grant the
    reconciler needs for its status annotation would allow any pod patch. The chart's
    ValidatingAdmissionPolicy holds it to that annotation (other annotations, labels and
    the image are refused with 403 from the policy); update, delete, create, secrets and
    configmaps are refused by RBAC itself."""
    body = request_.body(workload) if callable(request_.body) else request_.body
    result = request_as(
        control_plane,
        token=tokens[account],
        method=request_.method,
        path=request_.path.format(**workload._asdict(), release_ns=RELEASE_NAMESPACE),
        body=body,
        content_type=request_.content_type,
    )
    assert result.status == status, result.message


def test_a_policy_denial_names_the_policy(
    control_plane: Cluster, tokens: dict[ServiceAccount, str], workload: Workload
) -> None:
    result = request_as(
        control_plane,
        token=tokens[RECONCILER],
        method="PATCH",
        path=f"/api/v1/namespaces/{workload.namespace}/pods/{workload.pod}",
        body={"metadata": {"labels": {"app": "x"}}},
        content_type=MERGE_PATCH,
    )
    assert result.status == 403
    assert f"ValidatingAdmissionPolicy '{RELEASE}-reconciler-pod-writes'" in result.message
    assert "only the kube-headroom.dev/status annotation" in result.message


# -- metrics-reader ---------------------------------------------------------------------


def test_metrics_reader_grants_get_on_metrics(
    control_plane: Cluster, chart_accounts: None, workload: Workload
) -> None:
    scraper = ServiceAccount(namespace=workload.namespace, name="scraper")
    binding = f"rbac-test-scraper-{workload.namespace}"
    control_plane.kubectl(
        "create", "serviceaccount", scraper.name, f"--namespace={scraper.namespace}"
    )
    token = service_account_token(control_plane, scraper)

    def scrape() -> int:
        return request_as(control_plane, token=token, method="GET", path="/metrics").status

    assert not can_i(control_plane, scraper, verb="get", resource="/metrics")
    assert scrape() == 403
    control_plane.kubectl(
        "create", "clusterrolebinding", binding, f"--clusterrole={RELEASE}-metrics-reader",
        f"--serviceaccount={scraper.namespace}:{scraper.name}",
    )  # fmt: skip
    try:
        assert can_i(control_plane, scraper, verb="get", resource="/metrics")
        # The API server serves its own /metrics behind the same non-resource rule.
        eventually(lambda: scrape() == 200, timeout=10, what="an authorized scrape")
        assert not can_i(control_plane, scraper, verb="list", resource="pods")
    finally:
        control_plane.kubectl("delete", "clusterrolebinding", binding)


# -- the processes under their accounts -------------------------------------------------


@contextmanager
def running(args: list[str], log: Path) -> Iterator[subprocess.Popen[bytes]]:
    with log.open("wb") as handle:
        process = subprocess.Popen(
            [sys.executable, "-m", *args], cwd=REPO, stdout=handle, stderr=subprocess.STDOUT
        )
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=30)


def forbidden_lines(log: Path) -> list[str]:
    """Log lines reporting a refusal: every 403 the API server sends says "forbidden"."""
    return [line for line in log.read_text().splitlines() if "forbidden" in line.lower()]


def http_status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except (OSError, urllib.error.URLError):
        return None


def adjustments(cluster: Cluster, namespace: str) -> str:
    return cluster.kubectl(
        "get", "events", f"--namespace={namespace}", "--field-selector=reason=CPULimitAdjusted",
        "-o", "name",
    )  # fmt: skip


def test_reconciler_does_its_job_under_its_account_without_a_403(
    control_plane: Cluster, workload: Workload, namespace: str, tmp_path: Path
) -> None:
    """Its watches, resize, annotation, event, config status and Lease all go through."""
    control_plane.kubectl("label", "namespace", namespace, "kube-headroom.dev/mode=managed")
    control_plane.kubectl(
        "create", f"--namespace={namespace}", "-f", "-",
        input=json.dumps(pod_manifest("managed", node=workload.node, cpu="500m")),
    )  # fmt: skip
    control_plane.kubectl(
        "patch", CONFIGS, CONFIG_NAME, "--type=merge",
        "-p", json.dumps({"spec": {"dryRun": False, "debouncePeriod": "100ms"}}),
    )  # fmt: skip
    log = tmp_path / "reconciler.log"
    args = [
        "reconciler.main",
        f"--kubeconfig={service_account_kubeconfig(control_plane, RECONCILER)}",
        "--leader-elect",
        "--metrics-bind-address=0",
        "--health-probe-bind-address=0",
    ]

    def pod() -> dict[str, Any]:
        return dict(
            json.loads(
                control_plane.kubectl("get", "pod", "managed", f"-n={namespace}", "-o", "json")
            )
        )

    def config_status() -> dict[str, Any]:
        config = json.loads(control_plane.kubectl("get", CONFIGS, CONFIG_NAME, "-o", "json"))
        return dict(config.get("status", {}))

    try:
        with running(args, log):
            eventually(
                lambda: pod()["spec"]["containers"][0]["resources"].get("limits", {}).get("cpu"),
                what="a resized CPU limit",
            )
            # The annotation is a patch of its own, after the resize.
            eventually(
                lambda: "kube-headroom.dev/status" in pod()["metadata"].get("annotations", {}),
                what="the status annotation",
            )
            eventually(partial(adjustments, control_plane, namespace), what="an event")
            eventually(lambda: config_status().get("managedPods") == 1, what="config status")
            control_plane.kubectl(
                "get", f"{LEASES}/{RELEASE}-reconciler", f"-n={RELEASE_NAMESPACE}"
            )
    finally:
        control_plane.kubectl(
            "patch", CONFIGS, CONFIG_NAME, "--type=merge", "-p", '{"spec":{"dryRun":true}}'
        )
    assert forbidden_lines(log) == []


def test_webhook_syncs_its_caches_under_its_account_without_a_403(
    control_plane: Cluster, chart_accounts: None, tmp_path: Path
) -> None:
    probes = free_port()
    log = tmp_path / "webhook.log"
    args = [
        "webhook.main",
        f"--kubeconfig={service_account_kubeconfig(control_plane, WEBHOOK)}",
        f"--bind-address=127.0.0.1:{free_port()}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{probes}",
    ]
    with running(args, log) as process:
        # Ready means every cache it serves admission from has listed and is watching.
        ready = f"http://127.0.0.1:{probes}/readyz"
        eventually(
            lambda: http_status(ready) == 200 or process.poll() is not None,
            timeout=60,
            what="webhook readiness",
        )
        assert process.poll() is None, log.read_text()
    assert forbidden_lines(log) == []
