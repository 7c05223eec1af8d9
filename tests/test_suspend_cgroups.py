"""fawkes.ssh.cgroups on this machine's real cgroups (v1, v2 or hybrid, whichever it has), run through
``sh`` as the executor would run them over SSH: a process tree (a shell with a busy child and a
grandchild) is suspended, only its processes are moved, its CPU use stops, a bystander process is
untouched, and resume puts every process back where it was and removes the groups.  Needs root."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fawkes.errors import FawkesError
from fawkes.ssh.cgroups import Footprint, group_name, parse, resume_script, state_script, suspend_script
from fawkes.ssh.shell import Script, render

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

pytestmark = pytest.mark.usefixtures("root_and_cgroups")  # conftest: fails under CI, skips elsewhere


def sh(script) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", render(script)], capture_output=True, text=True, timeout=60)


def cpu_ticks(pid: int) -> int:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(f[11]) + int(f[12])  # utime + stime


def runs_again(pid: int, ticks: int = 5, within: float = 10.0) -> bool:
    """The process gets CPU again (at nice 19 on a loaded machine that can take a while)."""
    t0, deadline = cpu_ticks(pid), time.monotonic() + within
    while time.monotonic() < deadline:
        if cpu_ticks(pid) - t0 >= ticks:
            return True
        time.sleep(0.1)
    return False


def descendants(pid: int) -> set[int]:
    out = subprocess.run(["ps", "-e", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True).stdout
    kids: dict[int, list[int]] = {}
    for ln in out.splitlines():
        p, pp = map(int, ln.split())
        kids.setdefault(pp, []).append(p)
    seen, todo = set(), [pid]
    while todo:
        p = todo.pop()
        seen.add(p)
        todo += kids.get(p, [])
    return seen


def cgroup_of(pid: int) -> str:
    return Path(f"/proc/{pid}/cgroup").read_text()


@pytest.fixture
def tree(tmp_path):
    pidfile = tmp_path / "w.pid"
    # root shell -> busy child (a loop) and a sleeping grandchild under another shell
    root = subprocess.Popen(["sh", "-c", "while :; do :; done & sh -c 'sleep 300' & wait"],
                            start_new_session=True)
    pidfile.write_text(f"{root.pid}\n")
    bystander = subprocess.Popen(["sleep", "300"])
    for _ in range(100):
        if len(descendants(root.pid)) >= 4:
            break
        time.sleep(0.05)
    try:
        yield root, pidfile, bystander
    finally:
        name = f"fawkes-test-{os.getpid()}"
        sh(resume_script(name))
        os.killpg(root.pid, 9)
        root.wait()
        bystander.kill()
        bystander.wait()


@pytest.mark.parametrize("freeze", [True, False], ids=["freeze", "footprint"])
def test_suspend_moves_only_the_tree_stops_it_and_resume_restores_everything(tree, freeze):
    root, pidfile, bystander = tree
    name = f"fawkes-test-{os.getpid()}"
    procs = descendants(root.pid)
    before = {p: cgroup_of(p) for p in procs}
    bystander_cg = cgroup_of(bystander.pid)
    r = sh(suspend_script(Script("cat {f}", f=str(pidfile)), name, Footprint(cpu_percent=1, freeze=freeze)))
    assert r.returncode == 0, r.stderr
    s = parse("local", r.stdout)
    assert s.root == root.pid and s.tree == frozenset(procs), (s, procs)
    assert s.pids == frozenset(procs)  # exactly the tree, in every group used
    assert s.cpu or s.frozen
    if freeze:
        assert s.frozen
    else:
        assert s.cpu and s.cpu.split()[1:3] == ["1000", "100000"]
    assert cgroup_of(bystander.pid) == bystander_cg  # nothing else moved
    busy = max(procs, key=cpu_ticks)  # the loop
    t0 = cpu_ticks(busy)
    time.sleep(1.5)
    used = cpu_ticks(busy) - t0  # clock ticks (100/s): 1 % of 1.5 s is ~1.5 ticks
    assert used <= (0 if freeze else 8), used
    st = sh(state_script(name))
    assert f"members " in st.stdout and name in st.stdout
    # again: idempotent (already in the group, nothing else moves)
    again = sh(suspend_script(Script("cat {f}", f=str(pidfile)), name, Footprint(freeze=freeze)))
    assert again.returncode == 0, again.stderr
    assert parse("local", again.stdout).pids == frozenset(procs)

    r = sh(resume_script(name))
    assert r.returncode == 0, r.stderr
    assert {int(p) for p in r.stdout.split("resumed", 1)[1].split()} == procs
    assert {p: cgroup_of(p) for p in procs} == before  # every process back in its own group
    assert sh(state_script(name)).stdout.strip() == ""  # the groups are gone
    assert runs_again(busy)
    assert sh(resume_script(name)).returncode == 0  # resuming twice does nothing


def test_suspend_refuses_a_missing_process_and_a_bad_name(tmp_path):
    r = sh(suspend_script(Script("cat {f}", f=str(tmp_path / "none.pid")), "fawkes-test-none"))
    assert r.returncode == 3 and "no process to suspend" in r.stderr
    with pytest.raises(FawkesError, match="only letters"):
        group_name("a/b")
    with pytest.raises(FawkesError, match="only letters"):
        suspend_script(Script("echo 1"), "x; rm -rf /")


def test_parse_refuses_a_group_with_foreign_processes():
    out = "root 10\ntree 10 11 \nmembers /sys/fs/cgroup/freezer/g 10 11 99 \n"
    with pytest.raises(FawkesError, match="outside the suspended tree: 99"):
        parse("h1", out)


def test_v2_only_host_freezes_with_cgroup_freeze(tree, tmp_path):
    """The same scripts on a host that has only cgroup v2 without a delegated cpu controller (here: a
    private mount namespace in which the v1 cpu and freezer hierarchies are unmounted): CPU cannot be
    limited, so the tree is frozen with cgroup.freeze, and resumed."""
    if not any(ln.split()[2] == "cgroup2" for ln in Path("/proc/mounts").read_text().splitlines()):
        unavailable("no cgroup v2 mount")
    root, pidfile, bystander = tree
    name = f"fawkes-test-{os.getpid()}"
    procs = descendants(root.pid)
    (tmp_path / "s.sh").write_text(render(suspend_script(Script("cat {f}", f=str(pidfile)), name, Footprint())))
    (tmp_path / "r.sh").write_text(render(resume_script(name)))
    v1 = [ln.split()[1] for ln in Path("/proc/mounts").read_text().splitlines()
          if ln.split()[2] == "cgroup" and set(ln.split()[3].split(",")) & {"cpu", "freezer"}]
    umounts = "".join(f"umount {m} && " for m in v1)
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --make-rprivate / && {umounts}sh {tmp_path / 's.sh'}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    s = parse("local", r.stdout)
    assert s.frozen and s.frozen.startswith("v2 ") and s.pids == frozenset(procs), r.stdout
    assert "frozen instead" in " ".join(s.notes)
    busy = max(procs, key=cpu_ticks)
    t0 = cpu_ticks(busy)
    time.sleep(1.0)
    assert cpu_ticks(busy) - t0 == 0
    r = subprocess.run(["unshare", "-m", "sh", "-c", f"mount --make-rprivate / && {umounts}sh {tmp_path / 'r.sh'}"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "thawed v2" in r.stdout, r.stdout + r.stderr
    assert runs_again(busy)


def test_inside_a_network_namespace_whose_sys_hides_the_cgroups(tree):
    """``ip netns exec`` mounts a fresh /sys (no cgroup mount visible: the lab's hosts): the scripts
    mount the hierarchies in a private mount namespace of their own, and the namespace keeps none."""
    root, pidfile, bystander = tree
    ns = f"fwsusp{os.getpid()}"
    if subprocess.run(["ip", "netns", "add", ns], capture_output=True).returncode != 0:
        unavailable("cannot create a network namespace")
    try:
        def in_ns(script) -> subprocess.CompletedProcess:
            return subprocess.run(["ip", "netns", "exec", ns, "sh", "-c", render(script)], capture_output=True,
                                  text=True, timeout=60)

        hidden = subprocess.run(["ip", "netns", "exec", ns, "grep", "-c", "cgroup", "/proc/mounts"],
                                capture_output=True, text=True)
        assert hidden.stdout.strip() == "0"  # nothing visible there
        name = f"fawkes-test-{os.getpid()}"
        procs = descendants(root.pid)
        r = in_ns(suspend_script(Script("cat {f}", f=str(pidfile)), name, Footprint(freeze=True)))
        assert r.returncode == 0, r.stderr
        s = parse("local", r.stdout)
        assert s.pids == frozenset(procs) and s.frozen, r.stdout
        assert all(name in cgroup_of(p) for p in procs)
        r = in_ns(resume_script(name))
        assert r.returncode == 0 and "resumed" in r.stdout, r.stderr
        assert not any(name in cgroup_of(p) for p in procs)
        assert subprocess.run(["ip", "netns", "exec", ns, "grep", "-c", "cgroup", "/proc/mounts"],
                              capture_output=True, text=True).stdout.strip() == "0"
    finally:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
