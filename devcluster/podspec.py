"""A pod's container, as ``podman run`` arguments: what a kubelet would give the runtime.

Pure: the caller resolves volumes to host paths and passes the pod's network namespace,
cgroup parent and image user. Every field the translation does not implement raises
``UnsupportedPodSpec`` naming it, rather than being dropped: the point of running the
chart's pods for real is to run exactly what the chart renders.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.quantity import parse_cpu_millis, parse_quantity

Json = dict[str, Any]

# The fields the translation honours; any other field that is set is refused.
_POD_SECURITY = frozenset(
    {"runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "supplementalGroups",
     "seccompProfile", "fsGroupChangePolicy"}
)  # fmt: skip
_CONTAINER_SECURITY = frozenset(
    {"runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
     "allowPrivilegeEscalation", "capabilities", "seccompProfile", "privileged"}
)  # fmt: skip
_CONTAINER_FIELDS = frozenset(
    {"name", "image", "imagePullPolicy", "command", "args", "env", "ports", "livenessProbe",
     "readinessProbe", "startupProbe", "resources", "securityContext", "volumeMounts",
     "terminationMessagePath", "terminationMessagePolicy", "workingDir"}
)  # fmt: skip
SECCOMP_DEFAULT_PROFILE = "/usr/share/containers/seccomp.json"


class UnsupportedPodSpec(ValueError):
    """The pod asks for something the harness cannot give a container faithfully."""


@dataclass(frozen=True)
class HostMount:
    """A pod volume's host directory, bind-mounted at ``target``."""

    source: str
    target: str
    read_only: bool


