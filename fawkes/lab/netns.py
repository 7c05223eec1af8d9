"""Network plumbing of the lab: a bridge, one network namespace + veth per host, a guard route.

Everything is named from the lab's prefix (``<prefix>br0``, ``<prefix>-h<i>``, ``<prefix>-v<i>``)
so that teardown can find stale leftovers of an earlier lab without touching anything else.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time

from fawkes.errors import FawkesError

TOOLS = ("ip", "unshare", "/usr/sbin/sshd", "ssh-keygen")  # and tc, for shaped racks only


def sh(*argv: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run one command (an argv list, never a shell); on failure raise a one-line FawkesError."""
    proc = subprocess.run(argv, capture_output=True, text=True)
    if check and proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise FawkesError(f"lab: `{' '.join(argv)}` failed: {msg[-1] if msg else f'exit {proc.returncode}'}")
    return proc


def require_support() -> None:
    """Refuse clearly without root, the tools, or network-namespace support."""
    if os.geteuid() != 0:
        raise FawkesError("the lab needs root (it creates network namespaces, a bridge and sshd processes); "
                          "run it as root")
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise FawkesError(f"the lab needs {', '.join(missing)} (apt-get install iproute2 util-linux "
                          "openssh-server openssh-client)")
    if not os.path.exists("/proc/self/ns/net"):
        raise FawkesError("this kernel has no network namespace support (/proc/self/ns/net missing)")


def bridge_name(prefix: str) -> str:
    return f"{prefix}br0"


def netns_name(prefix: str, i: int) -> str:
    return f"{prefix}-h{i}"


def veth_name(prefix: str, i: int) -> str:
    return f"{prefix}-v{i}"


def guard_net(subnet: str) -> str:
    a, b, _ = subnet.split(".")
    return f"{a}.{b}.0.0/16"


def create_bridge(prefix: str, subnet: str) -> None:
    br = bridge_name(prefix)
    sh("ip", "link", "add", br, "type", "bridge")
    sh("ip", "addr", "add", f"{subnet}.1/24", "dev", br)
    sh("ip", "link", "set", br, "up")
    # guard: any other address of the /16 fails locally and never leaves the machine
    sh("ip", "route", "replace", "unreachable", guard_net(subnet))


def create_host_net(prefix: str, i: int, address: str, bridge: str | None = None) -> None:
    """Host ``i``'s namespace, its ``eth0`` on ``bridge`` (default: the lab's bridge)."""
    ns, veth = netns_name(prefix, i), veth_name(prefix, i)
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "link", "set", veth, "master", bridge or bridge_name(prefix), "up")
    sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")


# --- racks (issue 12): one bridge per rack, each linked to the lab's bridge (the spine, which holds the
# controller's address) by a veth "uplink"; traffic entering a rack from another rack's hosts is
# shaped to the inter-rack bandwidth on the uplink's spine end (HTB, a u32 filter per source host).
# Added latency (netem) is not possible where the kernel lacks sch_netem (docs/lab.md, "Racks").
_RATE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(kbit|mbit|gbit)$")
_RATE_BITS = {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}


def rate_bits(rate: str) -> float:
    """``"100mbit"`` -> 1e8; a one-line FawkesError unless ``<number>(kbit|mbit|gbit)`` in [1 kbit/s, 100 gbit/s]."""
    m = _RATE.match(rate) if isinstance(rate, str) else None
    bits = float(m.group(1)) * _RATE_BITS[m.group(2)] if m else 0.0
    if not 1e3 <= bits <= 1e11:
        raise FawkesError(f"lab: --rack-bandwidth {rate!r} must be a rate like 100mbit or 1gbit "
                          "(kbit, mbit, gbit; between 1kbit and 100gbit)")
    return bits


def rack_bridge_name(prefix: str, r: int) -> str:
    return f"{prefix}br{r}"  # r >= 1; the spine is br0


def uplink_names(prefix: str, r: int) -> tuple[str, str]:
    """Rack ``r``'s uplink: the end on its rack bridge, the end on the spine."""
    return f"{prefix}-u{r}", f"{prefix}-s{r}"


