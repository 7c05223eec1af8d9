"""``fawkes inventory probe``'s checks of what a kind needs on a host (issue 30, item 3): the probe script
run here, on this machine, as SSH would run it on a host, then parsed; and the CLI's new options refused
in one line."""

from __future__ import annotations

import socket
import subprocess
import time

import pytest

from fawkes.inventory.probe import (
    JAVA_MIN,
    Probe,
    java_major,
    parse,
    probe_script,
    problems,
)
from fawkes.ssh.executor import Result

try:
    from test_cli_store import fawkes
except ImportError:
    from tests.test_cli_store import fawkes


def run_here(work_dir: str, python: str = "python3") -> tuple[Result, float]:
    t0 = time.monotonic()
    out = subprocess.run(["sh", "-c", str(probe_script(work_dir, python))], capture_output=True, text=True, timeout=60,
                         check=False)
    return Result("here", out.returncode == 0, out.returncode, out.stdout, out.stderr, None,
                  time.monotonic() - t0), time.time()


@pytest.mark.parametrize("line, major", [('openjdk version "17.0.9" 2023-10-17', 17), ('java version "1.8.0_392"', 8),
                                         ('openjdk version "21" 2023-09-19', 21), ("sh: java: not found", None),
                                         ("", None), (None, None)])
def test_java_major(line, major):
    assert java_major(line) == major


