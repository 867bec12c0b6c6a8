"""Real containers for the pods KWOK runs on its simulated nodes.

KWOK plays the kubelet's API side: it binds nothing, but reports a pod Running with an IP
from its pod CIDR. ``PodRunner`` watches the pods of a few namespaces and, for each one
KWOK reports Running, does what a kubelet and its runtime would do, no more:

- a network namespace holding the pod's IP (``devcluster.podnet``);
- the pod's volumes on the host (``devcluster.volumes``): Secrets, ConfigMaps and the
  projected service-account token (a TokenRequest bound to the pod), refreshed every
  poll with the kubelet's atomic symlink swap;
- its images pulled per ``imagePullPolicy``, its init containers run to completion, then
  its containers started with podman exactly as the pod spec says (``devcluster.podspec``),
  plus the variables a kubelet adds: ``KUBERNETES_SERVICE_HOST``/``PORT``, here the API
  server's address as the pod reaches it;
- probes run against the pod IP; a container that exits or fails its liveness probe is
  restarted and counted, as ``restartPolicy: Always`` does.

A pod that disappears or gets a deletion timestamp has its containers stopped. Status
stays KWOK's: the runner writes nothing to the API server except TokenRequests.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import socket
import ssl
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.apipaths import CONFIG_MAPS, PODS, SECRETS
from app.core.quantity import parse_cpu_millis
from devcluster.containers import ContainerError, Engine
from devcluster.kubeapi import KubeAPI, KubeAPIError
from devcluster.podnet import API_SERVICE_IP, PodNetwork, PodNetworkError
from devcluster.podspec import (
    HostMount,
    UnsupportedPodSpec,
    field_value,
    memory_bytes,
    port_number,
    run_arguments,
)
from devcluster.volumes import PendingVolume, PodVolumes

logger = logging.getLogger(__name__)

Json = dict[str, Any]
RUN_LABEL = "dev.kube-headroom.e2e/run"
POD_LABEL = "dev.kube-headroom.e2e/pod"
INIT_TIMEOUT = 120.0


class PodRunError(RuntimeError):
    """A pod's containers could not be run, or did not become ready."""


@dataclass
class Container:
    """One of a pod's containers as podman runs it."""

    spec: Json
    runtime_name: str
    restarts: int = 0
    ready: bool = False
    live_failures: int = 0
    started: float = field(default_factory=time.monotonic)
    # Probe kind -> when it is next due (each probe's periodSeconds, as the kubelet runs it).
    due: dict[str, float] = field(default_factory=dict)


@dataclass
class RunningPod:
    uid: str
    namespace: str
    name: str
    ip: str
    labels: dict[str, str]
    volumes: PodVolumes
    containers: dict[str, Container]

    @property
    def ready(self) -> bool:
        return all(c.ready for c in self.containers.values())


def is_running(pod: Json) -> bool:
    """KWOK reports the pod Running on a node, with an IP, and it is not being deleted."""
    status = pod.get("status", {})
    return (
        status.get("phase") == "Running"
        and bool(status.get("podIP"))
        and bool(pod["spec"].get("nodeName"))
        and not pod["metadata"].get("deletionTimestamp")
    )


