"""Shared fixtures: the session-wide SSH test lab (8 hosts, prefix "fwt", subnet 10.201.0).

Lab tests are marked ``@pytest.mark.lab``.  When the lab cannot start they are skipped with
the reason, except under CI (``$CI`` set), where they fail: CI must never pass by skipping.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

LAB_PREFIX = os.environ.get("FAWKES_TEST_LAB_PREFIX", "fwt")  # two test runs at once need two prefixes
LAB_SUBNET = "10.201.0"  # the shared lab's first choice; another test run's lab takes the next free one
LAB_HOSTS = 8
REPO = Path(__file__).resolve().parent.parent


def unavailable(reason: str) -> None:
    """Fail under CI, skip (with the reason) elsewhere."""
    if os.environ.get("CI"):
        pytest.fail(f"required test resource unavailable in CI: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def root_and_cgroups():
    """For tests that create cgroups on this machine: root and a mounted /sys/fs/cgroup, else
    :func:`unavailable` (fails under CI, skips elsewhere)."""
    if os.geteuid() != 0 or not Path("/sys/fs/cgroup").is_dir():
        unavailable("needs root and cgroups (/sys/fs/cgroup)")


#: modules that measure the machine's load or time themselves: ``scripts/test`` runs them with the lab
#: tests, never beside the other run (``-m serial`` selects them)
SERIAL_MODULES = {"test_watchdog.py", "test_usage.py", "test_usage_live.py", "test_coordinator_ha.py",
                  "test_retention.py", "test_suspend.py", "test_suspend_cgroups.py",
                  # live runs on CPU-limited hosts measured against their quota (the twin's band, a host's
                  # usage): beside the other lab run the machine has less than the quotas promise
                  "test_twin_lab.py", "test_usage_lab.py"}


#: the lab modules ``scripts/test`` runs in its foreground lab process (prefix fwa; ``-m lab_fg`` selects
#: them) while the others run beside it (prefix fwt): those with labs of their own (quotas, racks, SLURM, the
#: kit's 10 hosts, the mixed pool), the lab's own tests, and a share of those on the session lab, chosen so
#: that the two processes take about as long
FOREGROUND_LAB_MODULES = {"test_conformance_lab.py", "test_mixed_pool_lab.py", "test_placement_lab.py",
                          "test_lab.py", "test_slurm_lab.py", "test_coordinator_failover_lab.py",
                          "test_service_user_lab.py", "test_install_guide_lab.py"}
# the clean-clone CI of f18d6d2 (2026-11-28): foreground 24:57, the other 21:01 with a fault campaign of 6
# kills (463 s); the campaign now kills 4 times and test_hibernate_lab.py (138 s) and test_suspend_lab.py (86 s)
# run beside.  Clean-clone CIs fkci47-51 (2026-11-28): the foreground 18:00-20:17, the other 19:49-22:16, the other
# always 1.9-3.2 min the longer: test_reconcile_lab.py (71 s in fkci51) moved to the foreground.  With the class-data
# archives (fkci56, 2026-11-29) the foreground took 20:09 and the other 18:02: test_reconcile_lab.py (59 s) back


@pytest.hookimpl(tryfirst=True)  # before -m deselects
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
        if item.path.name in FOREGROUND_LAB_MODULES:
            item.add_marker(pytest.mark.lab_fg)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """With ``FAWKES_TEST_CPU=FILE``: one JSON line per test (setup, call and teardown) with the CPU
    seconds of this pytest process and of the children it waited for meanwhile, and the wall time
    (bench/suite_cpu.py sums them).  Processes it did not wait for (daemons on the lab hosts) are not
    counted: for those, bench/suite_cpu.py's machine-wide accounting."""
    out = os.environ.get("FAWKES_TEST_CPU")
    if not out:
        yield
        return
    import json
    import resource
    import time

    def cpu() -> tuple[float, float]:
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime

    (s0, c0), w0 = cpu(), time.monotonic()
    yield
    (s1, c1), w1 = cpu(), time.monotonic()
    with open(out, "a") as f:
        f.write(json.dumps({"test": item.nodeid, "self_s": round(s1 - s0, 2), "children_s": round(c1 - c0, 2),
                            "wall_s": round(w1 - w0, 2)}) + "\n")


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """The shared lab.  Tests that crash a host must revive it before they end."""
    from fawkes.errors import FawkesError
    from fawkes.lab import Lab

    try:
        Lab.cleanup(LAB_PREFIX, LAB_SUBNET)  # leftovers of an earlier, interrupted run
        # another test run's (or engineer's) lab may hold 10.201.0.0/24 on this machine: then a free /24
        the_lab = Lab.up_free(LAB_HOSTS, tmp_path_factory.mktemp("lab"), prefix=LAB_PREFIX, nets=range(201, 250))
    except FawkesError as exc:
        unavailable(f"SSH lab cannot start: {exc}")
    try:
        yield the_lab
    finally:
        the_lab.down()


