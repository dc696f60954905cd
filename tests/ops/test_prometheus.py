"""The metrics, the alert rules and the Grafana dashboard against a real Prometheus (issue 16).

One ``metasched serve`` runs over the dev pair (emu and dev2: ``--clusters``, so the per-cluster
series exist; PostgreSQL, the real Slurm commands) with its ``/metrics`` on a free port; ``deploy/prometheus-up`` (which installs the Debian package when it
is missing) runs a Prometheus built from ``deploy/prometheus/prometheus.yml`` that scrapes it
every second and loads ``deploy/prometheus/alerts.yml``. Checked: ``promtool check rules`` and
``check config`` pass, the target is up, every rule loads healthy, every alert expression
evaluates and every metric it reads has a series, and every dashboard query evaluates to at
least one series — through Prometheus's HTTP API, as Grafana and the rule engine would.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from meta.service.api import Service
from tests.harness import REPO, ServeProcess, wait_for
from tests.integration.second_cluster import SECOND, SECOND_CONF, require_second_cluster
from tests.integration.two_cluster_support import FIRST

PROMETHEUS_UP = REPO / "deploy" / "prometheus-up"
ALERTS = REPO / "deploy" / "prometheus" / "alerts.yml"
CONFIG = REPO / "deploy" / "prometheus" / "prometheus.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "metasched.json"
METRIC = re.compile(r"\bmetasched_[a-z_]+\b|\bup(?=\{)")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str, timeout: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 - a local test server
        return json.loads(response.read().decode())


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:  # noqa: S310 - a local test server
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:  # noqa: S310
        return response.read().decode()


class Prometheus:
    """Prometheus is one ``prometheus`` process (through deploy/prometheus-up run) and its query API."""

    def __init__(self, tmp_path: Path, target: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = yaml.safe_load(CONFIG.read_text())
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
        config["rule_files"] = [str(ALERTS)]
        config["scrape_configs"][0]["static_configs"] = [{"targets": [target]}]
        self.config = tmp_path / "prometheus.yml"
        self.config.write_text(yaml.safe_dump(config))
        self.log = tmp_path / "prometheus.log"
        argv = [str(PROMETHEUS_UP), "run", str(self.config), str(self.port), str(tmp_path / "tsdb")]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)

    def api(self, path: str, **params: str) -> Any:
        """api is one GET of the HTTP API's JSON ``data`` (AssertionError on an error answer)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            answer = _get(f"{self.url}/api/v1/{path}{query}")
        except urllib.error.HTTPError as exc:
            answer = json.loads(exc.read().decode() or "{}")
        assert answer.get("status") == "success", f"{path} {params}: {answer}"
        return answer["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """query evaluates an instant PromQL query: its series."""
        data = self.api("query", query=expr)
        return data["result"] if data["resultType"] in ("vector", "matrix") else [data["result"]]

    def stop(self) -> None:
        """stop terminates prometheus (exec'd by the script, so the pid is prometheus's own)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=15)

    def tail(self) -> str:
        """tail is the end of prometheus's log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-20:]) if self.log.exists() else ""


@pytest.fixture(scope="module")
def installed() -> None:
    """installed runs deploy/prometheus-up install: a no-op when the package is there (CI runs it first)."""
    done = subprocess.run([str(PROMETHEUS_UP), "install"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def daemon(slurm_exclusive: None, pg_service: Service, tmp_path: Path) -> Iterator[tuple[ServeProcess, int, int]]:
    """daemon is one metasched serve over the dev pair (emu, dev2) with /metrics and the API on free TCP ports.

    Over both clusters, so that the per-cluster series the alerts and panels read exist too.
    """
    require_second_cluster()
    metrics_port, api_port = _free_port(), _free_port()
    serve = ServeProcess(
        tmp_path, "prom", lease_s=5.0, bin_dir=None,
        extra=["--metrics-port", str(metrics_port), "--api-listen", f"127.0.0.1:{api_port}",
               "--clusters", f"{FIRST},{SECOND}={SECOND_CONF}"],
    )  # fmt: skip
    serve.start()
    try:
        yield serve, metrics_port, api_port
    finally:
        serve.kill()


def _alert_rules() -> list[dict[str, Any]]:
    return [rule for group in yaml.safe_load(ALERTS.read_text())["groups"] for rule in group["rules"]]


def _dashboard_queries() -> list[tuple[str, str]]:
    panels = json.loads(DASHBOARD.read_text())["panels"]
    return [(p["title"], t["expr"]) for p in panels for t in p.get("targets", [])]


def _metrics_of(expr: str) -> set[str]:
    return set(METRIC.findall(expr))


def test_promtool_checks_the_rules_and_the_config(installed: None) -> None:
    rules = subprocess.run([str(PROMETHEUS_UP), "check-rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert rules.returncode == 0 and f"SUCCESS: {len(_alert_rules())} rules found" in rules.stdout, rules
    config = subprocess.run(["promtool", "check", "config", str(CONFIG)], capture_output=True, text=True, timeout=60)
    assert config.returncode == 0, config.stdout + config.stderr


def test_every_alert_and_dashboard_query_returns_series_from_a_running_daemon(
    installed: None, daemon: tuple[ServeProcess, int, int], tmp_path: Path
) -> None:
    started = time.monotonic()
    serve, metrics_port, api_port = daemon

    def leading_with_tenants() -> bool:
        assert serve.alive(), serve.tail()
        text = _metrics_text(metrics_port)
        return "metasched_leader 1.0" in text and 'metasched_queue_depth{tenant="tenant-a"}' in text

    ready = wait_for(leading_with_tenants, 60, "the daemon to lead and know the dev cluster's tenants (sacctmgr)")
    assert _status(f"http://127.0.0.1:{api_port}/healthz") == 200
    assert _status(f"http://127.0.0.1:{api_port}/v1/jobs") == 401  # no credential: an auth failure
    prometheus = Prometheus(tmp_path, f"127.0.0.1:{metrics_port}")
    try:
        def target_up() -> bool:
            assert prometheus.proc.poll() is None, prometheus.tail()
            targets = prometheus.api("targets")["activeTargets"]
            return bool(targets) and all(t["health"] == "up" for t in targets)

        up_after = wait_for(target_up, 30, "the metasched target to be up")
        wait_for(lambda: len(prometheus.query("metasched_leader[1m]")[0]["values"]) >= 4, 30, "four scrapes")
        assert prometheus.query('up{job="metasched"}')[0]["value"][1] == "1"
        groups = prometheus.api("rules")["groups"]
        loaded = {rule["name"]: rule for group in groups for rule in group["rules"]}
        assert set(loaded) == {rule["alert"] for rule in _alert_rules()}
        assert {rule["health"] for rule in loaded.values()} == {"ok"}, [r.get("lastError") for r in loaded.values()]

        missing = []
        for rule in _alert_rules():
            prometheus.query(rule["expr"])  # parses and evaluates (it returns series only when it fires)
            for name in _metrics_of(rule["expr"]):
                if not prometheus.query(name):
                    missing.append(f"alert {rule['alert']}: {name}")
        queries = _dashboard_queries()
        for title, expr in queries:
            if not prometheus.query(expr):
                missing.append(f"panel {title!r}: {expr}")
        assert missing == []
        fired = {a["labels"]["alertname"] for a in prometheus.api("alerts")["alerts"]}
        assert not fired & {"MetaschedDown", "MetaschedNoLeader", "MetaschedReconcileLag", "MetaschedSeveralLeaders"}, fired
        elapsed = time.monotonic() - started
        print(f"\nPROMETHEUS rules={len(loaded)} panel_queries={len(queries)} daemon_ready_s={ready:.1f} "
              f"target_up_s={up_after:.1f} elapsed_s={elapsed:.1f}")
    finally:
        prometheus.stop()
