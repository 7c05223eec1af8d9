"""An inventory change without a restart: ``fawkes inventory apply`` and SIGHUP to the coordinator.

:func:`plan_change` reads and validates the new inventory file completely, then asks the state
what would change (a dry run of :meth:`~fawkes.store.Store.sync_hosts`): a host dropped while a
cluster holds it is refused (drain it first: ``fawkes host drain``), as is a change the running SSH
executor cannot take (the host-key settings, a simulated fleet).  :func:`apply_change` then writes the
hosts (added ones free, dropped ones retired) and brings the coordinator's inventory and SSH targets
in line.  Each step refuses in one line with nothing changed; the file is read once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.inventory import Inventory, load_inventory

#: the label of hosts a pool provider added (fawkes.coordinator.pool.LABEL): kept by a reload
POOL_LABEL = "fawkes-pool"


@dataclass(frozen=True)
class Change:
    inventory: Inventory  # the new one, pool hosts of the running one kept
    outcome: dict[str, list[str]]  # added, updated, retired, unchanged


def host_rows(inv: Inventory) -> list[dict]:
    """The state's view of an inventory's hosts (:meth:`Store.sync_hosts`)."""
    return [{"name": h.name, "address": h.address, "cores": h.cores or 1, "memory_mb": h.memory_mb or 1024,
             "rack": h.rack} for h in inv.hosts]


def plan_change(store, path: str | Path, running: Inventory | None = None) -> Change:
    """What applying the inventory at ``path`` would change, checked; nothing written."""
    new = load_inventory(path)  # every problem: one line naming the file, line and field
    if running is not None:
        if running.simulated is not None or new.simulated is not None:
            raise FawkesError(f"{path}: a simulated inventory is not reloaded: restart the coordinator")
        if (new.known_hosts, new.strict_host_keys) != (running.known_hosts, running.strict_host_keys):
            raise FawkesError(f"{path}: known_hosts or strict_host_keys changed: restart the coordinator "
                              "(its SSH connections were opened with the old ones)")
        names = {h.name for h in new.hosts}
        new.hosts.extend(h for h in running.hosts if POOL_LABEL in h.labels and h.name not in names)
    return Change(new, store.sync_hosts(host_rows(new), dry_run=True))


def apply_change(store, change: Change, *, running: Inventory | None = None, executor=None) -> dict[str, list[str]]:
    """Write the change to the state; with a running coordinator's ``running`` inventory and SSH
    ``executor``, make them match (new or moved hosts reachable, dropped ones forgotten)."""
    out = store.sync_hosts(host_rows(change.inventory))
    if running is not None:
        old = {h.name: h for h in running.hosts}
        running.hosts[:] = change.inventory.hosts
        running.groups = change.inventory.groups
        if executor is not None:
            for h in change.inventory.hosts:
                if h.name in old and old[h.name].target() != h.target():
                    executor.remove_target(h.name)  # moved or another login: its connections closed
                executor.add_target(h.target())
            for name in out["retired"]:
                executor.remove_target(name)
    return out


def summary(out: dict[str, list[str]]) -> str:
    parts = [f"{k} {', '.join(v)}" for k in ("added", "updated", "retired") if (v := out.get(k))]
    return "; ".join(parts) or "no change"


def parse_summary(text: str) -> dict[str, list[str]]:
    """:func:`summary`'s text back into what changed (host names hold no ',', ';' or space)."""
    out: dict[str, list[str]] = {"added": [], "updated": [], "retired": []}
    if text != "no change":
        for part in text.split("; "):
            kind, _, names = part.partition(" ")
            if kind not in out or not names:
                raise ValueError(f"not an inventory change summary: {text!r}")
            out[kind] = names.split(", ")
    return out
