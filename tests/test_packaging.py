"""`pip install .` ships templates/, policies/ and the demo app; lab-only heavyweights stay optional."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_wheel_ships_data_and_keeps_pyspark_optional(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("fawkes_provisioner-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for shipped in ("fawkes/_data/templates/spark-hdfs/spark-env.sh.j2", "fawkes/_data/templates/hadoop3/yarn-site.xml.j2",
                    "fawkes/_data/policies/td-tc.yaml", "fawkes/apps/wordcount.py", "fawkes/mechanism/decide.py",
                    "fawkes/coordinator/dashboard_assets/index.html.j2",
                    "fawkes/coordinator/dashboard_assets/dashboard.js",
                    "fawkes/coordinator/dashboard_assets/dashboard.css"):
        assert shipped in names, shipped
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    runtime = [ln for ln in requires if "extra ==" not in ln]
    assert not any("pyspark" in ln for ln in runtime), runtime
    assert any("pyspark" in ln and "extra == 'lab'" in ln.replace('"', "'") for ln in requires)


def test_wheel_without_extras_runs_every_non_lab_command(tmp_path):
    """A clean venv, the wheel without extras (its dependencies from the index): simulate, policy,
    trace, inventory check / from-slurm and render run (the simulator's numpy was undeclared)."""
    import json
    import os

    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(REPO)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("fawkes_provisioner-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=600)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(wheel)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV", "FAWKES"))}
    env["FAWKES_STATE"] = str(tmp_path / "state.db")

    def fawkes(*args: str) -> str:
        r = subprocess.run([py, "-m", "fawkes", *args], capture_output=True, text=True, timeout=300,
                           cwd=tmp_path, env=env)
        assert r.returncode == 0, (args, r.stderr[-2000:])
        return r.stdout

    assert "TD" in fawkes("simulate", "B", "--seeds", "1", "--policy", "TD")
    assert "td-damped" in fawkes("policy", "list") and "shrink_after_ticks" in fawkes("policy", "show", "td-damped")
    logs = REPO / "tests" / "fixtures" / "eventlogs"
    fawkes("trace", "from-spark", f"etl={logs / 'etl'}", "-o", str(tmp_path / "t.csv"))
    assert ",etl,wordcount," in (tmp_path / "t.csv").read_text()
    inv = tmp_path / "slurm.yaml"
    fawkes("inventory", "from-slurm", "--nodelist", "n[1-3]", "--cpus-per-node", "4(x3)", "-o", str(inv))
    assert fawkes("inventory", "check", str(inv))
    setup = ("from fawkes.store import Store; s = Store('sqlite:///state.db'); "
             "s.register_framework('f', 'spark-hdfs', spark_home='/opt/spark', hdfs_jars='/opt/hdfs'); "
             "s.sync_hosts([{'name': n, 'address': '127.0.0.1', 'cores': 4} for n in ('n1', 'n2', 'n3')]); "
             "s.request_cluster('a', framework='f', min_core=2); s.transition_cluster('a', 'deploying'); "
             "[s.allocate_node('a', h, 'core') for h in ('n1', 'n2')]")
    subprocess.run([py, "-c", setup], check=True, cwd=tmp_path, env=env, timeout=600)
    out = json.loads(fawkes("render", "a", "-i", str(inv), "--json"))
    assert set(out) == {"n1", "n2"} and any("spark-env.sh" in f for f in out["n1"]["files"])
