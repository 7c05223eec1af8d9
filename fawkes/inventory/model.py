"""A loaded, checked inventory: hosts with their defaults applied, groups, host-key settings."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.inventory.schema import Disk
from fawkes.ssh.executor import Executor, Target

DEFAULT_WORK_DIR = "/var/lib/fawkes"


@dataclass(frozen=True)
class InventoryHost:
    name: str
    address: str
    port: int = 22
    user: str = "root"
    key_file: Path | None = None
    cores: int | None = None
    memory_mb: int | None = None
    disks: tuple[Disk, ...] = ()
    rack: str | None = None
    labels: tuple[str, ...] = ()
    work_dir: str = DEFAULT_WORK_DIR

    def target(self) -> Target:
        return Target(self.name, self.address, self.port, self.user, self.key_file)


@dataclass
class Inventory:
    path: Path | None
    hosts: list[InventoryHost]
    groups: dict[str, list[str]] = field(default_factory=dict)
    known_hosts: Path | None = None
    strict_host_keys: bool = True
    #: ``simulated:`` (a :class:`~fawkes.inventory.schema.SimulatedFleet`): hosts simulated, never reached
    simulated: object | None = None
    _world: object | None = field(default=None, repr=False, compare=False)

    def host(self, name: str) -> InventoryHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise FawkesError(f"{self.path}: no host or group named {name!r}")

    def names(self) -> list[str]:
        return [h.name for h in self.hosts]

    def select(self, names: Iterable[str] | None = None) -> list[InventoryHost]:
        """Hosts by host or group name (all hosts when ``names`` is None), in inventory order."""
        if names is None:
            return list(self.hosts)
        wanted: set[str] = set()
        for n in names:
            if n in self.groups:
                wanted.update(self.groups[n])
            else:
                wanted.add(self.host(n).name)
        return [h for h in self.hosts if h.name in wanted]

    def with_label(self, label: str) -> list[InventoryHost]:
        return [h for h in self.hosts if label in h.labels]

    def targets(self, names: Iterable[str] | None = None) -> list[Target]:
        return [h.target() for h in self.select(names)]

    def executor(self, names: Iterable[str] | None = None, **kw) -> Executor:
        """An Executor for these hosts using the inventory's known_hosts and strictness; for a simulated
        inventory, one answering from the simulated fleet (one fleet per inventory: fawkes/simfleet)."""
        if self.simulated is not None:
            from fawkes.simfleet.executor import SimulatedExecutor
            from fawkes.simfleet.world import World

            if self._world is None:
                self._world = World.of(self.simulated, [h.name for h in self.hosts])
            return SimulatedExecutor(self._world, [h.name for h in self.select(names)])
        kw.setdefault("known_hosts", self.known_hosts)
        kw.setdefault("strict_host_keys", self.strict_host_keys)
        return Executor(self.targets(names), **kw)
