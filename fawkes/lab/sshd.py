"""Keys, sshd_config and the per-host sshd (own UTS, mount and PID namespace inside the netns)."""

from __future__ import annotations

import os
import pwd
import shlex
import socket
import subprocess
import time
from pathlib import Path

from fawkes.errors import FawkesError
from fawkes.lab import cgroup
from fawkes.lab.netns import sh

SSHD = "/usr/sbin/sshd"
_children: dict[int, subprocess.Popen] = {}  # processes this Python process started, to reap them


def ensure_key(path: Path, comment: str) -> None:
    """An ed25519 key pair at ``path`` (kept if it exists: host keys stay stable across re-ups)."""
    if path.is_file() and path.with_name(path.name + ".pub").is_file():
        return
    path.unlink(missing_ok=True)
    sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path))


def public_key(path: Path) -> str:
    """``type base64`` of the public half of ``path``."""
    return " ".join(path.with_name(path.name + ".pub").read_text().split()[:2])


def sshd_config(*, name: str, host_key: Path, authorized_keys: Path, log_root: Path) -> str:
    return "\n".join([
        "# written by fawkes lab",
        "Port 22",
        "ListenAddress 0.0.0.0",
        f"HostKey {host_key}",
        f"AuthorizedKeysFile {authorized_keys}",
        "PidFile none",
        "UsePAM no",
        "StrictModes no",
        "PermitRootLogin prohibit-password",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "UseDNS no",
        "PrintMotd no",
        "X11Forwarding no",
        "MaxStartups 10:30:100",
        "Subsystem sftp internal-sftp",
        f"SetEnv LAB_HOST={name} LAB_HOST_ROOT={log_root}",
        "",
    ])


def start(*, netns: str, hostname: str, config: Path, log: Path, root: Path, node_dir: Path,
          etc_hosts: Path, cgroup_procs: list[Path] | None = None, bashrc: Path | None = None) -> int:
    """Start the host's sshd in its own PID namespace; return the pid of the ``unshare`` process.

    Killing that process (or the namespace's pid 1, sshd) kills every process of the host.  With
    ``cgroup_procs`` (``cgroup.procs`` files) the process enters those cgroups before anything else
    starts, so every process of the host (sshd, sessions, daemons) shares the groups' CPU quota and
    memory limit; if it cannot, it exits and sshd never comes up.  ``bashrc`` is bind-mounted
    over root's ``~/.bashrc`` inside the host: bash started by sshd reads that file even for a
    plain command, and this machine's may run slow tools on every command (pyenv init: 90 ms and
    ~100 processes per command here); a fresh cluster node has none of that.
    """
    rc = Path(pwd.getpwnam("root").pw_dir) / ".bashrc"
    script = ("hostname {h} && mount --bind {r} {n} && mount --bind {e} /etc/hosts && mkdir -p /run/sshd && "
              + ("mount --bind {b} {rc} && " if bashrc is not None and bashrc.is_file() and rc.is_file() else "")
              + "exec {sshd} -D -f {c} -E {l}").format(
        **{k: shlex.quote(str(v)) for k, v in
           dict(h=hostname, r=root, n=node_dir, e=etc_hosts, sshd=SSHD, c=config, l=log, b=bashrc, rc=rc).items()})
    enter = cgroup.enter(cgroup_procs) if cgroup_procs else []
    proc = subprocess.Popen(
        enter + ["ip", "netns", "exec", netns, "unshare", "--uts", "--mount", "--propagation", "private",
         "--pid", "--fork", "--kill-child", "--mount-proc", "sh", "-c", script],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(log.with_suffix(".err"), "ab"),
        start_new_session=True, close_fds=True)
    _children[proc.pid] = proc
    return proc.pid


def reap() -> None:
    for pid, proc in list(_children.items()):
        if proc.poll() is not None:
            del _children[pid]


def wait_port(addresses: list[str], port: int = 22, timeout: float = 10.0) -> None:
    """Wait until every address accepts TCP connections on ``port``."""
    pending = set(addresses)
    deadline = time.monotonic() + timeout
    while pending:
        for a in list(pending):
            try:
                with socket.create_connection((a, port), timeout=0.2):
                    pending.discard(a)
            except OSError:
                pass
        if pending:
            if time.monotonic() > deadline:
                raise FawkesError(f"lab: sshd did not come up on {', '.join(sorted(pending))} within "
                                  f"{timeout:g}s (see the sshd.log files in the lab directory)")
            time.sleep(0.02)


def alive(pid: int | None) -> bool:
    if not pid:
        return False
    reap()
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def kill_host(pid: int | None) -> None:
    """SIGKILL the host's namespace init and its unshare parent: every process of the host dies."""
    if not pid:
        return
    for child in _children_of(pid):
        _kill(child)
    _kill(pid)
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)


def _children_of(pid: int) -> list[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(p) for p in text.split()]


def _kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
