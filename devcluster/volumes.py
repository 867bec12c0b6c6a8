"""A pod's volumes on the host, kept current the way a kubelet keeps them.

Secret, ConfigMap, downward-API and projected volumes (including the service-account
token the API server's ServiceAccount admission adds to every pod) are written to one
directory per volume with the kubelet's atomic layout: the files live in a timestamped
directory, ``..data`` points at it, and each top-level name is a symlink through
``..data``. An update writes a new timestamped directory and swaps ``..data`` in one
rename, so a reader (a bind mount shows the directory live inside the container) never
sees half of an update. ``refresh()`` re-reads the sources and swaps when they changed:
that is how a renewed certificate reaches a running container's files.

emptyDir volumes are directories (``medium: Memory``: a tmpfs of the size limit, which
needs the private mount namespace ``make e2e`` runs in). Other volume types raise
``UnsupportedPodSpec``.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.apipaths import CONFIG_MAPS, SECRETS, SERVICE_ACCOUNTS
from devcluster.kubeapi import KubeAPI
from devcluster.podspec import UnsupportedPodSpec, field_value, memory_bytes

logger = logging.getLogger(__name__)

Json = dict[str, Any]
# Relative path -> (content, mode).
FileSet = dict[str, tuple[bytes, int]]
DEFAULT_MODE = 0o644
DATA = "..data"
# The kubelet renews a projected token once 80% of its lifetime has passed.
TOKEN_RENEW_FRACTION = 0.8


class PendingVolume(Exception):  # a state the kubelet waits out, not a failure
    """A volume's source does not exist yet (a Secret cert-manager has not issued, say)."""


def _read_current(directory: Path) -> FileSet | None:
    data = directory / DATA
    if not data.is_symlink():
        return None
    root = data.resolve()
    found: FileSet = {}
    for path in root.rglob("*"):
        if path.is_file():
            found[str(path.relative_to(root))] = (path.read_bytes(), path.stat().st_mode & 0o7777)
    return found


def write_atomically(directory: Path, files: FileSet, *, gid: int | None) -> bool:
    """Make ``directory`` hold exactly ``files`` (kubelet layout); True when it changed."""
    if _read_current(directory) == {
        path: (content, _file_mode(mode, gid)) for path, (content, mode) in files.items()
    }:
        return False
    directory.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.UTC).strftime("..%Y_%m_%d_%H_%M_%S.%f")
    new = directory / stamp
    new.mkdir(mode=0o755)
    for relative, (content, mode) in files.items():
        target = new / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        _own(target, gid)
        target.chmod(_file_mode(mode, gid))
    _own(new, gid)
    old = (directory / DATA).resolve() if (directory / DATA).is_symlink() else None
    temporary = directory / "..data_tmp"
    temporary.unlink(missing_ok=True)
    temporary.symlink_to(stamp)
    temporary.rename(directory / DATA)
    tops = {relative.split("/", 1)[0] for relative in files}
    for top in tops:
        link = directory / top
        if not link.is_symlink():
            link.symlink_to(f"{DATA}/{top}")
    for entry in directory.iterdir():
        if entry.is_symlink() and not entry.name.startswith("..") and entry.name not in tops:
            entry.unlink()
    if old is not None and old != new:
        shutil.rmtree(old, ignore_errors=True)
    return True


def _file_mode(mode: int, gid: int | None) -> int:
    # With an fsGroup the kubelet makes read-only volume files group-readable.
    return mode | 0o440 if gid is not None else mode


def _own(path: Path, gid: int | None) -> None:
    if gid is not None:
        os.chown(path, 0, gid)


def _items(data: Mapping[str, bytes], items: list[Json] | None, mode: int, what: str) -> FileSet:
    if not items:
        return {key: (value, mode) for key, value in data.items()}
    files: FileSet = {}
    for item in items:
        if item["key"] not in data:
            raise PendingVolume(f"{what} has no key {item['key']!r}")
        files[item["path"]] = (data[item["key"]], int(item.get("mode", mode)))
    return files


@dataclass
class _Token:
    token: str
    renew_at: float


