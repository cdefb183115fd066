"""Debian's Prometheus on loopback, configured from deploy/prometheus/prometheus.yml with only
what a test must change (targets, token file, intervals), and a client of its query API."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.e2e.live_service import ROOT, free_port, wait_for_url

DEPLOY = ROOT / "deploy" / "prometheus"
PROMETHEUS = shutil.which("prometheus")
START_TIMEOUT = 60


@dataclass
class Prometheus:
    base_url: str
    log: Path

    def query(self, expr: str) -> list[dict]:
        """An instant query's result vector."""
        url = f"{self.base_url}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def value(self, expr: str) -> float | None:
        """The single value of a query that aggregates to one series; None when empty."""
        result = self.query(expr)
        if not result:
            return None
        assert len(result) == 1, result
        return float(result[0]["value"][1])

    def get(self, path: str) -> dict:
        with urllib.request.urlopen(self.base_url + path, timeout=10) as response:
            return json.load(response)


def scrape_config(target: str | list[str], token_file: Path, *, interval: str = "1s") -> dict:
    """The repository's scrape configuration, pointed at `target` (one host:port or several:
    one per app server) with the token in a file."""
    config = yaml.safe_load((DEPLOY / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = interval
    config["global"]["evaluation_interval"] = interval
    config["rule_files"] = [str(DEPLOY / name) for name in config["rule_files"]]
    [job] = config["scrape_configs"]
    job["authorization"]["credentials_file"] = str(token_file)
    job["static_configs"] = [{"targets": [target] if isinstance(target, str) else list(target)}]
    return config


@contextmanager
def prometheus(workdir: Path, target: str | list[str], token: str) -> Iterator[Prometheus]:
    """Prometheus scraping `target` (host:port, or a list) with `token`; stopped at the end."""
    token_file = workdir / "metrics.token"
    token_file.write_text(token + "\n")
    config_file = workdir / "prometheus.yml"
    config_file.write_text(yaml.safe_dump(scrape_config(target, token_file)))
    port = free_port()
    log = workdir / "prometheus.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            [
                PROMETHEUS,
                f"--config.file={config_file}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            cwd=workdir,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Prometheus(base_url=f"http://127.0.0.1:{port}", log=log)
    try:
        wait_for_url(server.base_url + "/-/ready", process, server.log, name="prometheus")
        yield server
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
