"""Host inventories: the YAML format (inventory/README.md), loading with line numbers, checks,
probing over SSH, and SLURM hostlist expansion.

The names below are imported on first use (PEP 562): the store reads only ``fawkes.inventory.schema``
and must not pull in the SSH executor (paramiko) with it."""

from __future__ import annotations

import importlib

_FROM = {"check_inventory": "load", "load_inventory": "load", "InventoryHost": "model", "Inventory": "model"}

__all__ = ["Inventory", "InventoryHost", "check_inventory", "load_inventory"]


def __getattr__(name: str):
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