def own_lab(tmp_path_factory, suffix: str, hosts: int, first_net: int, what: str, **up):
    """A lab of a test module's own (prefix ``LAB_PREFIX + suffix``, the first free 10.N.0/24 from
    ``first_net``; ``up``: quotas, racks... for ``Lab.up``), for a module-scoped fixture to yield and
    take down; fails under CI and skips elsewhere, saying ``what`` could not start, when it cannot."""
    from fawkes.lab import Lab

    prefix = f"{LAB_PREFIX}{suffix}"
    try:
        return Lab.up_free(hosts, tmp_path_factory.mktemp(f"lab{suffix}"), prefix=prefix,
                           nets=range(first_net, 250), **up)
    except Exception as exc:  # noqa: BLE001 - no root, no netns, no cgroups: the lab tests say why
        unavailable(f"{what}: {exc}")


@pytest.fixture
def ex(lab):
    """An executor on all lab hosts (strict host keys against the lab's known_hosts)."""
    with lab.executor(command_timeout=30) as executor:
        yield executor


#: commands whose process itself matters (a service's threads and signal handlers, the lab's namespaces):
#: always a real subprocess, as is anything with ``--follow`` (it blocks)
OWN_PROCESS = (("coordinator", "run"), ("lab",))


def needs_process(args) -> bool:
    return any(tuple(args[:len(c)]) == c for c in OWN_PROCESS) or "--follow" in args


def cli_in_process(args, env: dict | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``fawkes ARGS`` run in this process: ``fawkes.cli.main`` (what the console script calls) with click's
    streams isolated and ``env`` applied over this process's environment (a None value unsets a key).  It
    shows what a process of its own would: warnings through logging's last resort (the message alone, on
    stderr; pytest's handler on the root logger would otherwise take them) and ``sys.exit``'s code.  A
    subprocess each cost the non-lab run some 750 interpreter starts (7 CPU-minutes of its 16, beside the
    lab in CI); the console script's own process is checked in tests/test_packaging.py and wherever the
    process matters (``needs_process``)."""
    import contextlib
    import logging

    from click.testing import CliRunner

    from fawkes.cli import main

    with CliRunner().isolation(env=dict(env or {})) as streams, contextlib.chdir(cwd or os.getcwd()):
        last = logging.StreamHandler(sys.stderr)
        last.setLevel(logging.WARNING)
        logging.getLogger().addHandler(last)
        try:
            rc = main(list(args))
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        finally:
            logging.getLogger().removeHandler(last)
            sys.stdout.flush()  # what the process's exit flushes (a plain sys.stdout.write is buffered)
            sys.stderr.flush()
    return subprocess.CompletedProcess(["fawkes", *args], rc, streams[0].getvalue().decode(),
                                       streams[1].getvalue().decode())


def run_cli(*args: str, env: dict | None = None, user: str | None = None,
            process: bool = False) -> subprocess.CompletedProcess:
    """``fawkes ARGS`` from the repository's directory: in this process (:func:`cli_in_process`), or as a real
    ``python -m fawkes`` subprocess when ``process`` is set, for another ``user``, or when the command needs
    one (:func:`needs_process`)."""
    if not (process or user or needs_process(args)):
        return cli_in_process(args, env=env, cwd=REPO)
    cmd = [sys.executable, "-m", "fawkes", *args]
    if user:
        cmd = ["runuser", "-u", user, "--", *cmd]
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(cmd, capture_output=True, text=True, env=full_env, cwd=REPO, timeout=600)


def pids_with_cmdline(marker: str | bytes) -> list[int]:
    """Pids of every process whose command line contains ``marker``, as seen from the root
    namespace (which sees every lab host's processes); processes that vanish meanwhile are skipped."""
    needle = marker.encode() if isinstance(marker, str) else marker
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            if needle in (p / "cmdline").read_bytes():
                pids.append(int(p.name))
        except OSError:
            pass
    return pids


def cluster_dirs_marker(lab, cluster: str = "") -> str:
    """What the command line of a daemon of ``cluster`` (any cluster if empty) on ``lab`` contains."""
    return f"{lab.node_dir}/clusters/{cluster + '/' if cluster else ''}"


@pytest.fixture(autouse=True)
def _no_cluster_daemons_left(request):
    """After a test on the lab, stop (by pid) any process still running from a cluster directory,
    so that one failed test cannot leave daemons that break the next one.  Tests assert their own
    cleanup before this runs."""
    yield
    if "lab" not in request.fixturenames:
        return
    import signal

    lab = request.getfixturevalue("lab")
    for pid in pids_with_cmdline(cluster_dirs_marker(lab)):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # ProcessLookupError: already gone
            pass
