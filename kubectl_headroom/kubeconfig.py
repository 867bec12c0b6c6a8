"""Which cluster, context and namespace a command talks to, found as kubectl finds them.

``--kubeconfig`` names one file; otherwise ``$KUBECONFIG`` lists files (unset or empty
means ``~/.kube/config``), merged with the first definition of each name winning; with no
file at all, a pod's in-cluster credentials. ``--context`` overrides the current-context,
and the context's namespace is the default for commands that take one namespace.

Every way this can go wrong is a `KubeconfigProblem` whose message names the cause and
the fix, read here from the files before the Kubernetes client sees them (the client would
report a missing file as an invalid one, and an empty ``$KUBECONFIG`` with no path).
"""

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

# Set in every pod by the kubelet, with the service-account files below.
_IN_CLUSTER_HOST: Final = "KUBERNETES_SERVICE_HOST"
_IN_CLUSTER_PORT: Final = "KUBERNETES_SERVICE_PORT"
_IN_CLUSTER_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_SECTIONS: Final = ("clusters", "users", "contexts")
DEFAULT_NAMESPACE: Final = "default"


class KubeconfigProblem(Exception):
    """No usable cluster, context or credentials; the message says why and what to do."""


@dataclass(frozen=True)
class Target:
    """Where a command connects: the files and context, or the pod's own credentials."""

    # The kubeconfig files, in merge order; empty for in-cluster credentials.
    paths: tuple[Path, ...]
    # The context used (None in-cluster).
    context: str | None
    namespace: str
    server: str
    # Where the paths came from, as an operator would set it: --kubeconfig, $KUBECONFIG…
    source: str

    @property
    def kubeconfig(self) -> str | None:
        """The files as the Kubernetes client takes them; None means in-cluster."""
        return os.pathsep.join(str(path) for path in self.paths) if self.paths else None

    def describe(self) -> str:
        if self.context is None:
            return "the pod's in-cluster credentials"
        return f'context "{self.context}" of {_files(self.paths)}'


def default_kubeconfig() -> Path:
    return Path.home() / ".kube" / "config"


def resolve(
    *, flag: str | None, context: str | None, environ: Mapping[str, str] = os.environ
) -> Target:
    paths, source = _files_to_read(flag, environ)
    if not paths:
        if context is not None:
            raise KubeconfigProblem(
                f"--context {context}: no kubeconfig to find it in ($KUBECONFIG is "
                f"{_state(environ)} and {default_kubeconfig()} does not exist): set KUBECONFIG "
                "to your kubeconfig file, or pass --kubeconfig FILE"
            )
        return _in_cluster(environ)
    merged = _merge([_read(path, source) for path in paths])
    return _target(merged, paths=tuple(paths), context=context, source=source)


def _files_to_read(flag: str | None, environ: Mapping[str, str]) -> tuple[list[Path], str]:
    """The existing files to merge and where they came from; none only when in-cluster."""
    if flag is not None:
        if not flag:
            raise KubeconfigProblem("--kubeconfig is empty: pass the path of a kubeconfig file")
        path = Path(flag).expanduser()
        if not path.is_file():
            raise KubeconfigProblem(
                f"kubeconfig {flag} (from --kubeconfig) does not exist: pass the path of "
                "an existing kubeconfig file"
            )
        return [path], "--kubeconfig"
    listed = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        existing = [path for path in listed if path.is_file()]
        if not existing:
            names = ", ".join(str(path) for path in listed)
            raise KubeconfigProblem(
                f"kubeconfig {names} (from $KUBECONFIG) does not exist: set KUBECONFIG to "
                f"your kubeconfig file (or unset it to use {default_kubeconfig()}), or pass "
                "--kubeconfig FILE"
            )
        return existing, "$KUBECONFIG"
    default = default_kubeconfig()
    if default.is_file():
        return [default], str(default)
    if environ.get(_IN_CLUSTER_HOST):
        return [], "in-cluster"
    raise KubeconfigProblem(
        f"no kubeconfig: $KUBECONFIG is {_state(environ)} and {default} does not exist: set "
        "KUBECONFIG to your kubeconfig file, or pass --kubeconfig FILE"
    )


