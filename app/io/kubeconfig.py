"""An API client from ``--kubeconfig``, else in-cluster credentials, else the default kubeconfig."""

import os
from pathlib import Path
from typing import Final

from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config

# Set in every pod by the kubelet; its absence means we are not running in a cluster.
_IN_CLUSTER_ENV = "KUBERNETES_SERVICE_HOST"
_SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
# Where the reconciler holds its Lease when neither flag nor pod says: the chart's namespace.
DEFAULT_LEASE_NAMESPACE: Final = "kube-headroom-system"


def default_lease_namespace() -> str:
    """The namespace of the reconciler's Lease: this pod's, else the default. Both
    processes run in the release namespace, so each finds the Lease there."""
    try:
        return _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_LEASE_NAMESPACE
    except OSError:
        return DEFAULT_LEASE_NAMESPACE


class KubeConfigError(Exception):
    """No usable cluster credentials were found."""


async def async_api_client(
    *, kubeconfig: str | None, context: str | None = None
) -> aio_client.ApiClient:
    """``context`` picks a kubeconfig context other than its current-context."""
    configuration = aio_client.Configuration()
    try:
        if kubeconfig is None and os.environ.get(_IN_CLUSTER_ENV):
            aio_config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            # persist_config=False: never write refreshed tokens back (read-only filesystems).
            await aio_config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
    except (aio_config.ConfigException, OSError) as err:
        source = f"kubeconfig {kubeconfig}" if kubeconfig else "in-cluster or default kubeconfig"
        raise KubeConfigError(f"cannot load cluster credentials from {source}: {err}") from err
    return aio_client.ApiClient(configuration)
