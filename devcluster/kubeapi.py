"""A small JSON client for the local control plane's REST API, for harness code that
needs a handful of raw reads and writes (pods, Secrets, TokenRequests) without the
typed client's models."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Json = dict[str, Any]


class KubeAPIError(RuntimeError):
    """The API server answered with an error status: ``status`` is the HTTP code and
    ``reason`` the message of the returned Status (or the raw body)."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        try:
            reason = str(json.loads(body).get("message", body))
        except (ValueError, AttributeError):
            reason = body
        super().__init__(f"{method} {path}: {status} {reason[:500]}")
        self.status = status
        self.reason = reason


@dataclass(frozen=True)
class KubeAPI:
    server: str
    token: str
    ca_file: Path
    timeout: float = 10.0

    def _context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Json | None = None,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> Json:
        url = f"{self.server}{path}"
        if params:
            url = f"{url}?{urllib.parse.urlencode(params)}"
        request = urllib.request.Request(
            url,
            method=method,
            data=None if body is None else json.dumps(body).encode(),
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json",
                "Content-Type": content_type,
            },
        )
        try:
            with urllib.request.urlopen(
                request, context=self._context(), timeout=self.timeout
            ) as response:
                document: Json = json.loads(response.read() or b"{}")
                return document
        except urllib.error.HTTPError as err:
            raise KubeAPIError(method, path, err.code, err.read().decode(errors="replace")) from err

    def get(self, path: str, **params: str) -> Json | None:
        """The object at ``path``, or None when it does not exist."""
        try:
            return self.request("GET", path, params=params or None)
        except KubeAPIError as err:
            if err.status == 404:
                return None
            raise

    def items(self, path: str, **params: str) -> list[Json]:
        """The objects a list at ``path`` returns (``labelSelector``, ``fieldSelector``,
        … as ``params``)."""
        found: list[Json] = self.request("GET", path, params=params or None)["items"]
        return found

    def post(self, path: str, body: Json) -> Json:
        return self.request("POST", path, body=body)

    def put(self, path: str, body: Json) -> Json:
        return self.request("PUT", path, body=body)
