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
    (wheel,) = tmp_path.glob("fawkes-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    for shipped in ("fawkes/_data/templates/spark-hdfs/spark-env.sh.j2", "fawkes/_data/templates/hadoop3/yarn-site.xml.j2",
                    "fawkes/_data/policies/td-tc.yaml", "fawkes/apps/wordcount.py", "fawkes/mechanism/decide.py"):
        assert shipped in names, shipped
    requires = [ln for ln in meta.splitlines() if ln.startswith("Requires-Dist:")]
    runtime = [ln for ln in requires if "extra ==" not in ln]
    assert not any("pyspark" in ln for ln in runtime), runtime
    assert any("pyspark" in ln and "extra == 'lab'" in ln.replace('"', "'") for ln in requires)