def create_rack(prefix: str, r: int, rate: str | None, other_racks: list[str]) -> None:
    """Rack ``r``'s bridge and uplink; with ``rate``, what enters the rack from ``other_racks``'s
    addresses is limited to ``rate`` (everything else, e.g. the controller's SSH, is not)."""
    br = rack_bridge_name(prefix, r)
    up, spine = uplink_names(prefix, r)
    sh("ip", "link", "add", br, "type", "bridge")
    sh("ip", "link", "set", br, "up")
    sh("ip", "link", "add", up, "type", "veth", "peer", "name", spine)
    sh("ip", "link", "set", up, "master", br, "up")
    sh("ip", "link", "set", spine, "master", bridge_name(prefix), "up")
    if rate is None:
        return
    rate_bits(rate)
    sh("tc", "qdisc", "add", "dev", spine, "root", "handle", "1:", "htb", "default", "10")
    sh("tc", "class", "add", "dev", spine, "parent", "1:", "classid", "1:10", "htb", "rate", "10gbit",
       "quantum", "60000")
    sh("tc", "class", "add", "dev", spine, "parent", "1:", "classid", "1:20", "htb", "rate", rate, "ceil", rate,
       "quantum", "60000")
    for addr in other_racks:
        sh("tc", "filter", "add", "dev", spine, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
           "match", "ip", "src", f"{addr}/32", "flowid", "1:20")


def shaped_bytes(prefix: str, r: int) -> int:
    """Bytes sent so far through rack ``r``'s inter-rack class (0 without shaping)."""
    out = sh("tc", "-s", "class", "show", "dev", uplink_names(prefix, r)[1], check=False).stdout
    m = re.search(r"class htb 1:20 .*?\n\s*Sent (\d+) bytes", out, re.S)
    return int(m.group(1)) if m else 0


def netns_pids(ns: str) -> list[int]:
    proc = sh("ip", "netns", "pids", ns, check=False)
    return [int(p) for p in proc.stdout.split() if p.isdigit()]


def kill_pids(pids: list[int], grace: float = 1.0) -> None:
    """TERM the given processes, then KILL whatever is left after ``grace`` seconds."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in pids if _signal(p, sig)]
        deadline = time.monotonic() + grace
        while alive and time.monotonic() < deadline:
            _reap(alive)
            alive = [p for p in alive if _exists(p)]
            if alive:
                time.sleep(0.02)
        if not alive:
            return


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


def _reap(pids: list[int]) -> None:
    for p in pids:
        try:
            os.waitpid(p, os.WNOHANG)
        except ChildProcessError:
            pass


def list_netns(prefix: str) -> list[str]:
    pat = re.compile(rf"^{re.escape(prefix)}-h\d+$")
    out = sh("ip", "netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.split() and pat.match(line.split()[0])]


def list_links(prefix: str) -> list[str]:
    pat = re.compile(rf"^({re.escape(prefix)}-[vus]\d+|{re.escape(prefix)}br\d+)$")
    out = sh("ip", "-o", "link", "show", check=False).stdout
    names = [line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line]
    return [n for n in names if pat.match(n)]


def teardown(prefix: str, subnet: str) -> dict:
    """Remove every process, namespace, link and the guard route of a lab with this prefix."""
    removed = {"processes": 0, "netns": 0, "links": 0, "route": False}
    for ns in list_netns(prefix):
        pids = netns_pids(ns)
        kill_pids(pids)
        removed["processes"] += len(pids)
        sh("ip", "netns", "del", ns, check=False)
        removed["netns"] += 1
    bridges = re.compile(rf"^{re.escape(prefix)}br\d+$")
    for link in sorted(list_links(prefix), key=lambda n: bool(bridges.match(n))):  # bridges last
        if sh("ip", "link", "del", link, check=False).returncode == 0:
            removed["links"] += 1
    guard = guard_net(subnet)
    a, b, _ = subnet.split(".")
    still_used = any(addr.startswith(f"{a}.{b}.") for _, addr in addresses())  # another lab's bridge
    if not still_used and f"unreachable {guard}" in sh("ip", "route", "show", check=False).stdout:
        sh("ip", "route", "del", "unreachable", guard, check=False)
        removed["route"] = True
    return removed


def addresses() -> list[tuple[str, str]]:
    """``[(interface, IPv4 address)]`` of the root namespace."""
    out = sh("ip", "-o", "-4", "addr", "show", check=False).stdout
    pairs = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[2] == "inet":
            pairs.append((parts[1], parts[3].split("/")[0]))
    return pairs


def subnet_users(subnet: str) -> list[str]:
    """Interfaces that already have an address in ``<subnet>.0/24``."""
    return sorted({dev for dev, addr in addresses() if addr.rsplit(".", 1)[0] == subnet})
