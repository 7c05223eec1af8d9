"""The SSH test lab: N hosts as network namespaces with their own sshd, on one machine.

Layout of the lab directory::

    lab.json                 state: prefix, subnet, CPU quota and memory limit per host, racks, hosts (netns, veth, pid)
    id_ed25519(.pub)         the lab's login key;  authorized_keys
    known_hosts              every host's key, under its name and address
    etc_hosts                bind-mounted over /etc/hosts on every host (hosts + "controller")
    bashrc                   bind-mounted over root's ~/.bashrc on every host (a fresh node's: nothing)
    inventory.yaml           an inventory of the lab (see inventory/README.md)
    node/                    each host sees its own root directory here (bind mount)
    hosts/<h>/root/          that root, as seen from the root namespace
    hosts/<h>/{ssh_host_ed25519_key, sshd_config, sshd.log}
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.lab import capacity, cgroup, netns, slurm, sshd
from fawkes.ssh.executor import Executor, Target

DEFAULT_DIR = Path("/tmp/fawkes-lab")
_PREFIX = re.compile(r"^[a-z][a-z0-9]{0,7}$")
_SUBNET = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")
_SAFE_DIR = re.compile(r"^[A-Za-z0-9_./+-]+$")
MAX_HOSTS = 200


def default_dir() -> Path:
    return Path(os.environ.get("FAWKES_LAB_DIR") or DEFAULT_DIR)


@dataclass(frozen=True)
class LabHost:
    name: str
    address: str
    root: Path          # the host's own root directory, as seen from the root namespace
    netns: str
    veth: str
    pid: int | None = None  # the host's `unshare` process (its PID namespace)


#: held while a lab picks a free subnet and takes it (:meth:`Lab.up_free`)
LOCK_FILE = "/tmp/fawkes-lab-subnets.lock"


class Lab:
    """A running (or crashed/partly running) lab.  Build one with :meth:`up` or :meth:`load`."""

    def __init__(self, dir: Path, prefix: str, subnet: str, hosts: list[LabHost], cpus: float | None = None,
                 memory_mb: int | None = None, racks: int = 2, rack_bandwidth: str | None = None):
        self.dir = Path(dir).resolve()
        self.prefix, self.subnet = prefix, subnet
        self.cpus = cpus  # CPU quota per host in cores (cgroup), None = unlimited
        self.memory_mb = memory_mb  # memory limit per host in MiB (cgroup), None = unlimited
        self.racks = racks  # rack labels r1..rN in the inventory, hosts split in order (placement, issue 12)
        self.rack_bandwidth = rack_bandwidth  # with a rate: one bridge per rack, inter-rack traffic shaped
        self.hosts = hosts
        self.inventory_path = self.dir / "inventory.yaml"
        self.known_hosts = self.dir / "known_hosts"
        self.key_file = self.dir / "id_ed25519"
        self.node_dir = self.dir / "node"
        self.controller_address = f"{subnet}.1"

    # ------------------------------------------------------------------ create / load
    @classmethod
    def up(cls, hosts: int = 4, dir: Path | None = None, *, prefix: str = "fawkes",
           subnet: str = "10.200.0", cpus: float | str | None = None,
           memory: int | str | None = None, racks: int | None = None, rack_bandwidth: str | None = None) -> "Lab":
        """Bring up ``hosts`` SSH hosts (idempotent: a healthy lab of that shape is reused).

        ``cpus`` (cores, e.g. 0.25) and ``memory`` (MiB as an int, or a size such as ``"2G"``):
        each host's CPU quota and memory limit (cgroups holding all its processes), so that a node
        is a fixed slice of this machine; ``"auto"`` divides the machine evenly; None leaves every
        host the whole machine.  All hosts together must fit the machine (:mod:`fawkes.lab.capacity`).

        ``racks``: the hosts, in order, are split into this many racks ``r1..rN`` (inventory labels);
        ``rack_bandwidth`` (e.g. ``"100mbit"``): each rack gets its own bridge, linked to the lab's, and
        traffic between hosts of different racks is limited to that rate (docs/lab.md, "Racks").
        """
        dir = Path(dir or default_dir()).resolve()
        _check_args(hosts, dir, prefix, subnet)
        if racks is None:  # 2 racks unless the lab has a single host
            racks = 2 if isinstance(hosts, int) and hosts >= 2 else 1
        _check_racks(hosts, racks, rack_bandwidth)
        cpus, memory_mb = capacity.size(hosts, cpus, memory)
        netns.require_support()
        cgroup.require([c for c, v in ((cgroup.CPU, cpus), (cgroup.MEMORY, memory_mb)) if v is not None])
        shape = (prefix, subnet, hosts, cpus, memory_mb, racks, rack_bandwidth)
        if (dir / "lab.json").is_file():
            try:
                old = cls.load(dir)
            except FawkesError:
                old = None
            if old and (old.prefix, old.subnet, len(old.hosts), old.cpus, old.memory_mb, old.racks,
                        old.rack_bandwidth) == shape \
                    and old.healthy():
                return old
            if old and (old.prefix, old.subnet) != (prefix, subnet):
                old.down()
        cls.cleanup(prefix, subnet, dir)
        users = netns.subnet_users(subnet)
        if users:
            raise FawkesError(f"lab: subnet {subnet}.0/24 is already used by {', '.join(users)} "
                              "(another lab?); choose another --subnet")
        lab = cls(dir, prefix, subnet, [], cpus, memory_mb, racks, rack_bandwidth)
        try:
            lab._create(hosts)
        except BaseException:
            cls.cleanup(prefix, subnet, dir)
            raise
        return lab

    @classmethod
    def load(cls, dir: Path | None = None) -> "Lab":
        dir = Path(dir or default_dir()).resolve()
        if not _SAFE_DIR.match(str(dir)):  # no lab can live there (`up` refuses such a directory)
            raise FawkesError(f"no lab in {str(dir)!r} (a lab directory contains only letters, digits and ./_+-)")
        try:
            if not (dir / "lab.json").is_file():  # also a file or FIFO given as the directory
                raise FileNotFoundError(dir / "lab.json")
            state = json.loads((dir / "lab.json").read_text())
            hosts = [LabHost(**{**h, "root": Path(h["root"])}) for h in state["hosts"]]
            return cls(dir, state["prefix"], state["subnet"], hosts, state.get("cpus"), state.get("memory_mb"),
                       state.get("racks", 2), state.get("rack_bandwidth"))
        except FileNotFoundError:
            raise FawkesError(f"no lab in {dir} (start one with `fawkes lab up --dir {dir}`)") from None
        except (ValueError, KeyError, TypeError) as exc:
            raise FawkesError(f"{dir / 'lab.json'}: unreadable lab state ({exc}); run `fawkes lab down "
                              f"--dir {dir} --prefix PREFIX --subnet SUBNET` with the lab's prefix and subnet") from None

    @classmethod
    def cleanup(cls, prefix: str = "fawkes", subnet: str = "10.200.0", dir: Path | None = None) -> dict:
        """Remove leftovers of any earlier lab with this prefix (processes, netns, links, guard route, cgroups)."""
        netns.require_support()
        removed = {"slurm": (slurm.stop_root_daemons(Path(dir)) if dir is not None else 0)
                   + slurm.stop_by_prefix(prefix)}
        removed |= netns.teardown(prefix, subnet)
        removed["cgroups"] = cgroup.remove(prefix)
        if dir is not None:
            (Path(dir) / "lab.json").unlink(missing_ok=True)
        return removed

    def _create(self, n: int) -> None:
        d = self.dir
        for sub in ("hosts", "node"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        os.chmod(d, 0o755)
        sshd.ensure_key(self.key_file, "fawkes-lab")
        (d / "authorized_keys").write_text(sshd.public_key(self.key_file) + " fawkes-lab\n")
        names = [f"h{i}" for i in range(1, n + 1)]
        addrs = [f"{self.subnet}.{10 + i}" for i in range(1, n + 1)]
        hosts_lines = ["127.0.0.1 localhost", "::1 localhost ip6-localhost ip6-loopback",
                       f"{self.controller_address} controller"]
        hosts_lines += [f"{a} {h}" for h, a in zip(names, addrs)]
        (d / "etc_hosts").write_text("\n".join(hosts_lines) + "\n")
        (d / "bashrc").write_text("# fawkes lab: root's ~/.bashrc on the lab hosts (see fawkes/lab/sshd.py start)\n")
        known = []
        netns.create_bridge(self.prefix, self.subnet)
        bridged = self.rack_bandwidth is not None and self.racks > 1  # one bridge per rack
        if bridged:
            for r in range(1, self.racks + 1):
                others = [a for j, a in enumerate(addrs) if self.rack_of(j, n) != r]
                netns.create_rack(self.prefix, r, self.rack_bandwidth, others)
        for i, (name, addr) in enumerate(zip(names, addrs), start=1):
            hd = d / "hosts" / name
            (hd / "root").mkdir(parents=True, exist_ok=True)
            key = hd / "ssh_host_ed25519_key"
            sshd.ensure_key(key, name)
            known.append(f"{name},{addr} {sshd.public_key(key)}")
            (hd / "sshd_config").write_text(sshd.sshd_config(
                name=name, host_key=key, authorized_keys=d / "authorized_keys", log_root=hd / "root"))
            netns.create_host_net(self.prefix, i, addr,
                                  netns.rack_bridge_name(self.prefix, self.rack_of(i - 1, n)) if bridged else None)
            self.hosts.append(LabHost(name, addr, hd / "root", netns.netns_name(self.prefix, i),
                                      netns.veth_name(self.prefix, i)))
        self.known_hosts.write_text("\n".join(known) + "\n")
        self.hosts = [self._start(h) for h in self.hosts]
        self._save()
        sshd.wait_port([h.address for h in self.hosts])
        self.inventory_path.write_text(self.inventory_yaml())

    def _start(self, h: LabHost) -> LabHost:
        hd = self.dir / "hosts" / h.name
        procs = [] if self.cpus is None and self.memory_mb is None else \
            cgroup.create(self.prefix, h.name, cpus=self.cpus, memory_mb=self.memory_mb)
        pid = sshd.start(netns=h.netns, hostname=h.name, config=hd / "sshd_config", log=hd / "sshd.log",
                         root=h.root, node_dir=self.node_dir, etc_hosts=self.dir / "etc_hosts",
                         cgroup_procs=procs, bashrc=self.dir / "bashrc")
        return LabHost(h.name, h.address, h.root, h.netns, h.veth, pid)

    def _save(self) -> None:
        state = {"prefix": self.prefix, "subnet": self.subnet, "cpus": self.cpus, "memory_mb": self.memory_mb,
                 "racks": self.racks, "rack_bandwidth": self.rack_bandwidth,
                 "hosts": [{**asdict(h), "root": str(h.root)} for h in self.hosts]}
        tmp = self.dir / "lab.json.tmp"
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.replace(self.dir / "lab.json")

    # ------------------------------------------------------------------ use
    def host(self, name: str) -> LabHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise FawkesError(f"no lab host {name!r} (hosts: {', '.join(h.name for h in self.hosts)})")

    def targets(self, names: list[str] | None = None) -> list[Target]:
        chosen = self.hosts if names is None else [self.host(n) for n in names]
        return [Target(h.name, h.address, 22, "root", self.key_file) for h in chosen]

    def executor(self, names: list[str] | None = None, **kw) -> Executor:
        kw.setdefault("known_hosts", self.known_hosts)
        return Executor(self.targets(names), **kw)

    def crash(self, host: str) -> None:
        """Kill every process of ``host`` at once (its PID namespace goes away)."""
        h = self.host(host)
        sshd.kill_host(h.pid)
        for pid in netns.netns_pids(h.netns):  # anything that escaped the PID namespace
            sshd.kill_host(pid)
        self._replace(LabHost(h.name, h.address, h.root, h.netns, h.veth, None))

    def revive(self, host: str) -> None:
        """Start ``host``'s sshd again (same host key, same root directory)."""
        h = self.host(host)
        if sshd.alive(h.pid):
            return
        h = self._start(h)
        self._replace(h)
        sshd.wait_port([h.address])

    def _replace(self, new: LabHost) -> None:
        self.hosts = [new if h.name == new.name else h for h in self.hosts]
        self._save()

    def rack_of(self, i: int, n: int | None = None) -> int:
        """The rack (1..racks) of the ``i``-th host (from 0) of ``n``: the hosts split in order."""
        n = len(self.hosts) if n is None else n
        return 1 + i * self.racks // max(1, n)

    def healthy(self) -> bool:
        return all(s["alive"] for s in self.status()["hosts"])

    @classmethod
    def up_free(cls, hosts: int, dir: Path, *, prefix: str, nets: Iterable[int], **kw) -> "Lab":
        """:meth:`up` on the first ``10.N.0/24`` of ``nets`` no interface uses, chosen and taken under a
        machine-wide lock, so that labs brought up at once (two test runs, a test beside a benchmark) never
        pick the same subnet; FawkesError when none is free."""
        import fcntl

        nets = list(nets)
        with open(LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                for n in nets:
                    subnet = f"10.{n}.0"
                    if cls.subnet_free(subnet):
                        cls.cleanup(prefix, subnet)
                        return cls.up(hosts, dir, prefix=prefix, subnet=subnet, **kw)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
        raise FawkesError(f"no free 10.N.0/24 subnet for lab {prefix} (tried {len(nets)} from 10.{nets[0] if nets else 0}.0)")

    @staticmethod
    def subnet_free(subnet: str) -> bool:
        """No interface of the root namespace has an address in ``<subnet>.0/24``."""
        return not netns.subnet_users(subnet)

    def status(self) -> dict:
        present = set(netns.list_netns(self.prefix))
        hosts = []
        for h in self.hosts:
            up = sshd.alive(h.pid) and h.netns in present
            hosts.append({"name": h.name, "address": h.address, "netns": h.netns, "pid": h.pid,
                          "alive": up, "processes": len(netns.netns_pids(h.netns)) if h.netns in present else 0,
                          "root": str(h.root), "cpus": cgroup.quota(self.prefix, h.name) if self.cpus else None,
                          "memory_mb": cgroup.memory_limit_mb(self.prefix, h.name) if self.memory_mb else None})
        return {"dir": str(self.dir), "prefix": self.prefix, "subnet": self.subnet, "cpus": self.cpus,
                "memory_mb": self.memory_mb, "racks": self.racks, "rack_bandwidth": self.rack_bandwidth,
                "controller": self.controller_address, "inventory": str(self.inventory_path), "hosts": hosts}

    def down(self) -> dict:
        """Remove every process, namespace, link, route and cgroup of this lab, and its SLURM daemons
        (files stay for inspection)."""
        slurm_daemons = slurm.stop_root_daemons(self.dir)  # slurmctld, munged; slurmd dies with its host
        removed = netns.teardown(self.prefix, self.subnet) | {"slurm": slurm_daemons}
        sshd.reap()
        removed["cgroups"] = cgroup.remove(self.prefix)
        (self.dir / "lab.json").unlink(missing_ok=True)
        self.hosts = [LabHost(h.name, h.address, h.root, h.netns, h.veth, None) for h in self.hosts]
        return removed

    def inventory_yaml(self) -> str:
        """The lab as an inventory; ``cores``/``memory`` are each host's quota (1 core, 1 GiB without one)."""
        cores = max(1, math.ceil(round(self.cpus, 6))) if self.cpus else 1
        memory = f"{self.memory_mb}MiB" if self.memory_mb else "1GiB"
        limits = ([f"a CPU quota of {capacity.fmt_cpus(self.cpus)} CPU (cores: rounded up)"] if self.cpus else []) \
            + ([f"a memory limit of {capacity.fmt_mb(self.memory_mb)} (memory)"] if self.memory_mb else [])
        quota = (f"# Each host runs under {' and '.join(limits)}; docs/lab.md." if limits
                 else "# No CPU quota or memory limit per host: cores and memory below are nominal.")
        lines = ["# The fawkes SSH test lab (written by `fawkes lab up`; see inventory/README.md).",
                 "# Declared capacity is a slice: all lab hosts share one machine.", quota,
                 "version: 1", "known_hosts: known_hosts", "strict_host_keys: true",
                 "defaults:", "  user: root", "  port: 22", "  key_file: id_ed25519",
                 f"  cores: {cores}", f"  memory: {memory}", f"  work_dir: {self.node_dir}", "  labels: [lab]",
                 "groups:", f"  lab: [{', '.join(h.name for h in self.hosts)}]", "hosts:"]
        for i, h in enumerate(self.hosts):
            lines.append(f"  - {{name: {h.name}, address: {h.address}, rack: r{self.rack_of(i)}}}")
        return "\n".join(lines) + "\n"

    def wait_gone(self, host: str, timeout: float = 5.0) -> None:
        """Wait until no process is left in ``host``'s network namespace."""
        ns = self.host(host).netns
        deadline = time.monotonic() + timeout
        while netns.netns_pids(ns) and time.monotonic() < deadline:
            time.sleep(0.01)


def _check_racks(hosts: int, racks: int, rack_bandwidth: str | None) -> None:
    if isinstance(racks, bool) or not isinstance(racks, int) or not 1 <= racks <= max(1, min(hosts, 99)):
        raise FawkesError(f"lab: --racks must be between 1 and the number of hosts ({hosts}, at most 99), not {racks!r}")
    if rack_bandwidth is not None:
        netns.rate_bits(rack_bandwidth)
        if shutil.which("tc") is None:
            raise FawkesError("lab: --rack-bandwidth needs tc (apt-get install iproute2)")


def _check_args(hosts: int, dir: Path, prefix: str, subnet: str) -> None:
    if not isinstance(hosts, int) or not 1 <= hosts <= MAX_HOSTS:
        raise FawkesError(f"lab: --hosts must be between 1 and {MAX_HOSTS}, not {hosts!r}")
    if not _PREFIX.match(prefix):
        raise FawkesError(f"lab: prefix {prefix!r} must be 1-8 lowercase letters/digits, starting with a letter")
    m = _SUBNET.match(subnet)
    if not m or any(int(x) > 255 for x in m.groups()):
        raise FawkesError(f"lab: subnet {subnet!r} must be the first three octets of an IPv4 /24, e.g. 10.200.0")
    if not _SAFE_DIR.match(str(dir)):
        raise FawkesError(f"lab: directory {str(dir)!r} must contain only letters, digits and ./_+-")
