"""Plain values describing a framework installation and an MR-cluster to render or drive.

They carry no behaviour and do no I/O, so the render module stays pure and the drivers,
the CLI and the tests can build them from the inventory, the store or by hand.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath

from fawkes.errors import FawkesError
from fawkes.mechanism.model import Role

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
_OPTION_PATH = re.compile(r"/[A-Za-z0-9._+/-]{1,255}")


def option_path(text: str) -> bool:
    """Whether ``text`` may be a path option's value (``job_python``, ``jvm_archive_dir``): absolute, of
    letters, digits and ``._+/-`` only (no space, quote or control), no ``..`` component."""
    return bool(_OPTION_PATH.fullmatch(text)) and "/../" not in text + "/"
#: ports in one cluster's block (its ``port_slot``): block ``s`` of the option ``port_range`` FIRST-LAST is
#: FIRST + s * PORT_BLOCK .. FIRST + (s + 1) * PORT_BLOCK - 1; each kind names its ports by offset in it
PORT_BLOCK = 20


def check_name(what: str, name: str) -> str:
    if not _NAME.match(name or ""):
        raise FawkesError(f"invalid {what} name {name!r}: use letters, digits, '.', '_', '-' (max 63)")
    return name


@dataclass(frozen=True)
class FrameworkPaths:
    """A registered framework installation, as paths valid on every host of the pool."""

    name: str
    kind: str
    spark_home: str = ""  # the Spark kinds; "" for a kind that runs no Spark (dask)
    hadoop_home: str | None = None  # a Hadoop 3.x installation (real deployments)
    hdfs_jars: str | None = None  # a dir with jars/ and webapps/ (the lab's HDFS 2.7.3)
    java_home: str | None = None
    #: kind ``spark``: a directory every host sees at this path (NFS, Lustre; in the lab, any directory
    #: outside the hosts' own ``node/``): clusters keep their input and output under <shared_dir>/<cluster>
    shared_dir: str | None = None
    #: kind ``dask``: the Python interpreter on every host that has ``distributed`` installed (None: the
    #: interpreter fawkes runs under, as in the lab where every host sees the same machine)
    python: str | None = None
    #: kind ``flink-hdfs``: the Flink distribution on every host (bin/jobmanager.sh, lib/flink-dist-*.jar)
    flink_home: str | None = None

    def __post_init__(self) -> None:
        check_name("framework", self.name)
        if self.shared_dir:
            if self.hadoop_home or self.hdfs_jars:
                raise FawkesError(f"framework {self.name}: --shared-dir is for the kinds on shared storage "
                                  "(no HDFS): give it without --hadoop-home and --hdfs-jars")
        elif bool(self.hadoop_home) == bool(self.hdfs_jars):
            raise FawkesError(f"framework {self.name}: give --shared-dir, or exactly one of --hadoop-home and "
                              "--hdfs-jars")
        for label, p in (("spark home", self.spark_home or None), ("hadoop home", self.hadoop_home),
                         ("hdfs jars", self.hdfs_jars), ("java home", self.java_home),
                         ("shared dir", self.shared_dir), ("python", self.python), ("flink home", self.flink_home)):
            if p is not None and (not isinstance(p, str) or not p.startswith("/") or re.search(r"\s", p)
                                  or not p.isprintable()):
                raise FawkesError(f"framework {self.name}: {label} must be an absolute path without spaces: {p!r}")

    @property
    def hdfs_major(self) -> int:
        """2 for the lab's jar dir, 3 for a Hadoop home."""
        return 3 if self.hadoop_home else 2

    @property
    def java(self) -> str:
        return f"{self.java_home}/bin/java" if self.java_home else "java"

    @property
    def hdfs_classpath(self) -> list[str]:
        """Classpath entries (after the conf dir) for NameNode, DataNode and the HDFS tools."""
        if self.hdfs_jars:
            return [self.hdfs_jars, f"{self.hdfs_jars}/jars/*"]
        h = f"{self.hadoop_home}/share/hadoop"
        return [f"{h}/common/*", f"{h}/common/lib/*", f"{h}/hdfs", f"{h}/hdfs/*", f"{h}/hdfs/lib/*"]

    def as_dict(self) -> dict[str, str | None]:
        return {"name": self.name, "kind": self.kind, "spark_home": self.spark_home,
                "hadoop_home": self.hadoop_home, "hdfs_jars": self.hdfs_jars, "java_home": self.java_home,
                "shared_dir": self.shared_dir, "python": self.python, "flink_home": self.flink_home}


@dataclass(frozen=True)
class NodeSpec:
    """One host of an MR-cluster: where it is, what it has, which role it plays."""

    name: str
    address: str
    role: Role
    root: str  # base directory on the host (as the host sees it); the cluster lives below it
    cores: int = 1
    memory_mb: int = 1024  # memory for executors on this host
    port: int = 22
    user: str = "root"
    key_file: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.role, Role):
            object.__setattr__(self, "role", Role(self.role))
        if not re.match(r"^[A-Za-z0-9.:_-]+$", self.address or ""):
            raise FawkesError(f"host {self.name}: invalid address {self.address!r}")
        if not self.root.startswith("/") or re.search(r"\s", self.root):
            raise FawkesError(f"host {self.name}: root must be an absolute path without spaces: {self.root!r}")
        if self.cores < 1 or self.memory_mb < 256:
            raise FawkesError(f"host {self.name}: needs at least 1 core and 256 MiB (got {self.cores}, {self.memory_mb})")


@dataclass(frozen=True)
class ClusterSpec:
    """An MR-cluster: its framework and its nodes; the first core node is the master."""

    name: str
    framework: FrameworkPaths
    nodes: tuple[NodeSpec, ...]
    options: Mapping[str, str] = field(default_factory=dict)
    #: its block of ports (the store's ``port_slot``, allocated when it is first deployed); None: the
    #: frameworks' standard ports (a cluster built by hand, the lab's tests)
    port_slot: int | None = None

    def __post_init__(self) -> None:
        check_name("cluster", self.name)
        slot = self.port_slot
        if slot is not None and (isinstance(slot, bool) or not isinstance(slot, int) or not 0 <= slot < 65536):
            raise FawkesError(f"cluster {self.name}: invalid port block {self.port_slot!r}")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            raise FawkesError(f"cluster {self.name}: a host appears twice")
        if not any(n.role is Role.CORE for n in self.nodes):
            raise FawkesError(f"cluster {self.name}: needs at least one core node")

    @property
    def master(self) -> NodeSpec:
        return next(n for n in self.nodes if n.role is Role.CORE)

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise FawkesError(f"cluster {self.name}: no node {name!r}")

    def cluster_dir(self, node: NodeSpec) -> str:
        return str(PurePosixPath(node.root) / "clusters" / self.name)

    def with_node(self, node: NodeSpec) -> ClusterSpec:
        if any(n.name == node.name for n in self.nodes):
            return replace(self, nodes=tuple(node if n.name == node.name else n for n in self.nodes))
        return replace(self, nodes=(*self.nodes, node))

    def without(self, name: str) -> ClusterSpec:
        return replace(self, nodes=tuple(n for n in self.nodes if n.name != name))

    def by_role(self, role: Role) -> list[NodeSpec]:
        return [n for n in self.nodes if n.role is role]
