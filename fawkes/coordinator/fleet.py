"""The pool as the drivers see it: store rows + inventory -> ClusterSpec, plus the SSH executor."""

from __future__ import annotations

import threading

from fawkes.errors import FawkesError
from fawkes.frameworks.base import FrameworkDriver, Progress, driver_for
from fawkes.frameworks.registry import paths_of
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.inventory import Inventory
from fawkes.mechanism import Role
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState

#: node states whose daemons belong in the cluster's configuration
CONFIGURED = frozenset({NodeState.REQUESTED, NodeState.PROVISIONING, NodeState.RUNNING, NodeState.DRAINING})


class Fleet:
    """Builds driver inputs from durable state; owns the executor and one driver per framework kind.

    The executor is thread-safe (one connection per host per thread), so reconciler workers
    share it.
    """

    def __init__(self, store: Store, inventory: Inventory, *, executor=None, progress: Progress | None = None,
                 default_cores: int = 1, default_memory_mb: int = 1024,
                 cluster_options: dict[str, str] | None = None):
        self.store = store
        self.inventory = inventory
        self.ex = executor if executor is not None else inventory.executor()
        self.progress = progress
        self.default_cores = default_cores
        self.default_memory_mb = default_memory_mb
        self.cluster_options = dict(cluster_options or {})  # framework tunables for every cluster
        self._drivers: dict[str, FrameworkDriver] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        self.ex.close()

    def framework(self, name: str) -> FrameworkPaths:
        """The registered framework ``name`` as its kind reads it (paths by the kind's own names)."""
        return paths_of(self.store.get_framework(name))

    def driver(self, kind: str) -> FrameworkDriver:
        with self._lock:
            if kind not in self._drivers:
                self._drivers[kind] = driver_for(kind, self.ex, progress=self.progress)
            return self._drivers[kind]

    def node_spec(self, host: str, role: Role | str) -> NodeSpec:
        h = self.inventory.host(host)
        return NodeSpec(name=h.name, address=h.address, role=Role(role), root=h.work_dir,
                        cores=h.cores or self.default_cores, memory_mb=h.memory_mb or self.default_memory_mb,
                        port=h.port, user=h.user, key_file=str(h.key_file) if h.key_file else None)

    def spec(self, cluster: str, *, states=CONFIGURED) -> tuple[ClusterSpec, FrameworkDriver]:
        """The cluster's spec (nodes in allocation order: the oldest core node is the master) and driver."""
        c = self.store.get_cluster(cluster)
        return self._spec(c, self.store.list_nodes(cluster), self.framework(c.framework), states)

    def specs(self, clusters, *, states=CONFIGURED,
              nodes: dict | None = None) -> dict[str, tuple[ClusterSpec, FrameworkDriver] | FawkesError]:
        """:meth:`spec` of each of ``clusters`` (live cluster rows), from one read of the nodes and one of
        the frameworks (the fast step and the sampler visit every cluster every few seconds); a cluster
        whose spec cannot be made maps to its error."""
        clusters = list(clusters)
        if not clusters:
            return {}
        if nodes is None:  # (the caller's read of every live cluster's nodes, if it made one)
            nodes = self.store.live_nodes_by_cluster()
        frameworks = {f.name: paths_of(f) for f in self.store.list_frameworks()}
        out: dict[str, tuple[ClusterSpec, FrameworkDriver] | FawkesError] = {}
        for c in clusters:
            try:
                fw = frameworks.get(c.framework)
                if fw is None:
                    raise FawkesError(f"framework {c.framework}: not registered")
                out[c.name] = self._spec(c, nodes.get(c.name, []), fw, states)
            except FawkesError as exc:
                out[c.name] = exc
        return out

    def _spec(self, c, nodes, fw: FrameworkPaths, states) -> tuple[ClusterSpec, FrameworkDriver]:
        nodes = [n for n in nodes if NodeState(n.state) in states]
        if not any(Role(n.role) is Role.CORE for n in nodes):
            raise FawkesError(f"cluster {c.name}: no core node to run the masters on")
        slot = c.port_slot if c.port_slot is not None else self.store.port_slot(c.name)  # taken once
        spec = ClusterSpec(name=c.name, framework=fw, nodes=tuple(self.node_spec(n.host, n.role) for n in nodes),
                           options=self.cluster_options, port_slot=slot)
        return spec, self.driver(fw.kind)
