"""Real SLURM on the lab: munged, slurmctld and one slurmd per lab host (Debian's slurm-wlm).

Everything lives under ``<lab dir>/slurm/`` (never ``/etc/slurm``): clients find the cluster
through ``SLURM_CONF=<lab dir>/slurm/slurm.conf`` (:func:`env`).

* **munged** in the root namespace, its own key and socket (a Unix socket: no TCP port); every
  daemon and client reaches it through the file system, across network namespaces.
* **slurmctld** in the root namespace, bound to the lab bridge address only: it runs in its own
  UTS and mount namespace whose hostname is ``controller`` and whose ``/etc/hosts`` is the lab's
  (``controller`` = the bridge address), with ``CommunicationParameters=NoCtldInAddrAny``.
* **slurmd** per host ``h<i>``, started inside that host (its network, UTS, mount and PID
  namespaces via ``nsenter``, and its cgroups when the lab has quotas) with ``-N h<i>``: it listens
  in the host's namespace (the host's lab address and its own loopback) and its jobs run there.
  A lab ``crash`` kills it with the rest of the host.

NodeName = the lab host names, NodeAddr = their addresses, CPUs / RealMemory = each host's quota
as in the lab's inventory; one partition ``lab`` holds them all.  ``cgroup.conf`` names cgroup/v1
without using it: inside ``ip netns exec`` ``/sys`` is a fresh sysfs without cgroup mounts, and
slurmd 22.05 cannot start with ``autodetect`` there (proctrack/linuxproc and task/none need no
cgroups).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.lab import cgroup, netns, sshd

SLURMCTLD, SLURMD, MUNGED = "/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged"
CTLD_PORT, SLURMD_PORT = 6817, 6818
PARTITION = "lab"
_APT = "apt-get install slurmctld slurmd munge slurm-client"


def slurm_dir(lab_dir: Path) -> Path:
    return Path(lab_dir) / "slurm"


def conf_path(lab_dir: Path) -> Path:
    return slurm_dir(lab_dir) / "slurm.conf"


def env(lab_dir: Path) -> dict[str, str]:
    """The environment for SLURM clients (sinfo, sbatch, salloc, ...) of this lab."""
    return {**os.environ, "SLURM_CONF": str(conf_path(lab_dir))}


def require() -> None:
    missing = [p for p in (SLURMCTLD, SLURMD, MUNGED, "nsenter", "sinfo") if shutil.which(p) is None]
    if missing:
        raise FawkesError(f"lab slurm needs {', '.join(missing)} ({_APT})")


def host_resources(cpus: float | None, memory_mb: int | None) -> tuple[int, int]:
    """``(CPUs, RealMemory MiB)`` of a lab host: what its inventory declares (docs/lab.md)."""
    import math
    return (max(1, math.ceil(round(cpus, 6))) if cpus else 1), (memory_mb or 1024)


def slurm_conf(lab, d: Path) -> str:
    """slurm.conf for ``lab`` (a :class:`fawkes.lab.Lab`) with its files under ``d``."""
    cpus, mem = host_resources(lab.cpus, lab.memory_mb)
    lines = [
        "# written by `fawkes lab slurm up` (fawkes/lab/slurm.py); clients: SLURM_CONF=this file",
        f"ClusterName={lab.prefix}",
        f"SlurmctldHost=controller({lab.controller_address})",
        f"SlurmctldPort={CTLD_PORT}", f"SlurmdPort={SLURMD_PORT}",
        "CommunicationParameters=NoCtldInAddrAny",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={d / 'munge' / 'munge.socket'}",
        "SlurmUser=root", "SlurmdUser=root",
        f"StateSaveLocation={d / 'ctld'}",
        f"SlurmctldPidFile={d / 'slurmctld.pid'}", f"SlurmctldLogFile={d / 'slurmctld.log'}",
        f"SlurmdSpoolDir={d / 'nodes' / '%n'}", f"SlurmdPidFile={d / 'nodes' / '%n' / 'slurmd.pid'}",
        f"SlurmdLogFile={d / 'nodes' / '%n' / 'slurmd.log'}",
        "SlurmdParameters=config_overrides",
        f"PlugStackConfig={d / 'plugstack.conf'}",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "SwitchType=switch/none", "MpiDefault=none",
        "SchedulerType=sched/backfill", "SelectType=select/cons_tres", "SelectTypeParameters=CR_Core_Memory",
        "ReturnToService=2", "JobCompType=jobcomp/none", "AccountingStorageType=accounting_storage/none",
        "JobAcctGatherType=jobacct_gather/none",
        "SlurmctldTimeout=30", "SlurmdTimeout=30", "InactiveLimit=0", "MinJobAge=30", "KillWait=5",
    ]
    lines += [f"NodeName={h.name} NodeAddr={h.address} CPUs={cpus} RealMemory={mem} State=UNKNOWN"
              for h in lab.hosts]
    lines.append(f"PartitionName={PARTITION} Nodes={','.join(h.name for h in lab.hosts)} Default=YES "
                 "MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- processes
def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _ours(pid: int, exe: str, marker: str) -> bool:
    """``pid`` is a live ``exe`` whose command line mentions ``marker`` (a path of this lab)."""
    cmd = _cmdline(pid)
    return bool(cmd) and os.path.basename(cmd[0]) == os.path.basename(exe) and any(marker in a for a in cmd)


def _pidfile(path: Path) -> int | None:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def munged_pid(d: Path) -> int | None:
    pid = _pidfile(d / "munge" / "munged.pid")
    return pid if pid and _ours(pid, MUNGED, str(d / "munge")) else None


def slurmctld_pid(d: Path) -> int | None:
    pid = _pidfile(d / "slurmctld.pid")
    return pid if pid and _ours(pid, SLURMCTLD, str(d / "slurm.conf")) else None


def slurmd_pids(d: Path, ns: str) -> list[int]:
    """slurmd (and job step) processes of this lab's slurm in network namespace ``ns``."""
    conf = str(d / "slurm.conf")
    out = []
    for pid in netns.netns_pids(ns):
        cmd = _cmdline(pid)
        if cmd and os.path.basename(cmd[0]) == "slurmd" and conf in cmd:
            out.append(pid)
        elif cmd and os.path.basename(cmd[0]) == "slurmstepd":
            out.append(pid)
    return out


