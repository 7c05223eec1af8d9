"""The framework seam (issue 23): the service knows nodes, roles, removal modes, samples and jobs,
never a framework's names.  No identifier and no string literal of the code under
``fawkes/coordinator``, ``fawkes/mechanism`` and ``fawkes/store`` names a framework; comments and
docstrings may (they explain what a kind does), and so may ``fawkes/frameworks``, where the kinds live.
"""

from __future__ import annotations

import io
import re
import token
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fawkes"
PACKAGES = ("coordinator", "mechanism", "store")
NAMES = re.compile(r"spark|hdfs|datanode|namenode|flink|dask", re.IGNORECASE)


def _docstring_starts(source: str) -> set[tuple[int, int]]:
    """(line, column) where each docstring token starts: the first statement of a module, class or
    function when it is a lone string expression."""
    import ast

    starts = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                starts.add((first.lineno, first.col_offset))
    return starts


def leaks(source: str) -> list[tuple[int, str]]:
    """(line, token) of every NAME or non-docstring STRING token naming a framework."""
    docs = _docstring_starts(source)
    out = []
    fstring = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == getattr(token, "FSTRING_START", None):
            fstring += 1
        elif kind == getattr(token, "FSTRING_END", None):
            fstring -= 1
        check = kind == token.NAME or (kind == token.STRING and tok.start not in docs) \
            or kind == getattr(token, "FSTRING_MIDDLE", None)
        if check and NAMES.search(tok.string):
            out.append((tok.start[0], tok.string))
    return out


def files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_checker_sees_names_and_strings_not_comments_or_docstrings():
    src = ('"""Spark docs are fine."""\n'
           "# so are HDFS comments\n"
           "def f(x):\n"
           '    """A docstring naming the NameNode."""\n'
           "    spark_home = 1\n"
           '    y = "hdfs://x"\n'
           "    z = f'{x} DataNode'\n"
           "    return x.Flink, 'dask'\n")
    got = [t for _, t in leaks(src)]
    assert "spark_home" in got and '"hdfs://x"' in got and "Flink" in got and "'dask'" in got
    assert any("DataNode" in t for t in got)
    assert not any("docs" in t or "NameNode" in t for t in got)


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_framework_names_in_the_service(path):
    found = leaks(path.read_text())
    assert not found, f"{path.relative_to(ROOT.parent)}: framework names in code: " + ", ".join(
        f"line {ln}: {t[:60]}" for ln, t in found)


# ---------------------------------------------------------------------- the contract itself
def _spec():
    from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
    from fawkes.mechanism import Role

    fw = FrameworkPaths("lab", "spark-hdfs", "/opt/spark", hdfs_jars="/opt/hdfs", java_home="/opt/jdk")
    nodes = (NodeSpec("h1", "10.9.0.11", Role.CORE, "/srv/f"), NodeSpec("h2", "10.9.0.12", Role.TC, "/srv/f"),
             NodeSpec("h3", "10.9.0.13", Role.TR, "/srv/f"))
    return ClusterSpec("a", fw, nodes)


def test_spark_hdfs_declares_what_it_offers():
    from fawkes.frameworks.base import REMOVAL_MODES, SIGNALS, FrameworkDriver, map_only_refusal
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver

    assert issubclass(SparkHdfsDriver, FrameworkDriver)
    assert set(SparkHdfsDriver.removal_modes) == set(REMOVAL_MODES)
    assert SparkHdfsDriver.signals <= set(SIGNALS) and "stored_bytes" in SparkHdfsDriver.signals
    assert not SparkHdfsDriver.map_only_workers
    why = map_only_refusal()
    assert why.startswith("maps_only is not supported live: ") and "Spark standalone" in why
    assert "recommission" not in FrameworkDriver.__abstractmethods__
    assert {"job_command", "suspend_hooks", "opportunistic_worker", "observe", "metrics", "remove_nodes",
            "add_nodes", "deploy", "teardown", "load_input", "save_output", "restore_output"} \
        <= FrameworkDriver.__abstractmethods__


def test_a_shrink_mode_the_kind_does_not_offer_is_refused(monkeypatch):
    from fawkes.errors import FawkesError
    from fawkes.frameworks import base

    narrow = type("NarrowDriver", (base.FrameworkDriver,), {"kind": "narrow", "removal_modes": frozenset({"fp", "dp"})})
    monkeypatch.setattr(base, "driver_class", lambda kind: narrow)
    assert base.shrink_mode_for("narrow", "fp") == "fp" and base.shrink_mode_for("narrow") == "fp"
    with pytest.raises(FawkesError, match="not offered by framework kind 'narrow'"):
        base.shrink_mode_for("narrow", "suspend")


