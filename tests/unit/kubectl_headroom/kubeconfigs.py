"""Builders for kubeconfig files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def context(name: str, *, cluster: str = "c", namespace: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"cluster": cluster, "user": "u"}
    if namespace is not None:
        body["namespace"] = namespace
    return {"name": name, "context": body}


def kubeconfig(
    *,
    server: str = "https://127.0.0.1:1",
    contexts: list[dict[str, Any]] | None = None,
    current: str | None = "ctx",
    cluster: str = "c",
) -> dict[str, Any]:
    document: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "insecure-skip-tls-verify": True}}
        ],
        "users": [{"name": "u", "user": {"token": "abc"}}],
        "contexts": [context("ctx")] if contexts is None else contexts,
    }
    if current is not None:
        document["current-context"] = current
    return document


def write(path: Path, document: dict[str, Any] | str) -> Path:
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    return path
