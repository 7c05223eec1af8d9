"""Prometheus ``/metrics``: weights, discrimination, nodes per cluster and role, queues, reconfigurations.

Values are read from the store when scraped (a custom collector), so what Prometheus sees
is what ``fawkes status`` sees.  Bound to 127.0.0.1 unless the config says otherwise.
The metric names are listed in docs/metrics.md; ops/ holds a Grafana dashboard and alert rules
that use them (tests/test_ops_rules.py checks that they name only metrics exported here).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from sqlalchemy import func
from sqlmodel import col, select

from fawkes.store import Store
from fawkes.store.lifecycle import NodeState
from fawkes.store.schema import MRCluster, Node


class StoreCollector:
    def __init__(self, store: Store, counters: Mapping[str, float | Callable[[], float]],
                 clock: Callable[[], float] = time.time):
        self.store = store
        self.counters = counters  # process counters: reconfigurations, ssh_failures, ticks (a value or a getter)
        self.clock = clock

    def collect(self):
        st = self.store.status()
        weight = GaugeMetricFamily("fawkes_cluster_weight", "weight of the latest tick", labels=["cluster"])
        disc = GaugeMetricFamily("fawkes_cluster_discrimination", "discrimination of the latest tick", labels=["cluster"])
        target = GaugeMetricFamily("fawkes_cluster_target_nodes", "target nodes of the latest tick", labels=["cluster"])
        nodes = GaugeMetricFamily("fawkes_cluster_nodes", "nodes held", labels=["cluster", "role"])
        queue = GaugeMetricFamily("fawkes_cluster_queued_jobs", "jobs waiting in the cluster's FIFO queue", labels=["cluster"])
        running = GaugeMetricFamily("fawkes_cluster_running_jobs", "jobs running", labels=["cluster"])
        for c in st["clusters"]:
            for fam, v in ((weight, c["weight"]), (disc, c["discrimination"]), (target, c["target"])):
                if v is not None:
                    fam.add_metric([c["name"]], float(v))
            for role, n in c["nodes"].items():
                nodes.add_metric([c["name"], role], n)
            queue.add_metric([c["name"]], c["queued_jobs"])
            running.add_metric([c["name"]], c["running_jobs"])
        yield from (weight, disc, target, nodes, queue, running)
        g = GaugeMetricFamily("fawkes_global_discrimination", "global discrimination factor of the latest tick")
        if st["global_factor"] is not None:
            g.add_metric([], st["global_factor"])
        yield g
        hosts = GaugeMetricFamily("fawkes_hosts", "pool hosts by state", labels=["state"])
        for state, n in st["hosts"].items():
            hosts.add_metric([str(state)], n)
        yield hosts
        global_q = GaugeMetricFamily("fawkes_global_queue", "MR-cluster requests waiting for admission")
        global_q.add_metric([], sum(1 for c in st["clusters"] if c["state"] == "requested"))
        yield global_q
        last = GaugeMetricFamily("fawkes_last_tick_timestamp_seconds", "time of the latest recorded decision (Unix s)")
        if st["decided_at"] is not None:
            last.add_metric([], float(st["decided_at"]))
        yield last
        yield self._drains()
        for name, help_ in (("reconfigurations", "ticks that changed an allocation (A-20)"),
                            ("ssh_failures", "failed SSH operations"), ("ticks", "decisions taken")):
            c = CounterMetricFamily(f"fawkes_{name}", help_)
            v = self.counters.get(name, 0.0)
            c.add_metric([], float(v() if callable(v) else v))
            yield c
        steps = self.counters.get("step_seconds")  # the coordinator's (fawkes_step_duration_seconds)
        if callable(steps):
            yield from steps()
        notify = self.counters.get("notifications")  # only with webhooks configured (notify:)
        if callable(notify):
            c = CounterMetricFamily("fawkes_notifications", "webhook notifications by result: sent, retried "
                                    "(attempts after the first), failed (given up), dropped (queue full)",
                                    labels=["result"])
            for result, n in notify().items():
                c.add_metric([result], float(n))
            yield c

    def _drains(self) -> GaugeMetricFamily:
        """Per cluster: how long its oldest DRAINING node has been draining (absent when none is)."""
        fam = GaugeMetricFamily("fawkes_oldest_drain_seconds",
                                "seconds the cluster's oldest draining node has been draining", labels=["cluster"])
        with self.store.session() as s:
            rows = s.exec(select(MRCluster.live_name, func.min(Node.state_since))
                          .join(MRCluster, Node.cluster_id == MRCluster.id)
                          .where(Node.state == NodeState.DRAINING.value, col(Node.holds_host).is_not(None),
                                 col(MRCluster.live_name).is_not(None))
                          .group_by(MRCluster.live_name)).all()
        now = self.clock()
        for name, since in rows:
            fam.add_metric([name], max(0.0, now - float(since)))
        return fam


def serve(store: Store, counters: dict[str, float], bind: str = "127.0.0.1", port: int = 9464, *,
          dashboard: bool = True, server=None, web_ui=None, api=None):
    """Start the HTTP server in a daemon thread: ``/metrics`` and, unless ``dashboard`` is false,
    the read-only dashboard (:mod:`fawkes.coordinator.dashboard`); with ``api`` (a
    :class:`fawkes.config.ApiConfig` that is enabled) the teams' API (:mod:`fawkes.coordinator.api_http`).
    Returns (server, thread, port)."""
    from fawkes.coordinator.dashboard import start_server

    registry = CollectorRegistry()
    registry.register(StoreCollector(store, counters))
    api_app = None
    if api is not None and api.enabled:
        from fawkes.coordinator.api_http import ApiApp

        api_app = ApiApp(store, api)
    return start_server(store, counters, make_wsgi_app(registry), bind, port, dashboard=dashboard, server=server,
                        web_ui=web_ui, api=api_app)
