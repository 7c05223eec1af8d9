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

TOOLS = ("ip", "unshare", "/usr/sbin/sshd", "ssh-keygen")


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


def create_host_net(prefix: str, i: int, address: str) -> None:
    ns, veth = netns_name(prefix, i), veth_name(prefix, i)
    sh("ip", "netns", "add", ns)
    sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    sh("ip", "link", "set", veth, "master", bridge_name(prefix), "up")
    sh("ip", "-n", ns, "addr", "add", f"{address}/24", "dev", "eth0")
    sh("ip", "-n", ns, "link", "set", "eth0", "up")
    sh("ip", "-n", ns, "link", "set", "lo", "up")


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
    pat = re.compile(rf"^({re.escape(prefix)}-v\d+|{re.escape(bridge_name(prefix))})$")
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
    for link in sorted(list_links(prefix), key=lambda n: n == bridge_name(prefix)):  # bridge last
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