def field_value(pod: Json, path: str) -> str:
    """A downward-API ``fieldPath`` of ``pod`` as the kubelet renders it."""
    meta, spec, status = pod["metadata"], pod["spec"], pod.get("status", {})
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": status.get("podIP"),
        "status.hostIP": status.get("hostIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    for prefix, source in (("metadata.labels", "labels"), ("metadata.annotations", "annotations")):
        values: dict[str, str] = meta.get(source, {})
        if path == prefix:
            return "\n".join(f"{k}={json.dumps(v)}" for k, v in sorted(values.items()))
        if path.startswith(f"{prefix}['") and path.endswith("']"):
            return values.get(path[len(prefix) + 2 : -2], "")
    raise UnsupportedPodSpec(f"fieldRef {path!r}")


def effective_user(pod: Json, container: Json, *, image_user: str) -> tuple[int, int | None]:
    """The uid (and gid, when set) the container runs as, enforcing ``runAsNonRoot`` as the
    kubelet does: a numeric non-zero uid, from the spec or the image."""
    pod_security = pod["spec"].get("securityContext", {})
    security = container.get("securityContext", {})
    uid = security.get("runAsUser", pod_security.get("runAsUser"))
    gid = security.get("runAsGroup", pod_security.get("runAsGroup"))
    non_root = security.get("runAsNonRoot", pod_security.get("runAsNonRoot", False))
    if uid is None:
        user, _, group = (image_user or "0").partition(":")
        if not user.isdigit():
            if non_root:
                raise UnsupportedPodSpec(
                    f"container {container['name']}: image has non-numeric user ({user}), "
                    "cannot verify user is non-root"
                )
            raise UnsupportedPodSpec(f"container {container['name']}: non-numeric image user")
        uid = int(user)
        if gid is None and group.isdigit():
            gid = int(group)
    if non_root and int(uid) == 0:
        raise UnsupportedPodSpec(f"container {container['name']}: runAsNonRoot and uid 0")
    return int(uid), None if gid is None else int(gid)


def _refuse_unknown(what: str, given: Mapping[str, Any], known: frozenset[str]) -> None:
    extra = sorted(k for k, v in given.items() if k not in known and v not in (None, [], {}))
    if extra:
        raise UnsupportedPodSpec(f"{what}: {', '.join(extra)}")


def memory_bytes(quantity: str) -> int:
    """A memory quantity (``512Mi``, ``1G``, bytes) in whole bytes."""
    return math.ceil(parse_quantity(quantity))


def _resources(container: Json) -> list[str]:
    resources = container.get("resources", {})
    limits, requests = resources.get("limits", {}), resources.get("requests", {})
    args = []
    if "memory" in limits:
        memory = memory_bytes(str(limits["memory"]))
        # No swap beyond the limit, as the kubelet sets it.
        args += [f"--memory={memory}", f"--memory-swap={memory}"]
    if "cpu" in limits:
        args.append(f"--cpus={parse_cpu_millis(str(limits['cpu'])) / 1000}")
    if "cpu" in requests:
        # The kubelet's shares: 1024 per core, at least 2.
        args.append(f"--cpu-shares={max(2, parse_cpu_millis(str(requests['cpu'])) * 1024 // 1000)}")
    return args


def _security(pod: Json, container: Json, *, uid: int, gid: int | None) -> list[str]:
    pod_security = pod["spec"].get("securityContext", {})
    security = container.get("securityContext", {})
    _refuse_unknown("pod securityContext", pod_security, _POD_SECURITY)
    _refuse_unknown(f"container {container['name']} securityContext", security, _CONTAINER_SECURITY)
    if security.get("privileged"):
        raise UnsupportedPodSpec(f"container {container['name']}: privileged")
    args = [f"--user={uid}:{gid if gid is not None else 0}"]
    groups = list(pod_security.get("supplementalGroups", []))
    if "fsGroup" in pod_security:
        groups.append(pod_security["fsGroup"])
    args += [f"--group-add={group}" for group in groups]
    if security.get("readOnlyRootFilesystem"):
        # Only what the pod mounts is writable: no tmpfs of podman's own on /tmp or /run.
        args += ["--read-only", "--read-only-tmpfs=false"]
    if security.get("allowPrivilegeEscalation") is False:
        args.append("--security-opt=no-new-privileges")
    capabilities = security.get("capabilities", {})
    args += [f"--cap-drop={cap.lower()}" for cap in capabilities.get("drop", [])]
    args += [f"--cap-add={cap.lower()}" for cap in capabilities.get("add", [])]
    seccomp = security.get("seccompProfile", pod_security.get("seccompProfile", {}))
    kind = seccomp.get("type", "Unconfined")
    if kind == "RuntimeDefault":
        args.append(f"--security-opt=seccomp={SECCOMP_DEFAULT_PROFILE}")
    elif kind == "Unconfined":
        args.append("--security-opt=seccomp=unconfined")
    else:
        raise UnsupportedPodSpec(f"container {container['name']}: seccompProfile {kind}")
    return args


def _mount_args(mounts: Sequence[HostMount]) -> list[str]:
    return [
        f"--volume={mount.source}:{mount.target}:{'ro' if mount.read_only else 'rw'}"
        for mount in mounts
    ]


def run_arguments(
    pod: Json,
    container: Json,
    *,
    name: str,
    netns: str,
    cgroup_parent: str,
    image_user: str,
    mounts: Sequence[HostMount],
    environment: Mapping[str, str],
    labels: Mapping[str, str],
    detach: bool = True,
) -> list[str]:
    """``podman run`` arguments for ``container`` of ``pod``: command, args, env, user,
    security, resources and mounts as the pod spec says."""
    _refuse_unknown(f"container {container['name']}", container, _CONTAINER_FIELDS)
    uid, gid = effective_user(pod, container, image_user=image_user)
    args = [
        "run",
        *(["--detach"] if detach else []),
        f"--name={name}",
        f"--network=ns:{netns}",
        f"--cgroup-parent={cgroup_parent}",
        f"--hostname={pod['metadata']['name']}",
        # Pulls follow imagePullPolicy before the run.
        "--pull=never",
        *(f"--label={key}={value}" for key, value in sorted(labels.items())),
        *_security(pod, container, uid=uid, gid=gid),
        *_resources(container),
        *_mount_args(mounts),
        *(f"--env={key}={value}" for key, value in environment.items()),
    ]
    if container.get("workingDir"):
        args.append(f"--workdir={container['workingDir']}")
    command = container.get("command")
    if command:
        # The kubelet's rule: a command replaces the image's entrypoint and its arguments.
        args.append(f"--entrypoint={json.dumps(command)}")
    args.append(container["image"])
    args += container.get("args", [])
    return args


def port_number(container: Json, port: int | str) -> int:
    """A probe's port: a number, or the name of one of the container's ports."""
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports", []):
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise UnsupportedPodSpec(f"container {container['name']}: no port named {port!r}")