def _run(argv: list[str], what: str, **kw) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, stdin=subprocess.DEVNULL, **kw)
    if proc.returncode != 0:
        msg = (proc.stderr or proc.stdout).strip().splitlines()
        raise FawkesError(f"lab slurm: {what} failed: {msg[-1] if msg else f'exit {proc.returncode}'}")


def _wait(cond, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise FawkesError(f"lab slurm: {what} within {timeout:g}s (see {log})")
        time.sleep(0.05)


def _port_open(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=0.2):
            return True
    except OSError:
        return False


# ---------------------------------------------------------------------------------- up / down
def up(lab, *, timeout: float = 60.0) -> dict:
    """Start (or complete) this lab's SLURM: munged, slurmctld, a slurmd on every live host; wait
    until every live host's node is idle.  Returns :func:`status`."""
    netns.require_support()
    require()
    d = slurm_dir(lab.dir)
    if len(str(d / "munge" / "munge.socket").encode()) > 100:  # AF_UNIX paths: 108 bytes at most
        raise FawkesError(f"lab slurm: the lab directory {lab.dir} is too long for munged's socket path "
                          "(at most 75 characters)")
    for sub in ("munge", "ctld", "nodes"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    os.chmod(d / "munge", 0o755)  # munged wants its socket directory searchable by all
    key = d / "munge" / "munge.key"
    if not key.is_file():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(1024))
    conf = slurm_conf(lab, d)
    ctld = slurmctld_pid(d)
    if ctld and (d / "slurm.conf").read_text() != conf:  # another shape: start over
        down(lab)
        ctld = None
    (d / "slurm.conf").write_text(conf)
    (d / "cgroup.conf").write_text("# see fawkes/lab/slurm.py: no cgroup plugin is used\n"
                                   "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n")
    (d / "plugstack.conf").write_text("")
    if munged_pid(d) is None:
        (d / "munge" / "munged.pid").unlink(missing_ok=True)
        # --force: munged wants every directory above its socket searchable by all (a pytest
        # temporary directory is 0700); the lab's users are root only, so the warning is harmless
        _run([MUNGED, "--force", f"--key-file={key}", f"--socket={d / 'munge' / 'munge.socket'}",
              f"--pid-file={d / 'munge' / 'munged.pid'}", f"--log-file={d / 'munge' / 'munged.log'}",
              f"--seed-file={d / 'munge' / 'munged.seed'}"], "munged")
        _wait(lambda: munged_pid(d) is not None, 10, "munged did not start", d / "munge" / "munged.log")
    if ctld is None:
        for f in (d / "ctld").iterdir():  # a fresh controller: no jobs of an earlier lab
            f.unlink() if f.is_file() else shutil.rmtree(f)
        (d / "slurmctld.pid").unlink(missing_ok=True)
        # own UTS + mount namespace: hostname "controller" resolves (lab etc_hosts) to the bridge address
        script = 'hostname controller && mount --bind "$1" /etc/hosts && exec "$2" -f "$3"'
        _run(["unshare", "--uts", "--mount", "--propagation", "private", "sh", "-c", script, "sh",
              str(lab.dir / "etc_hosts"), SLURMCTLD, str(d / "slurm.conf")], "slurmctld", env=env(lab.dir))
        _wait(lambda: _port_open(lab.controller_address, CTLD_PORT), 20,
              f"slurmctld did not listen on {lab.controller_address}:{CTLD_PORT}", d / "slurmctld.log")
    live = [h for h in lab.hosts if sshd.alive(h.pid)]
    for h in live:
        if not any(_ours(p, SLURMD, str(d / "slurm.conf")) for p in slurmd_pids(d, h.netns)):
            _start_slurmd(lab, d, h)
    names = {h.name for h in live}
    _wait(lambda: names <= {n for n, s in node_states(lab.dir).items() if s.startswith(("idle", "alloc", "mix"))},
          timeout, f"nodes {', '.join(sorted(names))} did not become idle", d / "nodes")
    return status(lab)


def _start_slurmd(lab, d: Path, h) -> None:
    children = Path(f"/proc/{h.pid}/task/{h.pid}/children").read_text().split()
    if not children:
        raise FawkesError(f"lab slurm: host {h.name} has no init process (crashed? `fawkes lab revive {h.name}`)")
    (d / "nodes" / h.name).mkdir(parents=True, exist_ok=True)
    procs = []
    if lab.cpus:
        procs.append(cgroup.group_dir(lab.prefix, h.name, cgroup.CPU) / "cgroup.procs")
    if lab.memory_mb and cgroup.group_dir(lab.prefix, h.name, cgroup.MEMORY) / "cgroup.procs" not in procs:
        procs.append(cgroup.group_dir(lab.prefix, h.name, cgroup.MEMORY) / "cgroup.procs")
    enter = cgroup.enter(procs) if procs else []
    _run(enter + ["nsenter", "-t", children[0], "-n", "-u", "-m", "-p", SLURMD, "-f", str(d / "slurm.conf"),
                  "-N", h.name], f"slurmd on {h.name}", env=env(lab.dir))


def node_states(lab_dir: Path) -> dict[str, str]:
    """``{node: state}`` as slurmctld reports them (empty when it does not answer)."""
    try:
        proc = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                              env=env(lab_dir), timeout=10, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return {}
    if proc.returncode != 0:
        return {}
    return dict(line.split(None, 1) for line in proc.stdout.splitlines() if len(line.split()) == 2)


def status(lab) -> dict:
    d = slurm_dir(lab.dir)
    ctld = slurmctld_pid(d)
    states = node_states(lab.dir) if ctld else {}
    return {"conf": str(d / "slurm.conf"), "munged": munged_pid(d), "slurmctld": ctld,
            "controller": f"{lab.controller_address}:{CTLD_PORT}", "partition": PARTITION,
            "nodes": [{"name": h.name, "address": h.address, "state": states.get(h.name),
                       "slurmd": bool(slurmd_pids(d, h.netns))} for h in lab.hosts]}


def running(lab_dir: Path) -> bool:
    d = slurm_dir(lab_dir)
    return munged_pid(d) is not None or slurmctld_pid(d) is not None


def down(lab) -> int:
    """Stop this lab's slurmds (and their job steps), slurmctld and munged; return how many processes."""
    d = slurm_dir(lab.dir)
    pids = [p for h in lab.hosts for p in slurmd_pids(d, h.netns)]
    pids += [p for p in (slurmctld_pid(d), munged_pid(d)) if p]
    netns.kill_pids(pids, grace=3.0)
    return len(pids)


def stop_by_prefix(prefix: str) -> int:
    """Stop the slurmctld and munged of any lab with this prefix, wherever its directory (the
    clean-up of a lab whose state is lost): a slurmctld started by :func:`up` runs ``-f
    <dir>/slurm/slurm.conf`` of a file this module wrote with ``ClusterName=<prefix>``."""
    dirs = set()
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        cmd = _cmdline(int(p.name))
        if not cmd or os.path.basename(cmd[0]) != "slurmctld" or "-f" not in cmd[:-1]:
            continue
        conf = Path(cmd[cmd.index("-f") + 1])
        try:
            text = conf.read_text()
        except OSError:
            continue
        if text.startswith("# written by `fawkes lab slurm up`") and f"\nClusterName={prefix}\n" in text:
            dirs.add(conf.parent.parent)
    return sum(stop_root_daemons(d) for d in dirs)


def stop_root_daemons(lab_dir: Path) -> int:
    """Stop slurmctld and munged of the lab in ``lab_dir`` (the hosts' slurmds die with the hosts)."""
    d = slurm_dir(lab_dir)
    pids = [p for p in (slurmctld_pid(d), munged_pid(d)) if p]
    netns.kill_pids(pids, grace=3.0)
    return len(pids)