def test_the_probe_reads_this_machine(tmp_path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        res, arrived = run_here(str(tmp_path / "not" / "yet"))
        p = parse("here", res, arrived)
    finally:
        srv.close()
    assert p.ok and p.cores and p.memory_mb and p.disk_free_mb is not None
    assert port in p.listening  # a port this test holds open is seen as in use
    assert p.work_dir_writable is True  # the nearest existing ancestor (tmp_path) is writable
    assert p.python and p.python.startswith("Python 3.")
    assert p.clock_skew_s is not None and abs(p.clock_skew_s) < 5  # the same clock
    assert p.cgroup in ("v2 delegated", "v2 not delegated", "v1", None)
    assert f"ports in use: {port}" in problems(p, ports=range(port, port + 1))
    assert not any(x.startswith("ports in use") for x in problems(p, ports=range(port + 1, port + 2)))
    # a host whose clock is 5 s ahead of this machine's
    late = parse("here", res, arrived - 5)
    assert late.clock_skew_s > 4 and any(x.startswith("clock +") for x in problems(late))


def test_a_missing_python_and_java_are_problems(tmp_path):
    res, arrived = run_here(str(tmp_path), python="/nonexistent/python3")
    p = parse("here", res, arrived)
    assert p.python is None and "/nonexistent/python3 does not run" in problems(p, python="/nonexistent/python3")
    old = Probe("h", True, java='java version "1.8.0_392"', java_major=8, python="Python 3.11.2",
                work_dir_writable=False, cgroup="v2 not delegated")
    lacks = problems(old)
    assert f"java 8 < {JAVA_MIN}" in lacks and "work dir not writable" in lacks
    assert "cgroup not delegated (no suspend)" in lacks
    assert problems(Probe("h", True, java_major=None, python=None), python="python3")[:2] == [
        "no java on PATH", "python3 does not run"]
    assert problems(Probe("h", False, "refused")) == []  # a host that did not answer is reported as such


def test_output_that_is_not_the_probes_is_refused():
    bad = Result("h", True, 0, "@@fawkes-probe@@\n1\n", "", None, 0.1)
    assert not parse("h", bad).ok and parse("h", bad).error == "unexpected probe output"


@pytest.mark.parametrize("opt, value", [
    ("--java-min", "nan"), ("--java-min", "inf"), ("--java-min", "-1"), ("--java-min", "1e30"),
    ("--java-min", "1000000000000000000000000000000"), ("--java-min", "17\n"),
    ("--python", "py thon"), ("--python", "python3\n"), ("--python", "python3\0"), ("--python", "$(reboot)"),
    ("--python", "../bin/python3;x"), ("--python", ""),
    ("--port-range", "nan"), ("--port-range", "-1"), ("--port-range", "21000-99999"), ("--port-range", "1-2"),
    ("--port-range", "21000-31999\n"), ("--port-range", "21000\x00-31999"),
])
def test_bad_probe_options_are_one_line_exit_2(tmp_path, opt, value):
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  - {name: u1, address: 192.0.2.1}\n")
    if "\0" in value:  # no argv can carry a NUL byte: the OS refuses it before fawkes runs
        with pytest.raises(ValueError):
            subprocess.run(["true", value], check=False)
        return
    r = fawkes("inventory", "probe", str(inv), opt, value)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and opt in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inv.yaml"]


# ------------------------------------------------------------------ the framework's versions (from its jar names)
def test_versions_are_read_from_the_jars_on_a_host(tmp_path):
    from fawkes.frameworks.spec import FrameworkPaths
    from fawkes.frameworks.versions import parse_versions, version_notes, version_script

    spark, hadoop, flink = tmp_path / "spark", tmp_path / "hadoop", tmp_path / "flink"
    for d, jar in ((spark / "jars", "spark-core_2.12-3.5.1.jar"), (flink / "lib", "flink-dist-2.3.0.jar"),
                   (hadoop / "share/hadoop/common", "hadoop-common-3.4.1.jar")):
        d.mkdir(parents=True)
        (d / jar).write_text("")
        (d / "unrelated-1.0.jar").write_text("")

    def on_host(fw):
        return parse_versions(subprocess.run(["sh", "-c", str(version_script(fw))], capture_output=True,
                                             text=True, check=True).stdout)

    old = on_host(FrameworkPaths("s", "spark-hdfs", str(spark), hadoop_home=str(hadoop)))
    assert old == {"spark": "3.5.1", "hadoop": "3.4.1"}
    assert version_notes(old) == ["spark 3.5.1: fawkes has run spark 4.* only",
                                  "hadoop 3.4.1: fawkes has run hadoop 2.7.3 only"]
    assert on_host(FrameworkPaths("f", "flink-hdfs", flink_home=str(flink), hadoop_home=str(tmp_path / "none"))) == {
        "flink": "2.3.0"}  # a missing Hadoop home: no line (the kind's own check names the missing path)
    assert version_notes({"flink": "2.3.0", "spark": "4.3.0", "hadoop": "2.7.3"}) == []


def test_versions_that_differ_between_hosts_are_named():
    from fawkes.frameworks.versions import differing, parse_versions

    assert parse_versions("spark 4.3.0\nspark 9\n$(reboot)\nhadoop 2.7.3; rm\n") == {"spark": "4.3.0"}
    by_host = {"h1": {"spark": "4.3.0"}, "h2": {"spark": "4.3.0"}, "h3": {"spark": "4.2.1"}, "h4": None}
    assert differing(by_host) == ["spark: 4.2.1 (h3), 4.3.0 (h1, h2)"]


@pytest.mark.parametrize("name, message", [("nosuch", "nosuch"), ("a\nb", "a\\nb")])
def test_probe_of_an_unknown_framework_is_one_line_exit_2(tmp_path, name, message):
    from fawkes.store import Store

    state = tmp_path / "state.db"
    with Store(f"sqlite:///{state}") as s:
        s.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  - {name: u1, address: 192.0.2.1}\n")
    r = fawkes("inventory", "probe", str(inv), "--framework", name, state=str(state))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert r.stdout == "" and sorted(p.name for p in tmp_path.iterdir()) == ["inv.yaml", "state.db"]


def test_a_host_that_does_not_answer_is_exit_1(tmp_path):
    """The table (or JSON) is printed and the exit code says a host failed (it was 0: click's Exit was
    swallowed by fawkes.cli.main)."""
    inv = tmp_path / "inv.yaml"
    inv.write_text("version: 1\nhosts:\n  - {name: u1, address: 127.0.0.1, port: 1}\n")
    for extra in ((), ("--json",)):
        r = fawkes("inventory", "probe", str(inv), "--timeout", "10", *extra)
        assert r.returncode == 1 and "u1" in r.stdout, (r.stdout, r.stderr)
