"""Acting as the operator chart's ServiceAccounts on the test control plane.

`chart_rbac` renders the chart with the real helm and applies only its identities and
grants (ServiceAccounts, Roles, bindings, and the admission policy that narrows the
reconciler's pod writes), so a test can run a process under exactly the permissions an
installation gives it: through a kubeconfig holding the account's token, or by asking the
API server what the account may do.
"""

from __future__ import annotations

import base64
import json
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import yaml

from devcluster.binaries import kubernetes_version
from tests.integration.conftest import REPO, Cluster, run_helm

RELEASE = "kube-headroom"
RELEASE_NAMESPACE = "kube-headroom-system"
CHART = REPO / "chart" / "kube-headroom"
RBAC_KINDS = frozenset(
    {
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
    }
)
JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
_RETRIES = 10

Manifest = dict[str, Any]


@dataclass(frozen=True)
class ServiceAccount:
    namespace: str
    name: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


RECONCILER = ServiceAccount(namespace=RELEASE_NAMESPACE, name=f"{RELEASE}-reconciler")
WEBHOOK = ServiceAccount(namespace=RELEASE_NAMESPACE, name=f"{RELEASE}-webhook")


def chart_rbac_manifests(cluster: Cluster, helm_bin: Path) -> list[Manifest]:
    """The operator chart's RBAC objects, as `make deploy` would install them."""
    rendered = run_helm(
        cluster,
        helm_bin,
        "template",
        RELEASE,
        str(CHART),
        "--namespace",
        RELEASE_NAMESPACE,
        "--kube-version",
        kubernetes_version(),
    )
    return [doc for doc in yaml.safe_load_all(rendered) if doc and doc["kind"] in RBAC_KINDS]


@contextmanager
def chart_rbac(cluster: Cluster, helm_bin: Path) -> Iterator[list[Manifest]]:
    """Apply the chart's RBAC objects for the duration of the block; yields them.

    Issue tokens inside the block: deleting a ServiceAccount revokes its tokens. The
    release namespace is created if missing and kept afterwards (a namespace still
    terminating would refuse a later `make deploy`). Not for use while the operator chart
    itself is deployed: the block deletes the same objects on exit.
    """
    objects = chart_rbac_manifests(cluster, helm_bin)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": RELEASE_NAMESPACE}}
    cluster.apply({"apiVersion": "v1", "kind": "List", "items": [namespace, *objects]})
    try:
        yield objects
    finally:
        cluster.kubectl(
            "delete",
            "-f",
            "-",
            "--ignore-not-found",
            "--wait=false",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}),
        )


def service_account_token(
    cluster: Cluster, account: ServiceAccount, *, duration: str = "1h"
) -> str:
    """A bound token from the TokenRequest API (`kubectl create token`)."""
    return cluster.kubectl(
        "create", "token", account.name, "--namespace", account.namespace, f"--duration={duration}"
    ).strip()


def service_account_kubeconfig(cluster: Cluster, account: ServiceAccount) -> Path:
    """Write a kubeconfig that authenticates as `account` with a fresh token.

    It lives beside the control plane's own files and carries the cluster CA inline, so a
    process started with it (`--kubeconfig` or `KUBECONFIG`) needs nothing else.
    """
    path = cluster.plane.work_dir / "service-accounts" / f"{account.namespace}.{account.name}"
    path.parent.mkdir(exist_ok=True)
    ca = base64.b64encode(cluster.ca_file.read_bytes()).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "headroom-local",
                "cluster": {"server": cluster.server, "certificate-authority-data": ca},
            }
        ],
        "users": [
            {"name": account.name, "user": {"token": service_account_token(cluster, account)}}
        ],
        "contexts": [
            {"name": account.name, "context": {"cluster": "headroom-local", "user": account.name}}
        ],
        "current-context": account.name,
    }
    path.write_text(json.dumps(config, indent=2))
    path.chmod(0o600)
    return path


@contextmanager
def cluster_role_account(
    cluster: Cluster, account: ServiceAccount, rules: Sequence[Mapping[str, Any]]
) -> Iterator[Path]:
    """For the block, ``account`` exists, bound to a ClusterRole of ``rules`` (role and
    binding named after it); yields a kubeconfig holding its token."""
    name, namespace = account.name, account.namespace
    cluster.apply(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": name, "namespace": namespace}},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": name}, "rules": list(rules)},
                {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": name},
                 "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                             "name": name},
                 "subjects": [{"kind": "ServiceAccount", "name": name,
                               "namespace": namespace}]},
            ],
        }
    )  # fmt: skip
    try:
        yield service_account_kubeconfig(cluster, account)
    finally:
        cluster.kubectl("delete", "clusterrole,clusterrolebinding", name, "--ignore-not-found")


def can_i(
    cluster: Cluster,
    account: ServiceAccount,
    *,
    verb: str,
    resource: str,
    subresource: str | None = None,
    namespace: str | None = None,
) -> bool:
    """`kubectl auth can-i`, impersonating `account` (the server adds its groups).

    `resource` is `plural[.group]` or a non-resource URL such as `/metrics`; without a
    `namespace` the question is asked across all namespaces.
    """
    args = ["auth", "can-i", verb, resource, f"--as={account.username}"]
    if not resource.startswith("/"):
        args += ["--all-namespaces"] if namespace is None else [f"--namespace={namespace}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    result = subprocess.run(
        [str(cluster.bin_dir / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    answer = result.stdout.strip()
    if answer not in {"yes", "no"}:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {result.stderr}")
    return answer == "yes"


@dataclass(frozen=True)
class ApiResult:
    status: int
    body: Mapping[str, Any]

    @property
    def message(self) -> str:
        return str(self.body.get("message", ""))


def request_as(
    cluster: Cluster,
    *,
    token: str,
    method: str,
    path: str,
    body: Mapping[str, Any] | Sequence[Any] | None = None,
    content_type: str = JSON,
) -> ApiResult:
    """One real API request with a bearer token; the status code whatever it is.

    429 is retried after the delay the server names, as client-go does: a CRD's storage
    answers it for a moment after the CRD is established.
    """
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{cluster.server}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
    )
    context = ssl.create_default_context(cafile=str(cluster.ca_file))
    for _ in range(_RETRIES):
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return ApiResult(status=response.status, body=_json(response.read()))
        except urllib.error.HTTPError as error:
            result = ApiResult(status=error.code, body=_json(error.read()))
        if result.status != HTTPStatus.TOO_MANY_REQUESTS:
            return result
        time.sleep(int(result.body.get("details", {}).get("retryAfterSeconds", 1)))
    return result


def _json(raw: bytes) -> Mapping[str, Any]:
    # The API answers JSON objects; anything else (a /metrics page) is kept as text.
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, dict) else {"message": raw.decode(errors="replace")}
