"""The netns lab itself: name resolution, per-host roots, crash/revive, idempotent up, clean teardown."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fawkes.lab import Lab
from fawkes.lab import netns
from tests.conftest import LAB_PREFIX, REPO, run_cli

pytestmark = pytest.mark.lab


def test_hosts_resolve_each_other_and_the_controller(lab, ex):
    res = ex.run(["h1", "h2"], "hostname; getent hosts h2 h8 controller | awk '{print $1, $2}'; echo $LAB_HOST")
    lines = res["h1"].stdout.splitlines()
    assert lines[0] == "h1" and lines[-1] == "h1"
    assert f"{lab.host('h2').address} h2" in lines and f"{lab.host('h8').address} h8" in lines
    assert f"{lab.controller_address} controller" in lines
    assert res["h2"].stdout.splitlines()[0] == "h2"


def test_node_dir_is_each_hosts_own_root(lab, ex):
    ex.run(None, ["sh", "-c", f'hostname > {lab.node_dir}/whoami'])
    for h in lab.hosts:
        assert (h.root / "whoami").read_text() == f"{h.name}\n"
    assert not (lab.node_dir / "whoami").exists()  # the root namespace sees its own (empty) dir
    # the root filesystem (Java, Python) is shared
    assert ex.run(["h1"], ["java", "-version"])["h1"].ok


def test_hosts_have_their_own_bashrc(lab, ex):
    """bash started by sshd reads ~/.bashrc even for a plain command: the hosts get the lab's (empty)
    one, like a fresh node, not this machine's (which may run pyenv init on every command)."""
    res = ex.run(["h1", "h2"], "cat ~/.bashrc")
    assert {r.stdout for r in res.values()} == {(lab.dir / "bashrc").read_text()}
    machine_rc = Path.home() / ".bashrc"
    if machine_rc.exists():  # the machine's own file is untouched
        assert "fawkes lab" not in machine_rc.read_text()


def test_no_route_leaves_the_machine(lab, ex):
    r = ex.run(["h1"], ["ip", "route"])["h1"].stdout
    assert "default" not in r
    out = subprocess.run(["ip", "route", "get", f"{lab.subnet.rsplit('.', 1)[0]}.99.9"], capture_output=True,
                         text=True)
    assert out.returncode != 0 or "unreachable" in out.stdout  # the guard route


def test_crash_kills_every_process_of_the_host_at_once(lab, ex):
    from fawkes.ssh.shell import background
    assert ex.run(["h7"], background(["sleep", "300"], f"{lab.node_dir}/s.pid"))["h7"].ok
    h7 = lab.host("h7")
    assert len(netns.netns_pids(h7.netns)) >= 3  # unshare, sshd, sleep
    try:
        lab.crash("h7")
        assert netns.netns_pids(h7.netns) == []
        st = {h["name"]: h for h in lab.status()["hosts"]}
        assert not st["h7"]["alive"] and st["h6"]["alive"]
        r = run_cli("lab", "status", "--dir", str(lab.dir))
        assert "7/8 alive" in r.stdout and "DOWN" in r.stdout
    finally:
        lab.revive("h7")
    with lab.executor(["h7"]) as ex2:  # same host key: strict checking still passes
        assert ex2.run(None, "hostname")["h7"].stdout == "h7\n"


def test_up_is_idempotent(lab):
    pids = [h.pid for h in lab.hosts]
    again = Lab.up(len(lab.hosts), lab.dir, prefix=lab.prefix, subnet=lab.subnet)
    assert [h.pid for h in again.hosts] == pids
    assert Lab.load(lab.dir).known_hosts.read_text() == lab.known_hosts.read_text()


def _leftovers(prefix: str, subnet: str) -> list[str]:
    found = netns.list_netns(prefix) + netns.list_links(prefix)
    a, b, _ = subnet.split(".")
    if f"unreachable {a}.{b}.0.0/16" in subprocess.run(["ip", "route"], capture_output=True, text=True).stdout:
        found.append("guard route")
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    found += [ln for ln in ps.splitlines() if f"/{prefix}dir/" in ln]
    return found


