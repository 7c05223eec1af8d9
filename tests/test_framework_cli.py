"""``fawkes framework ...`` and ``fawkes render`` as real subprocesses, checked on the real SSH lab."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from fawkes.frameworks import dists


@pytest.fixture(scope="module")
def lab_dists():
    return dists.ensure_lab_dists()


def test_dists_json(lab_dists):
    r = run_cli("framework", "dists", "--json", "-q")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["spark_home"] == str(lab_dists.spark_home) and d["hdfs_version"] == "2.7.3"
    assert len(list((lab_dists.hdfs_home / "jars").glob("*.jar"))) >= 28


@pytest.mark.lab
def test_framework_registry_checked_on_hosts(lab, lab_dists, tmp_path):
    env = {"FAWKES_STATE": str(tmp_path / "state.db")}
    inv = str(lab.inventory_path)
    common = ["--kind", "spark-hdfs", "--spark-home", str(lab_dists.spark_home), "-i", inv]
    ok = run_cli("framework", "add", "lab", *common, "--hdfs-jars", str(lab_dists.hdfs_home), env=env)
    assert ok.returncode == 0, ok.stderr
    assert "ok on 8 host(s)" in ok.stderr
    again = run_cli("framework", "add", "lab", *common, "--hdfs-jars", str(lab_dists.hdfs_home), env=env)
    assert again.returncode == 2 and "already registered" in again.stderr
    missing = run_cli("framework", "add", "bad", *common, "--hdfs-jars", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 2 and "missing HDFS jars" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 2 and "Traceback" not in missing.stderr  # progress + error
    nojava = run_cli("framework", "add", "bad", *common, "--hdfs-jars", str(lab_dists.hdfs_home),
                     "--java-home", str(tmp_path), env=env)
    assert nojava.returncode == 2 and "java does not run" in nojava.stderr
    kind = run_cli("framework", "add", "bad", "--kind", "flink", "--spark-home", "/x", "--hdfs-jars", "/y", env=env)
    assert kind.returncode == 2 and "unknown framework kind" in kind.stderr
    lst = run_cli("framework", "list", "--json", env=env)
    assert [f["name"] for f in json.loads(lst.stdout)] == ["lab"]
    show = run_cli("framework", "show", "lab", "--json", env=env)
    assert json.loads(show.stdout)["hdfs_jars"] == str(lab_dists.hdfs_home)

    # fawkes render: a stored cluster on inventory hosts; prints configs, writes nothing
    from fawkes.config import open_store
    from fawkes.inventory.load import load_inventory

    invd = load_inventory(inv)
    with open_store(env["FAWKES_STATE"]) as st:
        st.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores or 1,
                        "memory_mb": h.memory_mb or 1024} for h in invd.hosts])
        st.request_cluster("demo", framework="lab", min_core=2)
        st.transition_cluster("demo", "deploying")
        for h, role in (("h1", "core"), ("h2", "core"), ("h3", "transient")):
            st.allocate_node("demo", h, role)
    before = {h.name: sorted(p.name for p in h.root.iterdir()) for h in lab.hosts}
    r = run_cli("render", "demo", "-i", inv, "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert set(out) == {"h1", "h2", "h3"} and out["h3"]["role"] == "transient"
    assert "SPARK_MASTER_HOST=" + lab.hosts[0].address in out["h3"]["files"]["conf/spark-env.sh"]
    one = run_cli("render", "demo", "-i", inv, "-H", "h2", env=env)
    assert one.stdout.startswith("### host h2") and "--- conf/hdfs-site.xml" in one.stdout
    assert {h.name: sorted(p.name for p in h.root.iterdir()) for h in lab.hosts} == before  # nothing written
    bad = run_cli("render", "demo", "-i", inv, "-H", "h9", env=env)
    assert bad.returncode == 2 and "has no host h9" in bad.stderr
    # a framework in use cannot be removed; an unused one can
    used = run_cli("framework", "remove", "lab", env=env)
    assert used.returncode == 2 and "in use" in used.stderr


@pytest.mark.lab
def test_framework_add_dask_options_checked(lab, tmp_path):
    """Kind dask needs no --spark-home; its --shared-dir and --python are checked: a relative path, a
    newline, a FIFO, a missing required option or another kind's option is refused with exit 2 and one
    line, and nothing is written (no state file); a good registration is listed with its paths."""
    import os

    from fawkes.errors import FawkesError
    from fawkes.frameworks.spec import FrameworkPaths

    state = tmp_path / "state.db"
    env = {"FAWKES_STATE": str(state)}
    inv = str(lab.inventory_path)
    shared = tmp_path / "shared"
    shared.mkdir()
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    cases = [
        (["--shared-dir", "relative/dir"], "absolute path without spaces"),
        (["--shared-dir", f"{shared}\nrm -rf /"], "absolute path without spaces"),
        (["--shared-dir", str(fifo)], "not a writable directory"),
        (["--shared-dir", str(shared), "--python", str(fifo)], "not an executable file"),
        (["--shared-dir", str(shared), "--python", "python3"], "absolute path without spaces"),
        (["--shared-dir", str(shared), "--python", "/bin/true\n"], "absolute path without spaces"),
        ([], "kind dask needs --shared-dir"),
        (["--shared-dir", str(shared), "--spark-home", "/opt/spark"], "--spark-home is not an option of kind dask"),
    ]
    for extra, msg in cases:
        r = run_cli("framework", "add", "dk", "--kind", "dask", "-i", inv, *extra, env=env)
        errors = [ln for ln in r.stderr.splitlines() if not ln.startswith("[framework]")]
        assert r.returncode == 2 and msg in r.stderr and len(errors) == 1, (extra, r.stderr)
        assert "Traceback" not in r.stderr and not state.exists(), extra
    with pytest.raises(FawkesError, match="absolute path without spaces"):  # NUL: no argv can carry it
        FrameworkPaths("dk", "dask", shared_dir=f"{shared}\x00x")
    nospark = run_cli("framework", "add", "sp", "--kind", "spark-hdfs", "--hdfs-jars", "/x", "--no-check", env=env)
    assert nospark.returncode == 2 and "kind spark-hdfs needs --spark-home" in nospark.stderr
    assert len(nospark.stderr.strip().splitlines()) == 1 and not state.exists()
    ok = run_cli("framework", "add", "dk", "--kind", "dask", "--shared-dir", str(shared), "-i", inv, env=env)
    assert ok.returncode == 0, ok.stderr
    assert "ok on 8 host(s)" in ok.stderr
    show = json.loads(run_cli("framework", "show", "dk", "--json", env=env).stdout)
    assert show["kind"] == "dask" and show["shared_dir"] == str(shared) and show["spark_home"] is None
    kinds = {k["kind"]: k for k in json.loads(run_cli("framework", "kinds", "--json").stdout)}
    assert kinds["dask"]["live"] is True and kinds["dask"]["removal_modes"] == ["fp", "graceful"]
    assert kinds["dask"]["options"] == ["shared_dir", "python"]