def _state(environ: Mapping[str, str]) -> str:
    return "empty" if "KUBECONFIG" in environ else "unset"


def _read(path: Path, source: str) -> Mapping[str, Any]:
    fix = f"fix the file, or point {source} at a valid kubeconfig"
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        detail = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise KubeconfigProblem(f"cannot read kubeconfig {path}: {detail}: {fix}") from err
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as err:
        where = getattr(err, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        raise KubeconfigProblem(f"kubeconfig {path} is not valid YAML{line}: {fix}") from err
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise KubeconfigProblem(
            f"kubeconfig {path} is not a kubeconfig (a mapping with clusters, users and "
            f"contexts): {fix}"
        )
    for section in _SECTIONS:
        entries = document.get(section) or []
        if not isinstance(entries, list) or not all(
            isinstance(entry, dict) and isinstance(entry.get("name"), str) for entry in entries
        ):
            raise KubeconfigProblem(
                f"kubeconfig {path}: {section} is not a list of named entries: {fix}"
            )
    return document


@dataclass
class _Merged:
    sections: dict[str, dict[str, Mapping[str, Any]]]
    current: str | None


def _merge(documents: Sequence[Mapping[str, Any]]) -> _Merged:
    """kubectl's merge: the first file to define a name, or a current-context, wins."""
    merged = _Merged(sections={section: {} for section in _SECTIONS}, current=None)
    for document in documents:
        for section in _SECTIONS:
            for entry in document.get(section) or []:
                merged.sections[section].setdefault(entry["name"], entry)
        current = document.get("current-context")
        if merged.current is None and isinstance(current, str) and current:
            merged.current = current
    return merged


def _target(
    merged: _Merged, *, paths: tuple[Path, ...], context: str | None, source: str
) -> Target:
    files = _files(paths)
    contexts = merged.sections["contexts"]
    known = ", ".join(sorted(contexts)) or "none"
    name = context or merged.current
    if not contexts:
        raise KubeconfigProblem(
            f"{files} defines no contexts (is it a kubeconfig?): point {source} at your "
            "cluster's kubeconfig"
        )
    if name is None:
        raise KubeconfigProblem(
            f"{files} sets no current-context: pass --context NAME (contexts: {known}) or run "
            "kubectl config use-context NAME"
        )
    if name not in contexts:
        origin = "--context" if context else "its current-context"
        raise KubeconfigProblem(
            f'context "{name}" ({origin}) is not in {files} (contexts: {known}): pass '
            "--context with one of them, or run kubectl config use-context NAME"
        )
    body = contexts[name].get("context")
    if not isinstance(body, dict):
        raise KubeconfigProblem(
            f'context "{name}" in {files} has no context: entry: give it a cluster and a user'
        )
    cluster_name = body.get("cluster")
    cluster = merged.sections["clusters"].get(str(cluster_name))
    if cluster is None:
        raise KubeconfigProblem(
            f'context "{name}" names cluster "{cluster_name}", which {files} does not define: '
            "add the cluster or fix the context"
        )
    server = (cluster.get("cluster") or {}).get("server")
    if not isinstance(server, str) or not server:
        raise KubeconfigProblem(
            f'cluster "{cluster_name}" in {files} has no server: add its API server URL'
        )
    namespace = body.get("namespace")
    return Target(
        paths=paths,
        context=name,
        namespace=namespace if isinstance(namespace, str) and namespace else DEFAULT_NAMESPACE,
        server=server,
        source=source,
    )


def _in_cluster(environ: Mapping[str, str]) -> Target:
    try:
        namespace = _IN_CLUSTER_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    except OSError:
        namespace = DEFAULT_NAMESPACE
    host = environ[_IN_CLUSTER_HOST]
    host = f"[{host}]" if ":" in host else host
    return Target(
        paths=(),
        context=None,
        namespace=namespace,
        server=f"https://{host}:{environ.get(_IN_CLUSTER_PORT, '443')}",
        source="in-cluster",
    )


def _files(paths: Sequence[Path]) -> str:
    return "kubeconfig " + ", ".join(str(path) for path in paths)
