import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from app.io.kubeconfig import KubeConfigError, async_api_client


def _kubeconfig(path: Path, *, server: str = "https://127.0.0.1:6443") -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "c", "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def test_async_client_from_an_explicit_kubeconfig(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path / "config", server="https://10.0.0.1:6443")

    async def host() -> str:
        api = await async_api_client(kubeconfig=str(kubeconfig))
        try:
            return str(api.configuration.host)
        finally:
            await api.close()

    assert asyncio.run(host()) == "https://10.0.0.1:6443"


@pytest.mark.parametrize(
    "load",
    [
        pytest.param(lambda: asyncio.run(async_api_client(kubeconfig=None)), id="async"),
    ],
)
def test_in_cluster_without_credentials_fails_clearly(
    load: Callable[[], object], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The service host says "in a cluster"; the service-account files are absent here.
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    with pytest.raises(KubeConfigError, match="in-cluster or default kubeconfig"):
        load()


def test_missing_kubeconfig_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(KubeConfigError, match=f"kubeconfig {tmp_path}/nope"):
        asyncio.run(async_api_client(kubeconfig=str(tmp_path / "nope")))


def test_async_client_for_another_context(tmp_path: Path) -> None:
    kubeconfig = _kubeconfig(tmp_path / "config", server="https://10.0.0.1:6443")
    document = yaml.safe_load(kubeconfig.read_text())
    document["clusters"].append({"name": "other", "cluster": {"server": "https://10.0.0.3:6443"}})
    document["contexts"].append({"name": "dev", "context": {"cluster": "other", "user": "u"}})
    kubeconfig.write_text(yaml.safe_dump(document))

    async def host() -> str:
        api = await async_api_client(kubeconfig=str(kubeconfig), context="dev")
        try:
            return str(api.configuration.host)
        finally:
            await api.close()

    assert asyncio.run(host()) == "https://10.0.0.3:6443"
