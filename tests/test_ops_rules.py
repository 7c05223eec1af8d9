"""ops/: the Prometheus alert rules and the Grafana dashboard.

* ``promtool check rules`` and ``promtool test rules`` (Debian's prometheus package; required
  under CI=true, skipped with the reason elsewhere when missing);
* every metric name in the rules, the rules' unit tests and the dashboard's queries is one that
  the coordinator's ``/metrics`` exporter really exports, read from the exporter on a real
  SQLite store that holds clusters, nodes (one draining), a decision and a failed host
  (``up`` is Prometheus' own);
* the two metrics the alerts added: the oldest drain's age and the SSH failure counter fed by
  a real executor that fails to connect.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from fawkes.coordinator.metrics_http import StoreCollector
from fawkes.coordinator.steptimes import StepTimes
from fawkes.mechanism.model import ClusterState, Role
from fawkes.ssh.executor import Executor, Target
from fawkes.store import NodeState, Store

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

OPS = Path(__file__).resolve().parent.parent / "ops"
RULES = OPS / "prometheus" / "fawkes-alerts.yml"
RULE_TESTS = OPS / "prometheus" / "fawkes-alerts.test.yml"
DASHBOARD = OPS / "grafana" / "fawkes.json"
PROMETHEUS_OWN = {"up"}  # made by Prometheus for every scrape target, not by the exporter


class Clock:
    def __init__(self, t: float = 1_000_000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def _promtool() -> str:
    tool = shutil.which("promtool")
    if tool is None:
        unavailable("promtool not found (Debian package prometheus; scripts/setup installs it)")
    return tool


def test_promtool_check_rules():
    r = subprocess.run([_promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 5 rules found" in r.stdout


def test_promtool_unit_tests_fire_the_alerts():
    r = subprocess.run([_promtool(), "test", "rules", RULE_TESTS.name], cwd=RULE_TESTS.parent,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    fired = {t["alertname"] for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]
             for t in case["alert_rule_test"] if t["exp_alerts"]}
    names = {r["alert"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]}
    assert fired == names  # every alert is shown firing at least once


# ---------------------------------------------------------------- metric names
_KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
             "offset", "inf", "nan"}


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression reads (selectors, not functions, labels or keywords)."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings (label values, $variables)
    e = re.sub(r"\{[^}]*\}", "", e)  # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)  # ranges, $__rate_interval
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)  # label lists
    names = set()
    for m in re.finditer(r"(?<![\w$:.])([a-zA-Z_:][\w:]*)\b(\s*\()?", e):
        word, call = m.group(1), m.group(2)
        if call or word.lower() in _KEYWORDS or re.fullmatch(r"\d+[smhdwy]", word):
            continue
        names.add(word)
    return names


def test_metric_name_extraction():
    assert metric_names('sum by (cluster) (fawkes_cluster_nodes{job=~"$job"})') == {"fawkes_cluster_nodes"}
    assert metric_names('time() - fawkes_last_tick_timestamp_seconds') == {"fawkes_last_tick_timestamp_seconds"}
    assert metric_names('increase(a_total[$__rate_interval]) > 5 or absent(up{job="x"})') == {"a_total", "up"}
    assert metric_names('sum(fawkes_hosts{state="failed"}) or vector(0)') == {"fawkes_hosts"}


def _dashboard_exprs() -> list[str]:
    d = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in d["panels"] for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        q = v.get("query")
        if v.get("type") == "query":
            exprs.append(re.sub(r"^label_values\((\w+),.*\)$", r"\1", q["query"] if isinstance(q, dict) else q))
    return exprs


def _rules_exprs() -> list[str]:
    exprs = [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:  # the series the unit tests feed
        exprs += [s["series"] for s in case["input_series"]]
    return exprs


@pytest.fixture
def exported(tmp_path) -> dict[str, list]:
    """Sample name -> samples, as the exporter writes them on a store with something in every metric."""
    clock = Clock()
    store = Store(str(tmp_path / "state.db"), clock=clock)
    store.register_framework("spark", "spark", spark_home="/opt/spark", java_home="/usr/lib/jvm/java-17")
    store.sync_hosts([{"name": f"n{i}", "address": f"10.0.0.{i}", "cores": 4, "memory_mb": 4096} for i in range(6)])
    for name in ("etl", "ml"):
        store.request_cluster(name, framework="spark", min_core=1)
        store.transition_cluster(name, ClusterState.DEPLOYING, "admitted")
    store.request_cluster("late", framework="spark", min_core=1)  # waits for admission
    store.allocate_node("etl", "n0", Role.CORE)
    drain = store.allocate_node("etl", "n1", Role.TR)
    store.transition_node(drain.id, NodeState.PROVISIONING)
    store.transition_node(drain.id, NodeState.DRAINING)
    store.allocate_node("ml", "n2", Role.CORE)
    store.fail_host("n5", "disk broken")
    store.submit_job("ml", ["wc"])
    store.record_decision(policy="TD", inputs={}, weights={"etl": 0.25, "ml": 0.75},
                          discriminations={"etl": 12.5, "ml": -12.5}, global_factor=156.25, gate_open=True,
                          targets={"etl": 1, "ml": 3}, plan={"grows": [], "shrinks": []}, reason="test")
    clock.t += 90.0
    registry = CollectorRegistry()
    steps = StepTimes()
    for step, took in (("tick", 0.3), ("fast", 0.04), ("fast", 2.6), ("sample", 0.2)):
        steps.observe(step, took)
    registry.register(StoreCollector(store, {"reconfigurations": 2.0, "ticks": 3.0, "ssh_failures": lambda: 7.0,
                                             "step_seconds": steps.families}, clock=clock))
    out: dict[str, list] = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in fam.samples:
            out.setdefault(s.name, []).append(s)
    return out


def test_dashboard_and_rules_use_only_exported_metrics(exported):
    names = set(exported) | PROMETHEUS_OWN
    for source, exprs in (("ops/grafana/fawkes.json", _dashboard_exprs()), ("ops/prometheus", _rules_exprs())):
        used = set().union(*(metric_names(e) for e in exprs))
        assert used, source
        assert used <= names, f"{source} uses metrics /metrics does not export: {sorted(used - names)}"
    used = set().union(*(metric_names(e) for e in _dashboard_exprs()))
    # the dashboard shows every metric fawkes exports (the *_created companions aside)
    assert {n for n in exported if not n.endswith("_created")} <= used


def test_exported_values(exported):
    one = {n: {tuple(sorted(s.labels.items())): s.value for s in v} for n, v in exported.items()}
    assert one["fawkes_oldest_drain_seconds"] == {(("cluster", "etl"),): 90.0}  # ml drains nothing: absent
    assert one["fawkes_hosts"][(("state", "failed"),)] == 1.0
    assert one["fawkes_ssh_failures_total"] == {(): 7.0} and one["fawkes_ticks_total"] == {(): 3.0}
    assert one["fawkes_last_tick_timestamp_seconds"] == {(): 1_000_000.0}
    assert one["fawkes_global_queue"] == {(): 1.0}
    # the steps' histogram: cumulative buckets, one fast step of 2.6 s above the 2.5-s bound
    fast = {dict(k)["le"]: v for k, v in one["fawkes_step_duration_seconds_bucket"].items() if dict(k)["step"] == "fast"}
    assert (fast["0.025"], fast["0.05"], fast["2.5"], fast["5.0"], fast["+Inf"]) == (0.0, 1.0, 1.0, 2.0, 2.0)
    assert one["fawkes_step_duration_seconds_count"][(("step", "fast"),)] == 2.0
    assert abs(one["fawkes_step_duration_seconds_sum"][(("step", "fast"),)] - 2.64) < 1e-9


def test_executor_counts_ssh_failures(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with Executor([Target("dead", "127.0.0.1", port=port)], retries=0, connect_timeout=2) as ex:
        r = ex.run("dead", "true")
        assert not r["dead"].ok and r["dead"].exit_code is None
        ex.run(["dead"], "true")
        assert ex.failures == 2
