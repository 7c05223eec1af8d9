"""``fawkes framework kinds`` and the per-kind options of ``fawkes framework add`` (issue 23), as real
subprocesses; the kind ``spark`` (shared storage) on the lab is in tests/test_conformance_lab.py."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from fawkes.errors import FawkesError
from fawkes.frameworks.base import driver_class
from fawkes.mechanism import Role, Settings


def test_kinds_lists_roles_modes_signals_options_and_liveness():
    r = run_cli("framework", "kinds", "--json")
    assert r.returncode == 0, r.stderr
    rows = {k["kind"]: k for k in json.loads(r.stdout)}
    assert {"spark", "spark-hdfs", "hadoop3"} <= set(rows)
    assert rows["spark"]["roles"] == ["core", "transient"] and "dp" not in rows["spark"]["removal_modes"]
    assert rows["spark"]["options"] == ["spark_home", "shared_dir"] and "stored_bytes" not in rows["spark"]["signals"]
    assert rows["spark-hdfs"]["roles"] == ["core", "transient-core", "transient"]
    assert {"fp", "dp"} <= set(rows["spark-hdfs"]["removal_modes"]) and "stored_bytes" in rows["spark-hdfs"]["signals"]
    assert rows["hadoop3"]["live"] is False and "render-only" in rows["hadoop3"]["note"]
    text = run_cli("framework", "kinds")
    assert text.returncode == 0 and "a transient-core node would be a transient one" in text.stdout


@pytest.mark.parametrize("args, message", [
    (["--kind", "spark", "--spark-home", "/opt/spark"], "kind spark needs --shared-dir"),
    (["--kind", "spark", "--spark-home", "/opt/spark", "--shared-dir", "/s", "--hdfs-jars", "/j"],
     "--hdfs-jars is not an option of kind spark (its options: --spark-home, --shared-dir)"),
    (["--kind", "spark-hdfs", "--spark-home", "/opt/spark", "--shared-dir", "/s"],
     "--shared-dir is not an option of kind spark-hdfs"),
    (["--kind", "spark", "--spark-home", "/opt/spark", "--shared-dir", "relative/dir"],
     "shared dir must be an absolute path without spaces"),
    (["--kind", "spark", "--spark-home", "/opt/spark", "--shared-dir", "/a\nb"],
     "shared dir must be an absolute path without spaces"),
    (["--kind", "spark", "--spark-home", "/opt/spark", "--shared-dir", "/a b"],
     "shared dir must be an absolute path without spaces"),
])
def test_bad_kind_options_are_refused_and_nothing_is_written(tmp_path, args, message):
    env = {"FAWKES_STATE": str(tmp_path / "state.db")}
    r = run_cli("framework", "add", "x", *args, "--no-check", env=env)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
    assert not list(tmp_path.iterdir())


def test_a_nul_byte_in_a_path_is_refused():
    """(A FIFO or a missing directory is a host's matter: the check on the hosts says
    "shared dir ...: not a writable directory", SparkDriver.check_framework.)"""
    from fawkes.frameworks.spec import FrameworkPaths

    for bad in ({"shared_dir": "/a\0b"}, {"spark_home": "/opt/\0spark", "shared_dir": "/s"}):
        with pytest.raises(FawkesError, match="must be an absolute path without spaces"):
            FrameworkPaths("x", "spark", **{"spark_home": "/opt/spark", **bad})


def test_spark_kind_registers_with_a_shared_dir(tmp_path):
    env = {"FAWKES_STATE": str(tmp_path / "state.db")}
    r = run_cli("framework", "add", "shared", "--kind", "spark", "--spark-home", "/opt/spark", "--shared-dir",
                "/srv/shared", "--no-check", env=env)
    assert r.returncode == 0, r.stderr
    show = json.loads(run_cli("framework", "show", "shared", "--json", env=env).stdout)
    assert show["kind"] == "spark" and show["shared_dir"] == "/srv/shared" and show["hdfs_jars"] is None


def test_a_grow_type_or_a_policy_a_kind_cannot_serve_is_refused_naming_the_cluster(tmp_path):
    from fawkes.coordinator.service import check_kinds
    from fawkes.store import Store

    assert Role.TC not in driver_class("spark").roles and Role.TC in driver_class("spark-hdfs").roles
    with Store(f"sqlite:///{tmp_path / 's.db'}") as s:
        s.register_framework("sh", "spark", spark_home="/opt/spark", shared_dir="/srv/shared")
        s.register_framework("hd", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        s.request_cluster("etl", framework="hd", min_core=1)
        check_kinds(s, Settings(grow_type="transient-core"))  # spark-hdfs has TC nodes
        s.request_cluster("bi", framework="sh", min_core=1)
        check_kinds(s, Settings(grow_type="transient"))
        with pytest.raises(FawkesError, match=r"^cluster bi: its kind spark has no transient-core nodes.*"
                                              r"use a preset with grow_type: transient \(td-damped-tr, td-tr\)$"):
            check_kinds(s, Settings(grow_type="transient-core"))
        from fawkes.presets import loop_policy
        for name in ("td-damped-tr", "td-tr"):  # the presets the line names serve every kind
            check_kinds(s, loop_policy(name)[0])
        for ok in ("TD", "PU", "JD", "DD", "JS", "JT", "TT", "EQ", "None"):  # tasks, slots, or fawkes' own
            check_kinds(s, Settings(policy=ok, grow_type="transient"))
        for bad in ("DU", "RU"):  # bytes stored or written: kind spark stores nothing on its nodes
            with pytest.raises(FawkesError, match=rf"^cluster bi: policy {bad} weighs stored_bytes or "
                                                  r"written_bytes, which kind spark does not measure"):
                check_kinds(s, Settings(policy=bad, grow_type="transient"))
        s.request_release("bi")
        check_kinds(s, Settings(policy="DU", grow_type="transient-core"))  # spark-hdfs feeds DU
