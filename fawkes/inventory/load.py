"""Load an inventory file and check it: every problem names the file, line and field."""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path

from fawkes.errors import ConfigError
from fawkes.inventory.model import DEFAULT_WORK_DIR, InventoryHost, Inventory
from fawkes.inventory.schema import InventoryFile
from fawkes.yamlfile import errors_for, field_name, line_of, load_yaml

import pydantic


def check_inventory(path: str | Path, *, check_files: bool = True) -> list[ConfigError]:
    """All problems of the inventory at ``path`` (empty list: valid)."""
    try:
        _, problems = _load(Path(path), check_files)
    except ConfigError as exc:
        return [exc]
    return problems


def load_inventory(path: str | Path, *, check_files: bool = True) -> Inventory:
    """Load and check ``path``; the first problem is raised as ConfigError."""
    inv, problems = _load(Path(path), check_files)
    if problems:
        raise problems[0]
    assert inv is not None
    if not inv.strict_host_keys:
        logging.getLogger("fawkes.inventory").warning(
            "%s: strict_host_keys: false: SSH host keys are not verified; whoever answers at a host's "
            "address gets its commands (give known_hosts and strict_host_keys: true)", path)
    return inv


def _load(path: Path, check_files: bool) -> tuple[Inventory | None, list[ConfigError]]:
    data, lines = load_yaml(path)
    file = str(path)
    if not isinstance(data, dict):
        raise ConfigError(file, "an inventory must be a mapping with a 'hosts' list", line=line_of(lines, ()))
    problems: list[ConfigError] = []

    def err(p: tuple, msg: str) -> None:
        e = ConfigError(file, msg, line=line_of(lines, p), field=field_name(p))
        if str(e) not in {str(x) for x in problems}:
            problems.append(e)

    _duplicates(data, err)
    try:
        spec = InventoryFile.model_validate(data)
    except pydantic.ValidationError as exc:
        problems += errors_for(file, data, lines, exc)
        return None, sorted(problems, key=lambda e: e.line or 0)

    base = path.resolve().parent
    if spec.simulated is not None:
        return _simulated(file, spec, base, lines, check_files)
    d = spec.defaults
    hosts: list[InventoryHost] = []
    names: dict[str, int] = {}
    for i, h in enumerate(spec.hosts):
        names.setdefault(h.name, i)
        key = _pick(h.key_file, d.key_file)
        key_path = (base / key) if key else None
        if check_files and key_path is not None and not key_path.is_file():
            where = ("hosts", i, "key_file") if h.key_file else ("defaults", "key_file")
            err(where, f"key file {str(key_path)!r} not found")
        hosts.append(InventoryHost(
            name=h.name, address=h.address, port=_pick(h.port, d.port, 22), user=_pick(h.user, d.user, "root"),
            key_file=key_path, cores=_pick(h.cores, d.cores), memory_mb=_pick(h.memory, d.memory),
            disks=tuple(_pick(h.disks, d.disks, [])), rack=_pick(h.rack, d.rack),
            labels=tuple(_pick(h.labels, d.labels, [])), work_dir=_pick(h.work_dir, d.work_dir, DEFAULT_WORK_DIR)))
    for g, members in spec.groups.items():
        if g in names:
            err(("groups", g), f"group {g!r} has the name of a host")
        for j, m in enumerate(members):
            if m not in names:
                err(("groups", g, j), f"unknown host {m!r}")
    known = (base / spec.known_hosts) if spec.known_hosts else None
    if check_files and known is not None and not known.is_file():
        err(("known_hosts",), f"known_hosts file {str(known)!r} not found")
    inv = Inventory(path=path, hosts=hosts, groups={g: list(m) for g, m in spec.groups.items()},
                    known_hosts=known, strict_host_keys=spec.strict_host_keys)
    return inv, sorted(problems, key=lambda e: e.line or 0)


def _simulated(file: str, spec: InventoryFile, base: Path, lines, check_files: bool):
    """``simulated: N``: N simulated hosts ``simhost-0001``... at addresses under ``simulated.invalid``
    (a name no resolver answers), their cost file checked now (fawkes/simfleet)."""
    fleet = spec.simulated
    costs = str(base / fleet.costs) if fleet.costs else None
    report = str(base / fleet.report) if fleet.report else None
    if check_files and costs is not None:
        from fawkes.traces.costfile import load_cost_file

        load_cost_file(costs)  # a bad cost file: one line naming that file and its field
    fleet = fleet.model_copy(update={"costs": costs, "report": report})
    width = max(4, len(str(fleet.hosts)))
    hosts = [InventoryHost(name=f"simhost-{i:0{width}d}", address=f"simhost-{i:0{width}d}.simulated.invalid",
                           cores=fleet.cores, memory_mb=fleet.memory) for i in range(1, fleet.hosts + 1)]
    groups = {g: list(m) for g, m in spec.groups.items()}
    names = {h.name for h in hosts}
    problems = [ConfigError(file, f"unknown host {m!r}", line=line_of(lines, ("groups", g, j)),
                            field=field_name(("groups", g, j)))
                for g, members in groups.items() for j, m in enumerate(members) if m not in names]
    inv = Inventory(path=Path(file), hosts=hosts, groups=groups, simulated=fleet)
    return inv, problems


def _duplicates(data: dict, err) -> None:
    """Duplicate host names and addresses, checked on the raw data (also when other fields are bad)."""
    hosts = data.get("hosts")
    if not isinstance(hosts, list):
        return
    for key, what in (("name", "host name"), ("address", "address")):
        seen: dict = {}
        for i, h in enumerate(hosts):
            v = h.get(key) if isinstance(h, dict) else None
            if not isinstance(v, str):
                continue
            norm = _address_key(v) if key == "address" else v.lower()
            if norm in seen:
                err(("hosts", i, key), f"duplicate {what} {v!r} (also hosts[{seen[norm]}])")
            seen.setdefault(norm, i)


def _address_key(v: str) -> str:
    """One spelling per address: ``::1`` and ``0:0:0:0:0:0:0:1`` are the same host."""
    try:
        return str(ipaddress.ip_address(v))
    except ValueError:
        return v.lower().rstrip(".")


def _pick(*values):
    for v in values:
        if v is not None:
            return v
    return None
