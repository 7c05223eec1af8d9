"""Registered frameworks: the bridge between the state store and the drivers.

The store (``fawkes.store.Store``: ``register_framework``, ``list_frameworks``,
``get_framework``, ``remove_framework``) keeps the records; this module turns a record into
:class:`FrameworkPaths`, checks an installation on the hosts before it is registered, and builds
the :class:`ClusterSpec` of a stored MR-cluster from the store and the inventory.
"""

from __future__ import annotations

from collections.abc import Sequence

from fawkes.errors import FawkesError
from fawkes.frameworks.base import driver_class
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role


def paths_of(record) -> FrameworkPaths:
    """A store ``Framework`` record (or any object with the same attributes) as FrameworkPaths."""
    p = record.paths or {}
    return FrameworkPaths(name=record.name, kind=record.kind, spark_home=p.get("spark_home") or "",
                          hadoop_home=p.get("hadoop_home"), hdfs_jars=p.get("hdfs_jars"), java_home=record.java_home,
                          shared_dir=p.get("shared_dir"), python=p.get("python"), flink_home=p.get("flink_home"))


def check_on_hosts(framework: FrameworkPaths, inventory, hosts: Sequence[str] | None = None,
                   progress=None) -> dict[str, list[str]]:
    """Problems per host for ``framework`` (files missing, Java not running); raise if any."""
    drv = driver_class(framework.kind)
    chosen = inventory.select(hosts) if hosts else inventory.select(None)
    if not chosen:
        raise FawkesError("no hosts to check the framework on")
    if progress:
        progress(f"checking {framework.name} on {len(chosen)} host(s)")
    with inventory.executor([h.name for h in chosen]) as ex:
        return drv.check_framework(ex, framework, [h.name for h in chosen])


def node_spec(host, role: Role | str) -> NodeSpec:
    """An inventory host as a NodeSpec (cores/memory default to 1 core / 1 GiB when not declared)."""
    return NodeSpec(name=host.name, address=host.address, role=Role(role), root=host.work_dir,
                    cores=host.cores or 1, memory_mb=host.memory_mb or 1024, port=host.port, user=host.user,
                    key_file=str(host.key_file) if host.key_file else None)


def cluster_spec(store, inventory, name: str, options: dict[str, str] | None = None) -> ClusterSpec:
    """The ClusterSpec of the live cluster ``name``: its framework and its nodes (core nodes first)."""
    c = store.get_cluster(name)
    fw = paths_of(store.get_framework(c.framework))
    nodes = store.list_nodes(name)
    if not nodes:
        raise FawkesError(f"cluster {name}: holds no nodes yet (not deployed)")
    order = {Role.CORE: 0, Role.TC: 1, Role.TR: 2}
    specs = sorted((node_spec(inventory.host(n.host), n.role) for n in nodes),
                   key=lambda s: order[s.role])  # stable: the first core node stays the master
    return ClusterSpec(c.name, fw, tuple(specs), options=options or {}, port_slot=c.port_slot)
