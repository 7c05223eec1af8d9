"""The inventory file format (pydantic models, unknown fields rejected).  See inventory/README.md."""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

# Host, group and rack names: safe to put on a command line, in a file name or a YAML key.
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$")
# Labels: identifiers (letters, digits, '_' and '-'), starting with a letter.
SAFE_LABEL = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
SAFE_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,31}$")
_DNS_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")
_UNITS = {"": 1, "m": 1, "mb": 1, "mib": 1, "g": 1024, "gb": 1024, "gib": 1024, "t": 1 << 20, "tb": 1 << 20,
          "tib": 1 << 20}


def safe_name(value: str, what: str = "name") -> str:
    if not isinstance(value, str) or not SAFE_NAME.match(value):
        raise ValueError(f"{what} {value!r} is not a safe identifier (letters, digits, '.', '_', '-'; "
                         "starting with a letter or digit; at most 63 characters)")
    return value


def safe_label(value: str) -> str:
    if not isinstance(value, str) or not SAFE_LABEL.match(value):
        raise ValueError(f"label {value!r} is not a safe identifier (letters, digits, '_', '-'; "
                         "starting with a letter)")
    return value


def check_address(value: str) -> str:
    if not isinstance(value, str):
        raise ValueError("address must be a string")
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        pass
    name = value[:-1] if value.endswith(".") else value
    if not name or len(name) > 253 or not all(_DNS_LABEL.match(p) for p in name.split(".")):
        raise ValueError(f"address {value!r} is neither an IP address nor a valid host name")
    return value


def parse_memory_mb(value: object) -> object:
    """``4096`` (MiB), ``"4GiB"``, ``"512M"``, ``"1.5 TiB"`` -> MiB as int."""
    if isinstance(value, bool):
        raise ValueError("memory must be a number of MiB or a size like '4GiB'")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([A-Za-z]*)\s*", value)
        if m and m.group(2).lower() in _UNITS:
            mib = float(m.group(1)) * _UNITS[m.group(2).lower()]
            if not mib <= MAX_MEMORY_MIB:  # 1e400 is inf: no int of it
                raise ValueError(f"memory {value!r}: more than 1 EiB ({MAX_MEMORY_MIB} MiB)")
            return int(mib)
        raise ValueError(f"memory {value!r}: expected MiB or a size like '4GiB', '512MiB', '1TiB'")
    return value


def _abs_path(value: str) -> str:
    if not isinstance(value, str) or not value.startswith("/") or any(c in value for c in "\0\n\r"):
        raise ValueError(f"{value!r} is not an absolute path")
    return value


Name = Annotated[str, BeforeValidator(safe_name)]
Label = Annotated[str, BeforeValidator(safe_label)]
Address = Annotated[str, BeforeValidator(check_address)]
Port = Annotated[int, Field(ge=1, le=65535, strict=True)]
#: the largest host an inventory may describe: 2^20 cores, 2^40 MiB (1 EiB) of memory, 2^30 GB of disk
MAX_CORES = 2**20
MAX_HOSTS = 100_000  # hosts in one inventory (the benches run 50,000 nodes)
MAX_MEMORY_MIB = 2**40
MAX_DISK_GB = 2.0**30
MemoryMiB = Annotated[int, BeforeValidator(parse_memory_mb), Field(ge=1, le=MAX_MEMORY_MIB)]
AbsPath = Annotated[str, BeforeValidator(_abs_path)]


class Disk(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    path: AbsPath
    size_gb: float | None = Field(default=None, gt=0, le=MAX_DISK_GB, allow_inf_nan=False)


def _disk(value: object) -> object:
    return {"path": value} if isinstance(value, str) else value


DiskItem = Annotated[Disk, BeforeValidator(_disk)]


class _HostFields(BaseModel):
    model_config = ConfigDict(extra="forbid")
    port: Port | None = None
    user: str | None = None
    key_file: str | None = None
    cores: int | None = Field(default=None, ge=1, le=MAX_CORES, strict=True)
    memory: MemoryMiB | None = None
    disks: list[DiskItem] | None = None
    rack: Name | None = None
    labels: list[Label] | None = None
    work_dir: AbsPath | None = None

    @field_validator("user")
    @classmethod
    def _user(cls, v: str | None) -> str | None:
        if v is not None and not SAFE_USER.match(v):
            raise ValueError(f"user {v!r} is not a safe user name")
        return v

    @field_validator("key_file")
    @classmethod
    def _key_file(cls, v: str | None) -> str | None:
        if v is not None and (not v or any(c in v for c in "\0\n\r")):
            raise ValueError("key_file must be a file path")
        return v


class HostDefaults(_HostFields):
    """Values every host inherits unless it sets its own."""


class HostSpec(_HostFields):
    name: Name
    address: Address


def _fleet(value: object) -> object:
    """``simulated: N`` is short for ``simulated: {hosts: N}`` (not for true/false)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"hosts": value}
    if not isinstance(value, dict):
        raise ValueError(f"expected a number of hosts (an integer 1..{MAX_HOSTS}) or a mapping, got {str(value)[:40]!r}")
    return value


class SimulatedFleet(BaseModel):
    """``simulated:``: N simulated hosts, never reached (fawkes/simfleet: a test and capacity-planning tool)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    hosts: int = Field(ge=1, le=MAX_HOSTS, strict=True)
    cores: int = Field(default=4, ge=1, le=1024, strict=True)  # a simulated host's task slots
    memory: MemoryMiB = 8192
    costs: str | None = None  # a cost file (fawkes trace from-state --costs), relative to the inventory
    speedup: float = Field(default=1.0, ge=1.0, le=1000.0, allow_inf_nan=False)  # latencies divided by it
    seed: int = Field(default=0, ge=0, le=2**32 - 1, strict=True)
    host_failures_per_hour: float = Field(default=0.0, ge=0.0, le=3600.0, allow_inf_nan=False)  # per host
    start_failure: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)  # a daemon start fails
    job_failure: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)  # a job ends with exit 1
    report: str | None = None  # a JSON file written when the coordinator stops (relative to the inventory)

    @field_validator("costs", "report")
    @classmethod
    def _path(cls, v: str | None) -> str | None:
        if v is not None and (not v or len(v) > 4096 or any(c in v for c in "\0\n\r")):
            raise ValueError("must be a file path (no NUL byte or newline, at most 4096 characters)")
        return v


class InventoryFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: Literal[1] = 1
    known_hosts: str | None = None
    strict_host_keys: bool = Field(default=True, strict=True)  # YAML true/false only, not 'no' or 0
    defaults: HostDefaults = Field(default_factory=HostDefaults)
    groups: dict[Name, list[Name]] = Field(default_factory=dict)
    hosts: list[HostSpec] = Field(default_factory=list, max_length=MAX_HOSTS)
    simulated: Annotated[SimulatedFleet, BeforeValidator(_fleet)] | None = None

    @model_validator(mode="after")
    def _hosts_or_simulated(self) -> "InventoryFile":
        if self.simulated is not None and self.hosts:
            raise ValueError("simulated and hosts both given: an inventory lists real hosts or simulates a fleet, "
                             "not both")
        if self.simulated is None and not self.hosts:
            raise ValueError("hosts is required (at least one host), or simulated: N for a simulated fleet")
        return self