def test_spark_hdfs_job_command_and_hooks():
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver, ui_port
    from fawkes.ssh.shell import render

    spec = _spec()
    job = type("Job", (), {"id": 7, "argv": ["app.py", "{input}", "{output}", "{job}"], "input_path": "data.txt"})()
    launch = SparkHdfsDriver(None).job_command(spec, job, output="/output/7", driver_memory="1g", python="py3")
    assert list(launch.env) == ["JAVA_HOME", "SPARK_HOME"] and launch.env["SPARK_HOME"] == "/opt/spark"
    assert launch.argv[0] == "/opt/spark/bin/spark-submit"
    assert launch.argv[-4:] == ("app.py", "hdfs:///input/data.txt", "hdfs:///output/7", "7")
    assert f"spark.ui.port={ui_port(7)}" in launch.argv and "spark.port.maxRetries=0" in launch.argv
    assert SparkHdfsDriver(None).max_jobs(spec) is None  # the standard ports: no limit of the kind's
    hooks = SparkHdfsDriver.suspend_hooks("a", "/srv/f")
    assert render(hooks.pid) == ("/bin/sh /srv/f/clusters/a/bin/fawkes-daemon.sh status worker"
                                 " | awk '$2 == \"running\" {print $3}'")
    assert render(hooks.wipe) == ("if [ -f /srv/f/clusters/a/bin/fawkes-daemon.sh ]; then "
                                  "/bin/sh /srv/f/clusters/a/bin/fawkes-daemon.sh wipe; fi")


def test_spark_job_drivers_listen_in_the_clusters_port_block(monkeypatch):
    """With a block of its own, a job driver's UI takes the first free job port of the block (Spark tries
    each of them), the kind runs as many jobs at once as there are such ports, and the sampler reads every
    job port of the block: a free one is no error, none answering while jobs run is one."""
    import dataclasses

    from fawkes.errors import FawkesError
    from fawkes.frameworks import metrics as M
    from fawkes.frameworks.render import PORT_BLOCK, cluster_ports, job_ports
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver

    spec = dataclasses.replace(_spec(), options={"port_range": "30000-30099"}, port_slot=2)
    ports = job_ports(spec)
    assert ports == range(30053, 30060) and 30040 + PORT_BLOCK == ports.stop
    assert not set(ports) & set(cluster_ports(spec).values())  # apart from every daemon's port
    job = type("Job", (), {"id": 7, "argv": ["app.py"], "input_path": None})()
    drv = SparkHdfsDriver(None)
    argv = drv.job_command(spec, job, output="/output/7").argv
    assert "spark.ui.port=30053" in argv and "spark.port.maxRetries=6" in argv and drv.max_jobs(spec) == 7
    asked = []

    def answer(url):
        asked.append(url)
        if ":30055/" not in url:
            raise FawkesError(f"{url}: connection refused")
        return [{"id": "app-1"}] if url.endswith("/applications") else []

    monkeypatch.setattr(drv, "_http_json", answer)
    monkeypatch.setattr(drv, "master_state", lambda c: None)
    monkeypatch.setattr(drv, "hdfs_state", lambda c: None)
    monkeypatch.setattr(drv, "datanodes", lambda c: None)
    monkeypatch.setattr(M, "spark_hdfs_sample", lambda *a, **kw: (a[4], kw["errors"]))
    by_app, errors = drv.metrics(spec, jobs=[7])
    assert list(by_app) == ["app-1"] and errors == []
    # drivers take the lowest free job ports: asked in order, up to the last running job's driver
    assert sorted({int(u.split(":")[2].split("/")[0]) for u in asked}) == [30053, 30054, 30055]
    asked.clear()
    drv.metrics(spec, jobs=[7, 8])  # a second job: its driver is still to be found, every port is asked
    assert sorted({int(u.split(":")[2].split("/")[0]) for u in asked}) == list(ports)
    asked.clear()
    assert drv.metrics(spec, jobs=[]) == ({}, []) and asked == []  # no job: no request
    monkeypatch.setattr(drv, "_http_json", lambda url: (_ for _ in ()).throw(FawkesError("refused")))
    by_app, errors = drv.metrics(spec, jobs=[7])
    assert errors == ["cluster a: no job driver UI answered on ports 30053-30059 of 10.9.0.11"]


def test_spark_hdfs_observe_says_whether_a_node_is_being_decommissioned(monkeypatch):
    from fawkes.errors import FawkesError
    from fawkes.frameworks import metrics as M
    from fawkes.frameworks.spark_hdfs import SparkHdfsDriver
    from fawkes.ssh.executor import Result

    class Ex:
        def run_each(self, commands, timeout=None):
            return {h: Result(h, True, 0, "datanode running 1\nworker running 2\n", "", None, 0.0) for h in commands}

    spec, drv = _spec(), SparkHdfsDriver(Ex())
    monkeypatch.setattr(drv, "master_state", lambda c: (_ for _ in ()).throw(FawkesError("master away")))

    def info(state):
        return M.NameNodeInfo(False, {a: M.DataNodeInfo(a, a, state, 0, 0, 0, 0, 0) for a in ("10.9.0.11", "10.9.0.12")})

    got = {}
    for state in ("Decommission In Progress", "In Service", "Decommissioned", None):
        if state is None:
            monkeypatch.setattr(drv, "datanodes", lambda c: (_ for _ in ()).throw(FawkesError("namenode away")))
        else:
            monkeypatch.setattr(drv, "datanodes", lambda c, s=state: info(s))
        f = drv.observe(spec, ["h2", "h3"])
        got[state] = (f["h2"].decommissioning, f["h2"].decommissioned, f["h3"].decommissioning, f["h3"].decommissioned)
    assert got == {"Decommission In Progress": (True, False, False, True), "In Service": (False, False, False, True),
                   "Decommissioned": (False, True, False, True), None: (None, False, False, True)}
