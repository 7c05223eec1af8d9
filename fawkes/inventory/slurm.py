"""Write an inventory for a SLURM allocation ($SLURM_JOB_NODELIST, $SLURM_JOB_CPUS_PER_NODE)."""

from __future__ import annotations

import re

import yaml

from fawkes.errors import FawkesError
from fawkes.inventory.hostlist import HostlistError, expand, expand_cpus
from fawkes.inventory.schema import SAFE_NAME


def allocation_hosts(nodelist: str, cpus_per_node: str | None = None) -> list[tuple[str, int | None]]:
    """``[(node name, cpus or None)]`` of an allocation; names checked as safe identifiers."""
    names = expand(nodelist)
    if not names:
        raise HostlistError(f"nodelist {nodelist!r} names no hosts")
    seen = set()
    for n in names:
        if not SAFE_NAME.match(n):
            raise HostlistError(f"nodelist {nodelist!r}: host name {n!r} is not a safe identifier")
        if n in seen:
            raise HostlistError(f"nodelist {nodelist!r}: host {n!r} appears twice")
        seen.add(n)
    cpus: list[int | None] = [None] * len(names)
    if cpus_per_node:
        cpus = list(expand_cpus(cpus_per_node))
        if len(cpus) == 1 and len(names) > 1:
            cpus = cpus * len(names)
        if len(cpus) != len(names):
            raise HostlistError(f"cpus-per-node {cpus_per_node!r} gives {len(cpus)} values for "
                                f"{len(names)} nodes of {nodelist!r}")
    return list(zip(names, cpus))


def _options(user: str, key_file: str | None, work_dir: str | None, known_hosts: str | None,
             port: int) -> dict:
    """The inventory's head: version, known_hosts and the defaults every host inherits."""
    defaults: dict = {"user": user, "port": port}
    if key_file:
        defaults["key_file"] = key_file
    if work_dir:
        defaults["work_dir"] = work_dir
    doc: dict = {"version": 1}
    if known_hosts:
        doc["known_hosts"] = known_hosts
    doc["defaults"] = defaults
    return doc


def inventory_doc(nodelist: str, cpus_per_node: str | None = None, *, user: str = "root",
                  key_file: str | None = None, work_dir: str | None = None, known_hosts: str | None = None,
                  port: int = 22) -> dict:
    """The inventory of the allocation as data (what :func:`inventory_text` writes)."""
    hosts = allocation_hosts(nodelist, cpus_per_node)
    doc = _options(user, key_file, work_dir, known_hosts, port)
    doc["groups"] = {"slurm": [n for n, _ in hosts]}
    doc["hosts"] = [{"name": n, "address": n} | ({"cores": c} if c is not None else {}) for n, c in hosts]
    return doc


#: the most CPUs one node may declare (a sanity bound: 10**30 is a typo, not a node)
MAX_CPUS = 1 << 20
_STR_TAG = "tag:yaml.org,2002:str"


def _comment(text: str) -> str:
    """``text`` for a one-line YAML comment: control characters (a newline would end the comment) escaped."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)
# a host name of DNS labels: what check_address accepts for a safe name (an IPv4 address matches too);
# one regex, as check_address's ip_address() attempt costs ~20 us a name
_DNS_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _plain(resolve, value: str) -> str:
    """``value`` (a safe name) as a YAML scalar that reads back as that string: plain, or
    single-quoted when plain would read as something else (``123``, ``1e3``, ``on``, ``null``)."""
    return value if resolve(yaml.ScalarNode, value, (True, False)) == _STR_TAG else f"'{value}'"


def inventory_text(nodelist: str, cpus_per_node: str | None = None, *, user: str = "root",
                   key_file: str | None = None, work_dir: str | None = None, known_hosts: str | None = None,
                   port: int = 22) -> tuple[str, int]:
    """An inventory (YAML text) of the allocation, and its number of hosts; addresses are the
    node names (resolved by DNS).

    Everything is checked before a line is written: the options against the inventory schema
    (ConfigError naming the field), every name as a host name and every CPU count (HostlistError).
    The host list is written line by line, not through a YAML dumper (100,000 hosts took a minute
    that way); tests/test_hostlist.py reads it back and compares it with yaml.safe_dump's output.
    """
    from fawkes.inventory.schema import InventoryFile, check_address
    from fawkes.yamlfile import validate_data

    hosts = allocation_hosts(nodelist, cpus_per_node)
    head = _options(user, key_file, work_dir, known_hosts, port)
    validate_data(None, {**head, "hosts": [{"name": hosts[0][0], "address": hosts[0][0]}]}, {}, InventoryFile)
    for name, cpus in hosts:
        try:
            if not _DNS_NAME.match(name):
                check_address(name)
        except ValueError:
            raise HostlistError(f"nodelist {nodelist!r}: host name {name!r} is not a DNS name "
                                "(the inventory's address)") from None
        if cpus is not None and not 1 <= cpus <= MAX_CPUS:
            raise HostlistError(f"cpus-per-node {cpus_per_node!r}: {cpus} CPUs for {name} "
                                f"(expected 1 to {MAX_CPUS})")
    resolve = yaml.resolver.Resolver().resolve
    names = [_plain(resolve, n) for n, _ in hosts]
    out = [f"# SLURM allocation {_comment(nodelist)}"
           + (f" (cpus per node {_comment(cpus_per_node)})" if cpus_per_node else ""),
           yaml.safe_dump(head, sort_keys=False, default_flow_style=None).rstrip("\n"), "groups:", "  slurm:"]
    out += [f"  - {n}" for n in names]
    out.append("hosts:")
    out += [f"- {{name: {n}, address: {n}, cores: {c}}}" if c is not None else f"- {{name: {n}, address: {n}}}"
            for n, (_, c) in zip(names, hosts)]
    out.append("")
    return "\n".join(out), len(hosts)


__all__ = ["allocation_hosts", "inventory_doc", "inventory_text", "FawkesError"]
