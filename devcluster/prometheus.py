"""A Prometheus server (the binary ``hack/build-e2e.sh prometheus`` caches) run as a host
process with static scrape targets, and the parts of its HTTP API a test reads: targets'
health, instant and range queries.

The real-node tier runs it in its own network namespace, where it reaches the kubelets'
``/metrics/cadvisor`` at the guests' node addresses, and Headroom's processes on loopback.
"""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from devcluster.addons import HostProcess, prometheus_binary, spawn, wait_until
from devcluster.ports import free_port

Labels = dict[str, str]


@dataclass(frozen=True)
class ScrapeTarget:
    """One job: endpoints (``host:port``) scraped alike. Over https, ``ca_file`` verifies
    the server (without it, verification is skipped, for a self-signed metrics
    certificate); ``token_file`` holds a bearer token sent with every scrape."""

    job: str
    addresses: tuple[str, ...]
    scheme: str = "http"
    metrics_path: str = "/metrics"
    ca_file: Path | None = None
    token_file: Path | None = None

    def scrape_config(self) -> dict[str, Any]:
        config: dict[str, Any] = {
            "job_name": self.job,
            "scheme": self.scheme,
            "metrics_path": self.metrics_path,
            "static_configs": [{"targets": list(self.addresses)}],
        }
        if self.scheme == "https":
            config["tls_config"] = (
                {"ca_file": str(self.ca_file)}
                if self.ca_file is not None
                else {"insecure_skip_verify": True}
            )
        if self.token_file is not None:
            config["authorization"] = {"type": "Bearer", "credentials_file": str(self.token_file)}
        return config


@dataclass(frozen=True)
class Series:
    labels: Labels
    points: list[tuple[float, float]]

    def finite(self) -> list[tuple[float, float]]:
        """The points a graph draws (NaN, as a quantile of no observations, is a gap)."""
        return [(t, v) for t, v in self.points if math.isfinite(v)]


class PrometheusError(RuntimeError):
    """Prometheus refused a query or a target stayed down; the message says which."""


@dataclass
class Prometheus:
    work_dir: Path
    targets: Sequence[ScrapeTarget]
    scrape_interval: float = 5.0
    process: HostProcess | None = field(default=None, init=False)
    port: int = field(default=0, init=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        interval = f"{self.scrape_interval:g}s"
        config = {
            "global": {"scrape_interval": interval, "scrape_timeout": interval},
            "scrape_configs": [target.scrape_config() for target in self.targets],
        }
        # JSON is YAML: Prometheus reads this as its configuration file.
        (self.work_dir / "prometheus.yml").write_text(json.dumps(config, indent=2))
        self.port = free_port()
        self.process = spawn(
            "prometheus",
            [
                str(prometheus_binary()),
                f"--config.file={self.work_dir / 'prometheus.yml'}",
                f"--storage.tsdb.path={self.work_dir / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
            ],
            log_dir=self.work_dir,
        )
        wait_until(self.process, self.ready, "/-/ready")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()

    def ready(self) -> bool:
        """Whether it serves queries (its 503 while it starts raises, as a URLError)."""
        with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)

    def _get(self, path: str, **params: str) -> Any:
        url = f"{self.url}{path}"
        if params:
            url += "?" + urllib.parse.urlencode(params)
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            raise PrometheusError(f"GET {url}: {err.code} {err.read().decode()[:500]}") from err
        answer = json.loads(body)
        if answer.get("status") != "success":
            raise PrometheusError(f"GET {url}: {answer}")
        return answer["data"]

    def wait_scraped(self, timeout: float = 60.0) -> None:
        """Until every target has been scraped successfully (else the last errors)."""
        deadline = time.monotonic() + timeout
        while True:
            assert self.process is not None
            self.process.check()
            active = self._get("/api/v1/targets", state="active")["activeTargets"]
            down = {t["scrapeUrl"]: t["lastError"] for t in active if t["health"] != "up"}
            if active and not down:
                return
            if time.monotonic() > deadline:
                raise PrometheusError(f"targets not up after {timeout}s: {down}")
            time.sleep(0.5)

    def query(self, expr: str) -> list[tuple[Labels, float]]:
        """An instant query, now: each series' labels and value."""
        data = self._get("/api/v1/query", query=expr)
        if data["resultType"] != "vector":
            raise PrometheusError(f"{expr!r} is a {data['resultType']}, not a vector")
        return [(item["metric"], float(item["value"][1])) for item in data["result"]]

    def query_range(self, expr: str, *, start: float, end: float, step: float) -> list[Series]:
        """A range query, as a graph panel sends it."""
        data = self._get(
            "/api/v1/query_range",
            query=expr,
            start=f"{start:.3f}",
            end=f"{end:.3f}",
            step=f"{step:g}",
        )
        return [
            Series(item["metric"], [(float(t), float(v)) for t, v in item["values"]])
            for item in data["result"]
        ]