@dataclass
class PodRunner:
    api: KubeAPI
    engine: Engine
    network: PodNetwork
    namespaces: Sequence[str]
    work_dir: Path
    api_server_port: int
    pull_cert_dir: Path
    run_id: str
    poll_seconds: float = 1.0
    pods: dict[str, RunningPod] = field(default_factory=dict, init=False)
    problems: dict[str, str] = field(default_factory=dict, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _stop: threading.Event = field(default_factory=threading.Event, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)

    # -- lifecycle -------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="pod-runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        for uid in list(self.pods):
            self._stop_pod(uid)
        # Anything of this run that a failed start left behind.
        leftovers = self.engine.podman(
            "ps", "--all", "--quiet", f"--filter=label={RUN_LABEL}={self.run_id}", check=False
        ).stdout.split()
        if leftovers:
            self.engine.podman("rm", "--force", "--time=5", *leftovers, check=False)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.sync()
            except (KubeAPIError, OSError, ContainerError, PodNetworkError) as err:
                logger.warning("pod runner: %s", err)
            self._stop.wait(self.poll_seconds)

    # -- one pass ----------------------------------------------------------------

    def sync(self) -> None:
        wanted: dict[str, Json] = {}
        for namespace in self.namespaces:
            listed = self.api.get(PODS.path(namespace=namespace)) or {"items": []}
            wanted.update({p["metadata"]["uid"]: p for p in listed["items"] if is_running(p)})
        for uid in list(self.pods):
            if uid not in wanted:
                self._stop_pod(uid)
        for uid, pod in wanted.items():
            running = self.pods.get(uid)
            if running is None:
                self._start_pod(pod)
            else:
                self._maintain(running)

    def _start_pod(self, pod: Json) -> None:
        meta = pod["metadata"]
        uid, where = meta["uid"], f"{meta['namespace']}/{meta['name']}"
        if uid in self.problems and not self.problems[uid].startswith("pending"):
            return
        volumes = PodVolumes(api=self.api, pod=pod, root=self.work_dir / uid / "volumes")
        try:
            volumes.prepare()
        except PendingVolume as pending:
            self.problems[uid] = f"pending: {pending}"
            return
        except UnsupportedPodSpec as err:
            self.problems[uid] = f"{where}: {err}"
            return
        try:
            netns = self.network.attach(key=uid, pod_ip=pod["status"]["podIP"])
        except PodNetworkError as err:
            self.problems[uid] = f"{where}: {err}"
            volumes.cleanup()
            return
        running = RunningPod(
            uid=uid,
            namespace=meta["namespace"],
            name=meta["name"],
            ip=pod["status"]["podIP"],
            labels=dict(meta.get("labels", {})),
            volumes=volumes,
            containers={},
        )
        try:
            for spec in pod["spec"].get("initContainers", []):
                self._run(pod, spec, netns=str(netns), volumes=volumes, detach=False)
            for spec in pod["spec"]["containers"]:
                name = self._run(pod, spec, netns=str(netns), volumes=volumes, detach=True)
                running.containers[spec["name"]] = Container(spec=spec, runtime_name=name)
        except (UnsupportedPodSpec, ContainerError, subprocess.TimeoutExpired) as err:
            self.problems[uid] = f"{where}: {err}"
            with self._lock:
                self.pods[uid] = running
            self._stop_pod(uid)
            return
        self.problems.pop(uid, None)
        with self._lock:
            self.pods[uid] = running
        logger.info("pod %s: %s started at %s", where, list(running.containers), running.ip)

    def _run(self, pod: Json, spec: Json, *, netns: str, volumes: PodVolumes, detach: bool) -> str:
        meta = pod["metadata"]
        name = f"e2e-{self.run_id}-{meta['name']}-{spec['name']}"[:120]
        image = spec["image"]
        self._pull(image, spec.get("imagePullPolicy", "IfNotPresent"))
        inspected = self.engine.inspect("image", image) or {}
        arguments = run_arguments(
            pod,
            spec,
            name=name,
            netns=netns,
            cgroup_parent=self.engine.cgroup_parent,
            image_user=str(inspected.get("Config", {}).get("User", "")),
            mounts=self._mounts(spec, volumes),
            environment=self._environment(pod, spec),
            labels={RUN_LABEL: self.run_id, POD_LABEL: meta["uid"]},
            detach=detach,
        )
        if detach:
            self.engine.podman(*arguments)
            return name
        arguments.insert(1, "--rm")
        self.engine.podman(*arguments, timeout=INIT_TIMEOUT)
        return name

    def _pull(self, image: str, policy: str) -> None:
        present = self.engine.podman("image", "exists", image, check=False).returncode == 0
        if policy == "Always" or (policy == "IfNotPresent" and not present):
            self.engine.podman("pull", "--quiet", f"--cert-dir={self.pull_cert_dir}", image)
        elif not present:
            raise ContainerError(f"image {image} not present and imagePullPolicy is {policy}")

    def _mounts(self, spec: Json, volumes: PodVolumes) -> list[HostMount]:
        mounts = []
        for mount in spec.get("volumeMounts", []):
            volumes.volume(mount["name"])
            source = volumes.path(mount["name"])
            if mount.get("subPath"):
                # A subPath mount binds what the path resolves to now, so (as with the
                # kubelet) it never sees later updates.
                source = Path(os.path.realpath(source / mount["subPath"]))
            mounts.append(
                HostMount(str(source), mount["mountPath"], bool(mount.get("readOnly", False)))
            )
        return mounts

    def _environment(self, pod: Json, spec: Json) -> dict[str, str]:
        # What a kubelet adds from the kubernetes Service; here the API server's own port,
        # since nothing maps the Service port.
        environment = {
            "KUBERNETES_SERVICE_HOST": API_SERVICE_IP,
            "KUBERNETES_SERVICE_PORT": str(self.api_server_port),
        }
        for variable in spec.get("env", []):
            environment[variable["name"]] = self._env_value(pod, spec, variable)
        return environment

    def _env_value(self, pod: Json, spec: Json, variable: Json) -> str:
        if "valueFrom" not in variable:
            return str(variable.get("value", ""))
        source = variable["valueFrom"]
        namespace = pod["metadata"]["namespace"]
        if "fieldRef" in source:
            return field_value(pod, source["fieldRef"]["fieldPath"])
        if "resourceFieldRef" in source:
            return _resource_value(pod, spec, source["resourceFieldRef"])
        for kind, resource in (("secretKeyRef", SECRETS), ("configMapKeyRef", CONFIG_MAPS)):
            if kind in source:
                ref = source[kind]
                found = self.api.get(resource.path(namespace=namespace, name=ref["name"]))
                data = (found or {}).get("data") or {}
                if ref["key"] not in data:
                    raise UnsupportedPodSpec(f"env {variable['name']}: {ref['name']} lacks key")
                value = data[ref["key"]]
                return base64.b64decode(value).decode() if kind == "secretKeyRef" else str(value)
        raise UnsupportedPodSpec(f"env {variable['name']}: {sorted(source)}")

    # -- keeping pods running ------------------------------------------------------

    def _maintain(self, running: RunningPod) -> None:
        changed = running.volumes.refresh()
        if changed:
            logger.info("pod %s/%s: volumes %s updated", running.namespace, running.name, changed)
        for container in running.containers.values():
            state = (self.engine.inspect("container", container.runtime_name) or {}).get(
                "State", {}
            )
            if not state.get("Running"):
                logger.warning(
                    "pod %s/%s: container %s exited (%s); restarting",
                    running.namespace, running.name, container.spec["name"],
                    state.get("ExitCode"),
                )  # fmt: skip
                self._restart(container)
                continue
            readiness = self._probe(running, container, "readinessProbe")
            if readiness is not None:
                container.ready = readiness
            liveness = self._probe(running, container, "livenessProbe")
            if liveness is False:
                container.live_failures += 1
                threshold = int(container.spec["livenessProbe"].get("failureThreshold", 3))
                if container.live_failures >= threshold:
                    logger.warning(
                        "pod %s/%s: container %s failed liveness %d times; restarting",
                        running.namespace, running.name, container.spec["name"], threshold,
                    )  # fmt: skip
                    self._restart(container)
            elif liveness is True:
                container.live_failures = 0

    def _restart(self, container: Container) -> None:
        self.engine.podman("restart", "--time=10", container.runtime_name, check=False)
        container.restarts += 1
        container.ready = False
        container.live_failures = 0
        container.started = time.monotonic()
        container.due.clear()

    def _probe(self, running: RunningPod, container: Container, kind: str) -> bool | None:
        """The probe's result when it is due; None when not (a container without a
        readiness probe is ready, one without a liveness probe is never restarted)."""
        probe = container.spec.get(kind)
        if probe is None:
            return True if kind == "readinessProbe" else None
        now = time.monotonic()
        first = container.started + float(probe.get("initialDelaySeconds", 0))
        if now < max(first, container.due.get(kind, 0.0)):
            return None
        container.due[kind] = now + float(probe.get("periodSeconds", 10))
        timeout = float(probe.get("timeoutSeconds", 1))
        if "httpGet" in probe:
            get = probe["httpGet"]
            port = port_number(container.spec, get["port"])
            scheme = str(get.get("scheme", "HTTP")).lower()
            url = f"{scheme}://{get.get('host') or running.ip}:{port}{get.get('path', '/')}"
            context = ssl.create_default_context()
            # The kubelet does not verify a probe's certificate either.
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
            try:
                with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
                    return bool(200 <= response.status < 400)
            except (OSError, urllib.error.URLError):
                return False
        if "tcpSocket" in probe:
            port = port_number(container.spec, probe["tcpSocket"]["port"])
            with contextlib.suppress(OSError):
                socket.create_connection((running.ip, port), timeout).close()
                return True
            return False
        if "exec" in probe:
            result = self.engine.podman(
                "exec", container.runtime_name, *probe["exec"]["command"], check=False, timeout=30
            )
            return result.returncode == 0
        raise UnsupportedPodSpec(f"{kind} of container {container.spec['name']}: {sorted(probe)}")

    def _stop_pod(self, uid: str) -> None:
        with self._lock:
            running = self.pods.pop(uid, None)
        if running is None:
            return
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for name, container in running.containers.items():
            # Kept for a failed run's artifacts; the containers go with the pod.
            (logs / f"{running.name}-{name}.log").write_text(self.logs(container))
        names = [c.runtime_name for c in running.containers.values()]
        if names:
            self.engine.podman("rm", "--force", "--time=10", *names, check=False)
        self.network.detach(uid)
        running.volumes.cleanup()
        logger.info("pod %s/%s: containers stopped", running.namespace, running.name)

    # -- for tests -----------------------------------------------------------------

    def find(self, namespace: str, matches: Callable[[RunningPod], bool]) -> list[RunningPod]:
        with self._lock:
            return [p for p in self.pods.values() if p.namespace == namespace and matches(p)]

    def wait_ready(
        self, namespace: str, matches: Callable[[RunningPod], bool], *, timeout: float = 180
    ) -> RunningPod:
        """The first ready pod of ``namespace`` that ``matches``; raises with what is known
        about the pods that did not make it."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready = [p for p in self.find(namespace, matches) if p.ready]
            if ready:
                return ready[0]
            time.sleep(0.5)
        raise PodRunError(
            f"no matching pod of {namespace} became ready in {timeout}s; "
            f"problems: {self.problems or 'none'}; running: "
            + "; ".join(self.describe(p) for p in self.find(namespace, matches))
        )

    def describe(self, running: RunningPod) -> str:
        parts = []
        for name, container in running.containers.items():
            logs = self.logs(container, lines=15)
            parts.append(
                f"{running.name}/{name} ready={container.ready} restarts={container.restarts}"
                f"\n{logs}"
            )
        return "\n".join(parts)

    def logs(self, container: Container, *, lines: int | None = None) -> str:
        tail = [f"--tail={lines}"] if lines else []
        result = self.engine.podman("logs", *tail, container.runtime_name, check=False)
        return result.stdout + result.stderr


def _resource_value(pod: Json, spec: Json, ref: Json) -> str:
    """A resourceFieldRef of the container itself (limits or requests of cpu/memory)."""
    container = spec
    if ref.get("containerName") and ref["containerName"] != spec["name"]:
        container = next(c for c in pod["spec"]["containers"] if c["name"] == ref["containerName"])
    kind, _, resource = str(ref["resource"]).partition(".")
    value = container.get("resources", {}).get(kind, {}).get(resource)
    if value is None:
        raise UnsupportedPodSpec(f"resourceFieldRef {ref['resource']} is not set on the container")
    divisor = str(ref.get("divisor", "1"))
    if resource == "cpu":
        millis, per = parse_cpu_millis(str(value)), parse_cpu_millis(divisor)
        return str(-(-millis // per))
    return str(-(-memory_bytes(str(value)) // memory_bytes(divisor)))