@dataclass
class PodVolumes:
    """The volumes of one pod under ``root`` (one directory per volume)."""

    api: KubeAPI
    pod: Json
    root: Path
    _tokens: dict[str, _Token] = field(default_factory=dict, init=False)
    _tmpfs: list[Path] = field(default_factory=list, init=False)

    @property
    def _namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def _gid(self) -> int | None:
        fs_group = self.pod["spec"].get("securityContext", {}).get("fsGroup")
        return None if fs_group is None else int(fs_group)

    def path(self, name: str) -> Path:
        return self.root / name

    def volume(self, name: str) -> Json:
        for volume in self.pod["spec"].get("volumes", []):
            if volume["name"] == name:
                return dict(volume)
        raise UnsupportedPodSpec(f"volumeMount of undeclared volume {name!r}")

    def prepare(self) -> None:
        """Materialise every volume; raises PendingVolume while a source is missing."""
        for volume in self.pod["spec"].get("volumes", []):
            directory = self.path(volume["name"])
            if "emptyDir" in volume:
                self._empty_dir(volume, directory)
            else:
                write_atomically(directory, self._files(volume), gid=self._gid)

    def refresh(self) -> list[str]:
        """Rewrite the volumes whose sources changed; returns their names."""
        changed = []
        for volume in self.pod["spec"].get("volumes", []):
            if "emptyDir" in volume:
                continue
            try:
                files = self._files(volume)
            except PendingVolume as pending:
                # The kubelet keeps the last content when a source disappears.
                logger.debug("volume %s kept: %s", volume["name"], pending)
                continue
            if write_atomically(self.path(volume["name"]), files, gid=self._gid):
                changed.append(volume["name"])
        return changed

    def cleanup(self) -> None:
        for mount in self._tmpfs:
            # Lazily: a container still being torn down may hold it a moment longer.
            subprocess.run(["umount", "--lazy", str(mount)], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)

    def _empty_dir(self, volume: Json, directory: Path) -> None:
        if directory.exists():
            return
        directory.mkdir(parents=True)
        directory.chmod(0o777)
        empty = volume["emptyDir"] or {}
        if empty.get("medium") == "Memory":
            # One tmpfs per pod volume, shared by every container that mounts it.
            options = "mode=0777"
            if empty.get("sizeLimit"):
                options += f",size={memory_bytes(str(empty['sizeLimit']))}"
            subprocess.run(
                ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
                check=True,
                capture_output=True,
            )
            self._tmpfs.append(directory)

    def _files(self, volume: Json) -> FileSet:
        if "secret" in volume:
            source = volume["secret"]
            mode = int(source.get("defaultMode", DEFAULT_MODE))
            return self._secret(source["secretName"], source, mode)
        if "configMap" in volume:
            source = volume["configMap"]
            mode = int(source.get("defaultMode", DEFAULT_MODE))
            return self._config_map(source["name"], source, mode)
        if "downwardAPI" in volume:
            source = volume["downwardAPI"]
            return self._downward(source["items"], int(source.get("defaultMode", DEFAULT_MODE)))
        if "projected" in volume:
            mode = int(volume["projected"].get("defaultMode", DEFAULT_MODE))
            files: FileSet = {}
            for source in volume["projected"]["sources"]:
                files.update(self._projection(source, mode))
            return files
        kinds = sorted(set(volume) - {"name"})
        raise UnsupportedPodSpec(f"volume {volume['name']}: {', '.join(kinds)}")

    def _projection(self, source: Json, mode: int) -> FileSet:
        if "secret" in source:
            return self._secret(source["secret"]["name"], source["secret"], mode)
        if "configMap" in source:
            return self._config_map(source["configMap"]["name"], source["configMap"], mode)
        if "downwardAPI" in source:
            return self._downward(source["downwardAPI"]["items"], mode)
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            return {token["path"]: (self._token(token).encode(), mode)}
        raise UnsupportedPodSpec(f"projected source {sorted(source)}")

    def _secret(self, name: str, source: Json, mode: int) -> FileSet:
        secret = self.api.get(SECRETS.path(namespace=self._namespace, name=name))
        if secret is None:
            if source.get("optional"):
                return {}
            raise PendingVolume(f"Secret {self._namespace}/{name} does not exist yet")
        data = {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}
        return _items(data, source.get("items"), mode, f"Secret {name}")

    def _config_map(self, name: str, source: Json, mode: int) -> FileSet:
        found = self.api.get(CONFIG_MAPS.path(namespace=self._namespace, name=name))
        if found is None:
            if source.get("optional"):
                return {}
            raise PendingVolume(f"ConfigMap {self._namespace}/{name} does not exist yet")
        data = {k: str(v).encode() for k, v in (found.get("data") or {}).items()}
        data |= {k: base64.b64decode(v) for k, v in (found.get("binaryData") or {}).items()}
        return _items(data, source.get("items"), mode, f"ConfigMap {name}")

    def _downward(self, items: list[Json], mode: int) -> FileSet:
        files: FileSet = {}
        for item in items:
            if "fieldRef" not in item:
                raise UnsupportedPodSpec(f"downwardAPI item {item['path']}: only fieldRef")
            value = field_value(self.pod, item["fieldRef"]["fieldPath"])
            files[item["path"]] = (value.encode(), int(item.get("mode", mode)))
        return files

    def _token(self, source: Json) -> str:
        """A TokenRequest for the pod's ServiceAccount, bound to the pod, as the kubelet
        asks for one; renewed past 80% of its lifetime."""
        key = f"{source.get('audience', '')}/{source['path']}"
        current = self._tokens.get(key)
        if current is not None and time.time() < current.renew_at:
            return current.token
        seconds = int(source.get("expirationSeconds", 3600))
        account = self.pod["spec"].get("serviceAccountName", "default")
        meta = self.pod["metadata"]
        spec: Json = {
            "expirationSeconds": seconds,
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "uid": meta["uid"],
            },
        }
        if source.get("audience"):
            spec["audiences"] = [source["audience"]]
        response = self.api.post(
            SERVICE_ACCOUNTS.path(namespace=self._namespace, name=account, subresource="token"),
            {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
        )
        token = str(response["status"]["token"])
        self._tokens[key] = _Token(token, time.time() + seconds * TOKEN_RENEW_FRACTION)
        return token
