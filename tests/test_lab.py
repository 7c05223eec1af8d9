"""The netns lab itself: name resolution, per-host roots, crash/revive, idempotent up, clean teardown."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fawkes.lab import Lab
from fawkes.lab import netns
from tests.conftest import LAB_PREFIX, REPO, run_cli, unavailable

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


def _free_subnet() -> str:
    return next(s for s in (f"10.{n}.0" for n in range(230, 250)) if Lab.subnet_free(s))


def _need_cgroups(*controllers: str) -> None:
    """Root, the lab's tools and the cgroup controllers: fail under CI, skip elsewhere."""
    from fawkes.errors import FawkesError
    from fawkes.lab import cgroup
    try:
        netns.require_support()
        cgroup.require(list(controllers))
    except FawkesError as exc:
        unavailable(str(exc))


def _groups_of(prefix: str, host: str) -> list[Path]:
    from fawkes.lab import cgroup
    return [d for d in (cgroup.group_dir(prefix, host, c) for c in (cgroup.CPU, cgroup.MEMORY)) if d is not None]


def test_cpu_quota_makes_a_host_a_fixed_slice_of_the_machine(tmp_path):
    """--cpus 0.25: a busy loop on the host gets a quarter of a core (cgroup CFS quota), and the
    group goes with the lab."""
    _need_cgroups("cpu")
    prefix = f"{LAB_PREFIX}q"
    r = run_cli("lab", "up", "--hosts", "1", "--prefix", prefix, "--subnet", _free_subnet(), "--dir", str(tmp_path),
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
    assert all(not d.exists() and not d.parent.exists() for d in _groups_of(prefix, "h1"))


def _alloc(mib: int) -> list[str]:
    """A command that really touches ``mib`` MiB (bytes filled with 1s) and prints ok."""
    return ["python3", "-c", f"x = b'\\x01' * ({mib} << 20); print('ok', len(x) >> 20)"]


def test_memory_limit_makes_a_host_a_fixed_slice_of_the_machine(tmp_path):
    """--memory 256M: on the host 64 MiB can be allocated, 512 MiB cannot (OOM-killed in the
    host's memory cgroup, on a machine with GiBs free); lab.json, status and the inventory state
    the limit; a revived host is limited again; `down` removes the groups."""
    from fawkes.inventory import load_inventory
    from fawkes.lab import cgroup
    _need_cgroups("cpu", "memory")
    prefix = f"{LAB_PREFIX}m"
    r = run_cli("lab", "up", "--hosts", "2", "--prefix", prefix, "--subnet", _free_subnet(), "--dir", str(tmp_path),
                "--cpus", "0.5", "--memory", "256M")
    assert r.returncode == 0 and "0.5 CPU, 256 MiB memory each" in r.stdout, r.stderr
    try:
        lab = Lab.load(tmp_path)
        assert json.loads((tmp_path / "lab.json").read_text())["memory_mb"] == 256 and lab.memory_mb == 256
        st = json.loads(run_cli("lab", "status", "--dir", str(tmp_path), "--json").stdout)
        assert st["memory_mb"] == 256 and [h["memory_mb"] for h in st["hosts"]] == [256, 256]  # read from the cgroups
        assert [h["cpus"] for h in st["hosts"]] == [0.5, 0.5]
        text = run_cli("lab", "status", "--dir", str(tmp_path)).stdout
        assert "0.5 CPU, 256 MiB memory per host" in text and text.count("(0.5 CPU, 256 MiB memory)") == 2
        host = load_inventory(lab.inventory_path).host("h1")
        assert (host.cores, host.memory_mb) == (1, 256)
        mem_dir = cgroup.group_dir(prefix, "h1", cgroup.MEMORY)
        for i in range(2):  # as started, then after a crash and revive
            if i:
                lab.crash("h1")
                lab.revive("h1")
            with lab.executor(["h1"], command_timeout=60) as ex:
                small = ex.run(None, _alloc(64))["h1"]
                big = ex.run(None, _alloc(512))["h1"]
                where = ex.run(None, ["cat", "/proc/self/cgroup"])["h1"].stdout
            assert small.ok and small.stdout.split() == ["ok", "64"], small
            assert not big.ok and "ok" not in big.stdout, big  # SIGKILLed by the OOM killer (or MemoryError)
            assert f"/fawkes-lab-{prefix}/h1" in where
            assert cgroup.memory_limit_mb(prefix, "h1") == 256 and mem_dir.is_dir()
    finally:
        groups = {g for h in ("h1", "h2") for g in _groups_of(prefix, h) if g.is_dir()}
        r = run_cli("lab", "down", "--dir", str(tmp_path))
    assert r.returncode == 0 and f"{len(groups)} cgroups" in r.stdout, r.stdout + r.stderr
    assert len(groups) >= 2 and not any(g.exists() or g.parent.exists() for g in groups)


def test_auto_divides_the_machine_between_the_hosts(tmp_path):
    from fawkes.lab import capacity
    _need_cgroups("cpu", "memory")
    have = capacity.machine()
    r = run_cli("lab", "up", "--hosts", "2", "--prefix", f"{LAB_PREFIX}a", "--subnet", _free_subnet(),
                "--dir", str(tmp_path), "--cpus", "auto", "--memory", "auto")
    try:
        assert r.returncode == 0, r.stderr
        lab = Lab.load(tmp_path)
        assert lab.cpus == math.floor(have.cpus * 100 / 2) / 100 and lab.memory_mb == have.memory_mb // 2
        assert Lab.up(2, tmp_path, prefix=lab.prefix, subnet=lab.subnet, cpus="auto", memory="auto") \
            .hosts == lab.hosts  # idempotent: auto resolves to the same shape
    finally:
        assert run_cli("lab", "down", "--dir", str(tmp_path)).returncode == 0


@pytest.mark.spark
def test_spark_worker_offers_its_hosts_quota(tmp_path):
    """The lab's inventory states each host's quota (cores = CPUs rounded up, memory = the limit),
    and a Spark worker deployed from that inventory offers exactly that to the master."""
    from fawkes.frameworks import dists
    from fawkes.frameworks.registry import node_spec
    from fawkes.frameworks.sizing import LAB_SIZES
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
    from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths
    from fawkes.inventory import load_inventory
    from fawkes.mechanism.model import Role
    _need_cgroups("cpu", "memory")
    d = dists.ensure_lab_dists()
    fw = FrameworkPaths("lab", "spark-hdfs", str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    lab = Lab.up(1, tmp_path, prefix=f"{LAB_PREFIX}w", subnet=_free_subnet(), cpus=1.5, memory="1536M")
    try:
        node = node_spec(load_inventory(lab.inventory_path).host("h1"), Role.CORE)
        assert (node.cores, node.memory_mb) == (2, 1536)
        cluster = ClusterSpec("quota", fw, (node,), options=LAB_SIZES)
        with lab.executor(command_timeout=120) as ex:
            drv = SparkHdfsDriver(ex)
            try:
                drv.deploy(cluster, timeout=240)
                w = drv.master_state(cluster).workers_by_host("ALIVE")[node.address]
                assert (w.cores, w.memory_mb) == (2, 1536)
            finally:
                drv.teardown(cluster)
    finally:
        lab.down()


def test_quotas_must_fit_the_cgroup_this_process_runs_in(tmp_path):
    """Run `lab up` inside a cgroup limited to 1 CPU and 1 GiB: quotas are checked against that,
    not against the machine."""
    from fawkes.lab import cgroup
    _need_cgroups("cpu", "memory")
    prefix = f"{LAB_PREFIX}l"
    procs = cgroup.create(prefix, "limiter", cpus=1.0, memory_mb=1024)
    try:
        for args, want in ((["--cpus", "0.75"], "more than the CPU quota of cgroup"),
                           (["--memory", "768M"], "more than the memory limit of cgroup")):
            cmd = cgroup.enter(procs) + [sys.executable, "-m", "fawkes", "lab", "up", "--hosts", "2",
                                         "--prefix", f"{prefix}x", "--dir", str(tmp_path / "lab"), *args]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=60)
            assert r.returncode == 2 and want in r.stderr and f"fawkes-lab-{prefix}/limiter" in r.stderr, r.stderr
            assert len(r.stderr.splitlines()) == 1 and not (tmp_path / "lab").exists()
    finally:
        cgroup.remove(prefix)
    assert all(not d.parent.exists() for d in _groups_of(prefix, "limiter"))


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


BAD = ["nan", "NaN", "inf", "-inf", "-1", "0", "0.0", "1e3", "10" + "0" * 30, "", " 1", "abc", "1,5", "0x10",
       "1\n", "1\x01", "1\r\n2", "auto\n", "1" * 5000]  # (no NUL: argv cannot carry one; see below)


def test_bad_quotas_are_refused_before_anything_is_created(tmp_path):
    """Garbage, NaN, infinity, negative, zero, absurd or control-character values of --cpus and
    --memory, and quotas that do not fit the machine: one line naming the option, exit 2, and no lab
    directory, namespace or cgroup."""
    from fawkes.errors import FawkesError
    from fawkes.lab import capacity
    have = capacity.machine()
    prefix = f"{LAB_PREFIX}b"
    too_many_cpus = f"{float(have.cpus) / 2 + 0.01:.2f}"  # x 2 hosts: just over the machine
    too_much_memory = f"{have.memory_mb // 2 + 1}M"
    cases = [(["--cpus", v], "--cpus") for v in BAD + ["0.001", "3e-3"]] + \
        [(["--memory", v], "--memory") for v in BAD + ["32M", "0.01G", "1P", "2 G", "2GG", "-", "M"]] + \
        [(["--cpus", too_many_cpus], "--cpus"), (["--memory", too_much_memory], "--memory"),
         (["--cpus", "auto", "--memory", too_much_memory], "--memory")]
    d = tmp_path / "lab"
    for args, option in cases:
        r = subprocess.run([sys.executable, "-m", "fawkes", "lab", "up", "--hosts", "2", "--prefix", prefix,
                            "--dir", str(d), *args], capture_output=True, text=True, cwd=REPO, timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.startswith(f"fawkes: error: lab: {option}") and len(r.stderr.splitlines()) == 1, \
            (args, r.stderr)
        assert "Traceback" not in r.stderr and len(r.stderr) < 400, (args, r.stderr)
    for kw in ({"cpus": "0.5\x00"}, {"memory": "1G\x00"}, {"cpus": float("inf")}, {"memory": float("nan")}):
        with pytest.raises(FawkesError, match="^lab: --(cpus|memory) must be") as exc:
            Lab.up(2, d, prefix=prefix, **kw)
        assert "\n" not in str(exc.value)
    assert not d.exists() and netns.list_netns(prefix) == [] and netns.list_links(prefix) == []
    assert not any(g.parent.exists() for g in _groups_of(prefix, "h1"))
    r = run_cli("lab", "up", "--hosts", "2", "--cpus", too_many_cpus, "--dir", str(d))
    assert "x 2 hosts" in r.stderr and "--cpus auto" in r.stderr, r.stderr  # says how to size it


def test_quota_arithmetic():
    """Sizing against a fixed machine (2 cores, 24 GiB): sums, auto, units and limits."""
    from fractions import Fraction

    from fawkes.errors import FawkesError
    from fawkes.lab import capacity
    m = capacity.Machine(Fraction(2), "this machine's cores", 24 * 1024, "this machine's MemTotal")
    assert capacity.size(8, "0.25", "2G", m) == (0.25, 2048)
    assert capacity.size(8, "auto", "auto", m) == (0.25, 3072)
    assert capacity.size(3, "auto", None, m) == (0.66, None)  # rounded down: 3 x 0.66 <= 2
    assert capacity.size(20, "0.1", "1.2g", m) == (0.1, 1228)  # 20 x 0.1 is exactly 2, no float error
    assert capacity.size(1, None, "512MiB", m) == (None, 512) and capacity.size(1, None, 1000, m) == (None, 1000)
    assert capacity.size(2, None, "1024", m) == (None, 1024)  # a bare number is MiB
    assert capacity.size(4, None, None, m) == (None, None)
    for hosts, cpus, memory, msg in [(8, "0.3", None, "--cpus 0.3 x 8 hosts = 2.4 CPUs"),
                                     (13, None, "2G", "--memory 2 GiB x 13 hosts = 26 GiB"),
                                     (1, "2.5", None, "--cpus must be between 0.01 and 2"),
                                     (1, float("nan"), None, "--cpus must be"),
                                     (1, True, None, "--cpus must be"),
                                     (1, None, -5, "--memory must be between 64 MiB"),
                                     (1, None, 10 ** 30, "--memory must be between 64 MiB")]:
        with pytest.raises(FawkesError, match=re.escape(msg)):
            capacity.size(hosts, cpus, memory, m)
