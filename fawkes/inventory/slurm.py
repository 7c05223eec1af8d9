"""Write an inventory for a SLURM allocation ($SLURM_JOB_NODELIST, $SLURM_JOB_CPUS_PER_NODE)."""

from __future__ import annotations

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


def inventory_text(nodelist: str, cpus_per_node: str | None = None, *, user: str = "root",
                   key_file: str | None = None, work_dir: str | None = None, known_hosts: str | None = None,
                   port: int = 22) -> str:
    """An inventory (YAML text) of the allocation: addresses are the node names (resolved by DNS)."""
    hosts = allocation_hosts(nodelist, cpus_per_node)
    defaults: dict = {"user": user, "port": port}
    if key_file:
        defaults["key_file"] = key_file
    if work_dir:
        defaults["work_dir"] = work_dir
    doc: dict = {"version": 1}
    if known_hosts:
        doc["known_hosts"] = known_hosts
    doc["defaults"] = defaults
    doc["groups"] = {"slurm": [n for n, _ in hosts]}
    entries = []
    for name, cpus in hosts:
        e: dict = {"name": name, "address": name}
        if cpus is not None:
            e["cores"] = cpus
        entries.append(e)
    doc["hosts"] = entries
    head = f"# SLURM allocation {nodelist}" + (f" (cpus per node {cpus_per_node})" if cpus_per_node else "")
    return head + "\n" + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None)


__all__ = ["allocation_hosts", "inventory_text", "FawkesError"]