def test_cli_up_down_and_stale_cleanup(tmp_path):
    prefix = f"{LAB_PREFIX}c"  # two test runs at once use two prefixes
    subnet = next(s for s in (f"10.{n}.0" for n in range(230, 250)) if Lab.subnet_free(s))
    d = tmp_path / f"{prefix}dir"
    args = ["--dir", str(d)]
    r = run_cli("lab", "up", "--hosts", "2", "--prefix", prefix, "--subnet", subnet, *args)
    assert r.returncode == 0, r.stderr
    assert "lab up: 2 hosts" in r.stdout and (d / "inventory.yaml").is_file()
    assert run_cli("inventory", "check", str(d / "inventory.yaml")).returncode == 0
    assert len(_leftovers(prefix, subnet)) >= 4  # 2 netns, 2 veth + bridge, route, 2 sshd
    # lose the state file: the next `up` must clean the stale lab before starting a new one
    (d / "lab.json").unlink()
    r = run_cli("lab", "up", "--hosts", "1", "--prefix", prefix, "--subnet", subnet, *args)
    assert r.returncode == 0, r.stderr
    assert netns.list_netns(prefix) == [f"{prefix}-h1"]
    r = run_cli("lab", "crash", "h1", *args)
    assert r.returncode == 0 and netns.netns_pids(f"{prefix}-h1") == []
    r = run_cli("lab", "down", *args)
    assert r.returncode == 0 and "removed" in r.stdout
    assert _leftovers(prefix, subnet) == []
    r = run_cli("lab", "status", *args)
    assert r.returncode == 2 and "no lab in" in r.stderr
    # an unreadable state file: `down` cleans up by --prefix/--subnet and removes it
    assert run_cli("lab", "up", "--hosts", "1", "--prefix", prefix, "--subnet", subnet, *args).returncode == 0
    (d / "lab.json").write_text("{")
    r = run_cli("lab", "status", *args)
    assert r.returncode == 2 and "unreadable lab state" in r.stderr
    r = run_cli("lab", "down", "--prefix", prefix, "--subnet", subnet, *args)
    assert r.returncode == 0 and "removed 2 processes, 1 namespaces" in r.stdout, r.stderr
    assert _leftovers(prefix, subnet) == [] and not (d / "lab.json").exists()


BURN = ("import time\nt0 = time.monotonic(); c0 = time.process_time()\n"
        "while time.monotonic() - t0 < 2.0: pass\nprint(time.process_time() - c0)")


def test_cpu_quota_makes_a_host_a_fixed_slice_of_the_machine(tmp_path):
    """--cpus 0.25: a busy loop on the host gets a quarter of a core (cgroup CFS quota), and the
    group goes with the lab."""
    from fawkes.lab import cgroup
    prefix = f"{LAB_PREFIX}q"
    subnet = next(s for s in (f"10.{n}.0" for n in range(230, 250)) if Lab.subnet_free(s))
    r = run_cli("lab", "up", "--hosts", "1", "--prefix", prefix, "--subnet", subnet, "--dir", str(tmp_path),
                "--cpus", "0.25")
    assert r.returncode == 0 and "0.25 CPU each" in r.stdout, r.stderr
    try:
        lab = Lab.load(tmp_path)
        assert lab.cpus == 0.25 and lab.status()["hosts"][0]["cpus"] == 0.25
        with lab.executor() as ex:
            out = ex.run(None, ["python3", "-c", BURN], timeout=30)
        used = float(out["h1"].stdout)
        assert 0.3 <= used <= 0.6, used  # 2 s of wall time at 0.25 CPU = 0.5 CPU seconds
    finally:
        assert run_cli("lab", "down", "--dir", str(tmp_path)).returncode == 0
    assert not cgroup.group_dir(prefix, "h1").exists() and not cgroup.group_dir(prefix, "h1").parent.exists()


def test_refuses_clearly_without_root(tmp_path):
    # the real CLI with the effective uid of nobody (root's pyenv is not readable by nobody itself)
    code = ("import os, sys; import fawkes.cli.lab, fawkes.lab; from fawkes.cli import main; "
            "os.setegid(65534); os.seteuid(65534); sys.exit(main(['lab', 'up', '--dir', sys.argv[1]]))")
    r = subprocess.run([sys.executable, "-c", code, str(tmp_path / "x")], capture_output=True, text=True,
                       cwd=REPO, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "needs root" in r.stderr and "Traceback" not in r.stderr


def test_bad_arguments_are_refused():
    for args in (["--hosts", "0"], ["--prefix", "Bad-Prefix"], ["--subnet", "10.300.0"], ["--dir", "/tmp/a b"],
                 ["--cpus", "0"], ["--cpus", "1000"]):
        r = run_cli("lab", "up", *args)
        assert r.returncode == 2 and r.stderr.startswith("fawkes: error: lab:"), (args, r.stderr)
