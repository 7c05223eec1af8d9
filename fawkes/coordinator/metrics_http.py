"""Prometheus ``/metrics``: weights, discrimination, nodes per cluster and role, queues, reconfigurations.

Values are read from the store when scraped (a custom collector), so what Prometheus sees
is what ``fawkes status`` sees.  Bound to 127.0.0.1 unless the config says otherwise.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from fawkes.store import Store


class StoreCollector:
    def __init__(self, store: Store, counters: dict[str, float]):
        self.store = store
        self.counters = counters  # process counters: reconfigurations, ssh_failures, ticks

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
        for name, help_ in (("reconfigurations", "ticks that changed an allocation (A-20)"),
                            ("ssh_failures", "failed SSH operations"), ("ticks", "decisions taken")):
            c = CounterMetricFamily(f"fawkes_{name}", help_)
            c.add_metric([], self.counters.get(name, 0.0))
            yield c


def serve(store: Store, counters: dict[str, float], bind: str = "127.0.0.1", port: int = 9464):
    """Start the HTTP endpoint in a daemon thread; returns (server, thread, port)."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, counters))
    server, thread = start_http_server(port, addr=bind, registry=registry)
    return server, thread, server.server_port
