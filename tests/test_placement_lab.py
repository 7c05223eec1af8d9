"""Racks in the lab (issue 12, P-1): `fawkes lab up --racks N --rack-bandwidth RATE` puts each rack's
hosts on a bridge of their own, linked to the lab's bridge, and limits traffic between racks to RATE
(tc htb: this kernel has no sch_netem, so no added latency; docs/lab.md, "Racks").  The inventory
carries the rack labels, and the coordinator's store takes them from it."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from fawkes.lab import Lab, netns
from tests.conftest import LAB_PREFIX, REPO, own_lab

pytestmark = pytest.mark.lab

MB = 1 << 20
RECEIVER = ("import socket, sys, time\n"
            "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            "s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(1); print('ready', flush=True)\n"
            "c, _ = s.accept(); n = 0; t0 = None\n"
            "while True:\n"
            "    b = c.recv(1 << 16)\n"
            "    if t0 is None: t0 = time.monotonic()\n"
            "    if not b: break\n"
            "    n += len(b)\n"
            "print(n, time.monotonic() - t0, flush=True)\n")
SENDER = ("import socket, sys\n"
          "c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)\n"
          "c.sendall(b'x' * int(sys.argv[3])); c.close()\n")


def transfer(src_ns: str | None, dst_ns: str, dst_addr: str, nbytes: int, port: int = 5099) -> float:
    """Seconds ``nbytes`` take from ``src_ns`` (None: the root namespace, the controller) to
    ``dst_ns``, timed by the receiver from its first byte to the end."""
    rx = subprocess.Popen(["ip", "netns", "exec", dst_ns, sys.executable, "-c", RECEIVER, str(port)],
                          stdout=subprocess.PIPE, text=True)
    try:
        assert rx.stdout.readline().strip() == "ready"
        tx = ([] if src_ns is None else ["ip", "netns", "exec", src_ns]) + [sys.executable, "-c", SENDER, dst_addr,
                                                                           str(port), str(nbytes)]
        subprocess.run(tx, check=True, timeout=60)
        n, secs = rx.communicate(timeout=60)[0].split()
        assert int(n) == nbytes
        return float(secs)
    finally:
        if rx.poll() is None:
            rx.kill()
            rx.wait()


@pytest.fixture(scope="module")
def racks_lab(tmp_path_factory):
    prefix = f"{LAB_PREFIX}r"
    lab = own_lab(tmp_path_factory, "r", 4, 230, "lab with racks", racks=2, rack_bandwidth="40mbit")
    try:
        yield lab
    finally:
        lab.down()
        assert netns.list_links(prefix) == [] and netns.list_netns(prefix) == []


def test_racks_are_bridges_with_shaped_links_between_them(racks_lab, tmp_path):
    lab = racks_lab
    # the inventory: h1 h2 on r1, h3 h4 on r2; each host's veth on its rack's bridge
    inv = lab.inventory_path.read_text()
    for name, rack in (("h1", "r1"), ("h2", "r1"), ("h3", "r2"), ("h4", "r2")):
        assert f"name: {name}, address: {lab.host(name).address}, rack: {rack}}}" in inv
        link = subprocess.run(["ip", "-o", "link", "show", lab.host(name).veth], capture_output=True, text=True).stdout
        assert f"master {netns.rack_bridge_name(lab.prefix, int(rack[1]))}" in link
    st = Lab.load(lab.dir)
    assert (st.racks, st.rack_bandwidth) == (2, "40mbit")
    # 4 MiB: same rack unshaped, across racks at 40 Mbit/s (>= 0.8 s), the controller's traffic unshaped
    h = {n: lab.host(n) for n in ("h1", "h2", "h3")}
    same = transfer(h["h1"].netns, h["h2"].netns, h["h2"].address, 4 * MB)
    before = netns.shaped_bytes(lab.prefix, 2)
    t0 = time.monotonic()
    cross = transfer(h["h1"].netns, h["h3"].netns, h["h3"].address, 4 * MB)
    assert netns.shaped_bytes(lab.prefix, 2) - before >= 4 * MB  # it went through rack 2's shaped class
    ctl = transfer(None, h["h3"].netns, h["h3"].address, 4 * MB)
    rate = 4 * MB * 8 / cross / 1e6
    print(f"4 MiB: same rack {same:.3f} s, across racks {cross:.3f} s ({rate:.1f} Mbit/s), controller {ctl:.3f} s")
    assert 30 <= rate <= 42 and same < cross / 4 and ctl < cross / 4
    assert time.monotonic() - t0 < 10
    # the store takes the labels from the lab's inventory (schema v7)
    from fawkes.coordinator.service import Coordinator
    from fawkes.inventory import load_inventory
    from fawkes.store import Store
    with Store(f"sqlite:///{tmp_path / 'state.db'}") as s:
        Coordinator._sync_inventory(type("C", (), {"store": s})(), load_inventory(lab.inventory_path))
        assert s.host_racks() == {"h1": "r1", "h2": "r1", "h3": "r2", "h4": "r2"}


def test_bad_rack_options_are_refused_before_anything_is_created(tmp_path):
    d = tmp_path / "lab"
    for args, option in ((["--racks", "0"], "--racks"), (["--racks", "5"], "--racks"), (["--racks", "x"], "--racks"),
                         (["--rack-bandwidth", "fast"], "--rack-bandwidth"),
                         (["--rack-bandwidth", "0mbit"], "--rack-bandwidth"),
                         (["--rack-bandwidth", "1e9gbit"], "--rack-bandwidth"),
                         (["--rack-bandwidth", "10mbit; reboot"], "--rack-bandwidth")):
        r = subprocess.run([sys.executable, "-m", "fawkes", "lab", "up", "--hosts", "4", "--prefix", f"{LAB_PREFIX}q",
                            "--dir", str(d), *args], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and option in r.stderr, (args, r.stderr)
    assert not d.exists() and netns.list_links(f"{LAB_PREFIX}q") == []
