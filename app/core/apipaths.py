"""Every API path Headroom requests, built in one place from a resource's coordinates.

A `Resource` is a group, version and plural, namespaced or not; `path()` gives the
collection, one object or a subresource, in one namespace or across all of them. Callers
name resources (`PODS.path(namespace="team-a", name="web", subresource="resize")`)
instead of spelling paths, so a group or version is written once.
"""

from dataclasses import dataclass
from typing import Final

from app.core.labels import CONFIG_NAME, CONFIG_PLURAL, GROUP, VERSION


@dataclass(frozen=True, slots=True)
class Resource:
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_version_path(self) -> str:
        """``/api/v1`` for the core group, ``/apis/<group>/<version>`` for the others."""
        return f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"

    def path(
        self,
        *,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The collection (in ``namespace``, or across all namespaces without one), or the
        object ``name``, or its ``subresource``."""
        if subresource is not None and name is None:
            raise ValueError(f"a subresource of {self.plural} needs an object name")
        if namespace is not None and not self.namespaced:
            raise ValueError(f"{self.plural} are cluster-scoped: no namespace")
        if name is not None and self.namespaced and namespace is None:
            raise ValueError(f"{self.plural} are namespaced: {name!r} needs a namespace")
        scope = "" if namespace is None else f"/namespaces/{namespace}"
        tail = "".join(f"/{part}" for part in (name, subresource) if part is not None)
        return f"{self.group_version_path}{scope}/{self.plural}{tail}"


PODS: Final = Resource("", "v1", "pods", namespaced=True)
NODES: Final = Resource("", "v1", "nodes", namespaced=False)
NAMESPACES: Final = Resource("", "v1", "namespaces", namespaced=False)
EVENTS: Final = Resource("", "v1", "events", namespaced=True)
LIMIT_RANGES: Final = Resource("", "v1", "limitranges", namespaced=True)
RESOURCE_QUOTAS: Final = Resource("", "v1", "resourcequotas", namespaced=True)
SECRETS: Final = Resource("", "v1", "secrets", namespaced=True)
CONFIG_MAPS: Final = Resource("", "v1", "configmaps", namespaced=True)
SERVICE_ACCOUNTS: Final = Resource("", "v1", "serviceaccounts", namespaced=True)
LEASES: Final = Resource("coordination.k8s.io", "v1", "leases", namespaced=True)
CUSTOM_RESOURCE_DEFINITIONS: Final = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", namespaced=False
)
TOKEN_REVIEWS: Final = Resource("authentication.k8s.io", "v1", "tokenreviews", namespaced=False)
SUBJECT_ACCESS_REVIEWS: Final = Resource(
    "authorization.k8s.io", "v1", "subjectaccessreviews", namespaced=False
)
# Pods' controllers whose own controller Headroom looks up, as VPA does (app.core.owners).
REPLICA_SETS: Final = Resource("apps", "v1", "replicasets", namespaced=True)
JOBS: Final = Resource("batch", "v1", "jobs", namespaced=True)
VERTICAL_POD_AUTOSCALERS: Final = Resource(
    "autoscaling.k8s.io", "v1", "verticalpodautoscalers", namespaced=True
)
HEADROOM_CONFIGS: Final = Resource(GROUP, VERSION, CONFIG_PLURAL, namespaced=False)

# The one HeadroomConfig, and where the reconciler reports on it.
CONFIG: Final = HEADROOM_CONFIGS.path(name=CONFIG_NAME)
CONFIG_STATUS: Final = HEADROOM_CONFIGS.path(name=CONFIG_NAME, subresource="status")
VERSION_PATH: Final = "/version"
