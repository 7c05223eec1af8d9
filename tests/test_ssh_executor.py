"""The SSH executor on real lab hosts (real sshd in network namespaces, no mocks)."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from fawkes.ssh.executor import Executor, Target
from fawkes.ssh.shell import Script, background
from tests.test_ssh_shell import HOSTILE

pytestmark = pytest.mark.lab
PY_ARGV = ["python3", "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]


def test_parallel_commands_on_all_hosts(lab, ex):
    names = [h.name for h in lab.hosts]
    t0 = time.monotonic()
    res = ex.run(names, "sleep 1; hostname")
    wall = time.monotonic() - t0
    assert list(res) == names
    assert all(r.ok and r.exit_code == 0 and r.error is None for r in res.values()), res
    assert {h: r.stdout.strip() for h, r in res.items()} == {h: h for h in names}
    assert wall < 6.0, f"8 x 1 s took {wall:.1f} s: not parallel (serial would take >= 8 s)"
    # the connections are reused: a second fan-out opens no new connection
    ex.run(names, ["true"])
    assert ex.connects == len(names)


def test_connections_disable_nagle(lab, ex):
    """Every small SSH message would otherwise wait for the peer's delayed ACK (40 ms per channel open
    on Linux); the figures are in bench/bench_ssh_fanout.py."""
    ex.run(["h1", "h2"], "true")
    socks = [c.get_transport().sock for h in ("h1", "h2") for c in ex._idle[h]]
    assert socks and all(s.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) for s in socks)


def test_run_each_and_env(lab, ex):
    res = ex.run_each({"h1": ["echo", "one"], "h2": Script("echo {x}", x="two words")})
    assert (res["h1"].stdout, res["h2"].stdout) == ("one\n", "two words\n")
    res = ex.run(["h3"], ["sh", "-c", 'printf %s "$V"'], env={"V": HOSTILE[4]})
    assert res["h3"].stdout == HOSTILE[4]


def test_hostile_strings_arrive_verbatim(lab, ex):
    marker = lab.node_dir / "PWNED"
    hostile = HOSTILE + [f"; touch {marker}", f"$(touch {marker})", f"`touch {marker}`"]
    res = ex.run(["h1", "h2"], [*PY_ARGV, *hostile])
    for r in res.values():
        assert r.ok, r.error
        assert json.loads(r.stdout) == hostile
    script = Script("cd {d} && {py} {args}", d=str(lab.node_dir), py=PY_ARGV, args=hostile)
    assert json.loads(ex.run(["h1"], script)["h1"].stdout) == hostile
    path = f"{lab.node_dir}/dir with 'quotes' and $(x)/f;ile"
    assert ex.put("h1", "content; $(touch x)\n", path).ok
    assert ex.run(["h1"], ["cat", path])["h1"].stdout == "content; $(touch x)\n"
    assert not any((h.root / "PWNED").exists() for h in lab.hosts)


def test_uploads(lab, ex):
    files = {h: [(f"{lab.node_dir}/conf/{h}/app.conf", f"host={h}\n"), (f"{lab.node_dir}/bin/run.sh", b"#!/bin/sh\n")]
             for h in ("h1", "h2", "h3", "h4")}
    res = ex.put_each(files, mode=0o600)
    assert all(r.ok for r in res.values()), res
    for h in files:
        root = lab.host(h).root  # each host's node_dir is its own root directory
        assert (root / "conf" / h / "app.conf").read_text() == f"host={h}\n"
        assert (root / "conf" / h / "app.conf").stat().st_mode & 0o777 == 0o600
        assert not list((root / "conf" / h).glob("*.tmp"))
    out = ex.run(["h2"], ["stat", "-c", "%a %s", f"{lab.node_dir}/bin/run.sh"])["h2"].stdout
    assert out.split() == ["600", "10"]
    assert not (lab.host("h5").root / "conf").exists()


def test_failed_command_is_reported_and_never_rerun(lab, ex):
    log = f"{lab.node_dir}/attempts"
    res = ex.run(["h4"], Script("echo x >> {f}; echo first >&2; echo 'final words' >&2; exit 3", f=log))
    r = res["h4"]
    assert (r.ok, r.exit_code, r.error) == (False, 3, "exit code 3: final words")
    assert (lab.host("h4").root / "attempts").read_text() == "x\n"


def test_crashed_host_mid_fan_out(lab):
    names = ["h1", "h2", "h3", "h4"]
    with lab.executor(names, retries=0) as ex:
        ex.run(names, "true")  # connected everywhere
        crash = threading.Timer(0.7, lab.crash, args=("h2",))
        crash.start()
        try:
            t0 = time.monotonic()
            res = ex.run(names, "sleep 2; echo done", timeout=20)
            wall = time.monotonic() - t0
            crash.join()
            assert not res["h2"].ok and res["h2"].exit_code is None
            assert "connection lost" in res["h2"].error
            assert res["h2"].duration_s < 1.95, "the crash must be noticed at once, not after the command"
            for h in ("h1", "h3", "h4"):
                assert res[h].ok and res[h].stdout == "done\n", res[h]
            assert wall < 5
            again = ex.run(names, "hostname")
            assert not again["h2"].ok and "refused" in again["h2"].error
            assert all(again[h].ok for h in ("h1", "h3", "h4"))
        finally:
            crash.cancel()
            lab.revive("h2")
        assert ex.run(["h2"], "hostname")["h2"].stdout == "h2\n"  # reconnects after the revive


def test_unknown_host_key_is_refused(lab, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with lab.executor(["h1", "h2"], known_hosts=empty, retries=3, backoff=1.0) as ex:
        res = ex.run(None, "touch /tmp/should-not-run")
    for r in res.values():
        assert not r.ok and r.exit_code is None
        assert "unknown host key" in r.error and "refused" in r.error
        assert r.duration_s < 1.0, "a host-key refusal must not be retried"
    with lab.executor(["h1"], known_hosts=empty, strict_host_keys=False) as ex:
        assert ex.run(None, "hostname")["h1"].stdout == "h1\n"
    assert empty.read_text() == ""  # non-strict mode does not write the key anywhere


def test_changed_host_key_is_refused(lab, tmp_path):
    other = tmp_path / "otherkey"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = " ".join(other.with_name("otherkey.pub").read_text().split()[:2])
    kh = tmp_path / "known_hosts"
    lines = [ln for ln in lab.known_hosts.read_text().splitlines() if not ln.startswith("h3,")]
    kh.write_text("\n".join(lines + [f"h3,{lab.host('h3').address} {pub}"]) + "\n")
    with lab.executor(["h3", "h4"], known_hosts=kh) as ex:
        res = ex.run(None, "hostname")
    assert res["h4"].ok
    assert not res["h3"].ok and "host key mismatch" in res["h3"].error


def test_known_hosts_is_parsed_once_and_again_when_a_host_is_added(lab, tmp_path):
    """The executor parses known_hosts once; a host added to the file later (a pool that grows) is
    found, and one missing from it is still refused."""
    kh = tmp_path / "known_hosts"
    lines = lab.known_hosts.read_text().splitlines()
    kh.write_text("\n".join(ln for ln in lines if not ln.startswith("h2,")) + "\n")
    with lab.executor(["h1", "h2"], known_hosts=kh) as ex:
        assert ex.run(["h1"], "hostname")["h1"].stdout == "h1\n"
        refused = ex.run(["h2"], "hostname")["h2"]
        assert not refused.ok and "unknown host key" in refused.error
        time.sleep(0.01)  # a new mtime
        kh.write_text("\n".join(lines) + "\n")
        assert ex.run(["h2"], "hostname")["h2"].stdout == "h2\n"


def test_timeout_is_honoured(lab):
    with lab.executor(["h5", "h6"], command_timeout=30) as ex:
        t0 = time.monotonic()
        res = ex.run(None, "sleep 20", timeout=1.0)
        wall = time.monotonic() - t0
        assert wall < 3.0
        for r in res.values():
            assert not r.ok and r.error == "timeout after 1s" and r.exit_code is None
        fast = ex.run(None, "echo ok", timeout=5)
        assert all(r.stdout == "ok\n" for r in fast.values())
    with lab.executor(["h5"], command_timeout=0.5) as ex:  # the executor-wide default
        assert ex.run(None, "sleep 5")["h5"].error == "timeout after 0.5s"


def test_connection_refused_is_retried_with_backoff(lab):
    t = Target("closed", lab.host("h1").address, port=2, key_file=lab.key_file)
    for retries, at_least, at_most in ((0, 0.0, 0.5), (2, 0.3, 3.0)):
        with Executor([t], known_hosts=lab.known_hosts, retries=retries, backoff=0.2) as ex:
            r = ex.run(None, "true")["closed"]
        assert not r.ok and "connection refused" in r.error
        assert at_least <= r.duration_s <= at_most, (retries, r.duration_s)


def test_connect_attempts_are_bounded(lab):
    class Counting(Executor):
        active = peak = 0
        guard = threading.Lock()

        def _connect_once(self, t):
            with self.guard:
                Counting.active += 1
                Counting.peak = max(Counting.peak, Counting.active)
            try:
                return super()._connect_once(t)
            finally:
                with self.guard:
                    Counting.active -= 1

    with Counting(lab.targets(), known_hosts=lab.known_hosts, max_connects=2) as ex:
        res = ex.run(None, "hostname")
    assert all(r.ok for r in res.values())
    assert Counting.peak == 2


def test_background_start_with_pid_file(lab, ex):
    pid_file, log = f"{lab.node_dir}/run/daemon.pid", f"{lab.node_dir}/log/daemon.log"
    r = ex.run(["h6"], background(["sh", "-c", 'echo "up $0"; exec sleep 60', "a b"], pid_file, log), timeout=5)
    assert r["h6"].ok, r["h6"].error
    pid = (lab.host("h6").root / "run" / "daemon.pid").read_text().strip()
    assert ex.run(["h6"], ["kill", "-0", pid])["h6"].ok
    assert ex.run(["h7"], ["kill", "-0", pid])["h7"].exit_code == 1 or True  # other host: other PID space
    assert ex.run(["h6"], ["kill", pid])["h6"].ok


def test_unknown_host_name_is_an_error(ex):
    from fawkes.errors import FawkesError
    with pytest.raises(FawkesError, match="unknown host 'nope'"):
        ex.run(["nope"], "true")


def _remote_processes(lab, host: str, marker: str) -> list[str]:
    """Command lines on ``host`` that contain ``marker``, seen two ways: a /proc scan of the host's
    network namespace from here, and ``pgrep`` run on the host over a second SSH connection."""
    from fawkes.lab import netns
    here = []
    for pid in netns.netns_pids(lab.host(host).netns):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmd:
            here.append(cmd.strip())
    with lab.executor([host]) as ex2:
        r = ex2.run(None, ["pgrep", "-af", "--", marker])[host]
    assert r.exit_code in (0, 1), r  # 1 = nothing found
    there = [ln for ln in r.stdout.splitlines() if "pgrep" not in ln]
    return here + there


def test_timed_out_command_is_killed_on_the_host(lab):
    host = "h8"
    # a plain command, a pipeline, a background child (nohup'd) and a child in its own process group
    # (`timeout` calls setpgid): none of them may outlive the timeout
    cases = {"plain": "sleep 311",
             "pipeline": "sleep 312 | cat",
             "children": "nohup sleep 313 >/dev/null 2>&1 & sh -c 'sleep 314; echo never'",
             "own group": "timeout 400 sleep 315"}
    with lab.executor([host], command_timeout=30) as ex:
        for what, cmd in cases.items():
            t0 = time.monotonic()
            r = ex.run(None, cmd, timeout=2)[host]
            wall = time.monotonic() - t0
            assert (r.ok, r.exit_code, r.error) == (False, None, "timeout after 2s"), (what, r)
            assert 2.0 <= wall < 5.0, (what, wall)
            assert _remote_processes(lab, host, "sleep 31") == [], what
        # a timeout shorter than the session start-up: the command is still found and stopped
        r = ex.run(None, "sleep 317", timeout=0.01)[host]
        assert r.error == "timeout after 0.01s", r
        assert _remote_processes(lab, host, "sleep 31") == []
        # the executor keeps working after timeouts, with unchanged output and exit codes
        r = ex.run(None, "echo out; echo err >&2; exit 4")[host]
        assert (r.exit_code, r.stdout, r.stderr) == (4, "out\n", "err\n")
        r = ex.run(None, ["printf", "%s", "no newline"])[host]
        assert (r.ok, r.stdout, r.stderr) == (True, "no newline", "")


def test_output_before_a_timeout_is_kept(lab):
    with lab.executor(["h8"]) as ex:
        r = ex.run(None, "echo started; echo warn >&2; sleep 316", timeout=1.5)["h8"]
    assert (r.error, r.stdout, r.stderr) == ("timeout after 1.5s", "started\n", "warn\n")
    assert _remote_processes(lab, "h8", "sleep 316") == []
