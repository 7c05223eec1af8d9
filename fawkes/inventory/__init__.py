"""Host inventories: the YAML format (inventory/README.md), loading with line numbers, checks,
probing over SSH, and SLURM hostlist expansion."""

from fawkes.inventory.load import check_inventory, load_inventory
from fawkes.inventory.model import InventoryHost, Inventory

__all__ = ["InventoryHost", "Inventory", "check_inventory", "load_inventory"]
