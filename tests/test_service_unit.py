"""The shipped systemd unit and scripts/setup-service (issue 30, item 1; docs/install.md).

The unit runs the venv's fawkes as the service user, is not restarted after bad input (exit 2), is
reloaded by SIGHUP; ``systemd-analyze verify`` accepts it once its ExecStart exists: a venv made here
with this checkout installed in it, whose ``fawkes`` runs.
"""

from __future__ import annotations

import configparser
import os
import shutil
import subprocess
import sys
from pathlib import Path

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

REPO = Path(__file__).resolve().parent.parent
UNIT = REPO / "scripts" / "fawkes-coordinator.service"
SETUP = REPO / "scripts" / "setup-service"


def parse(text: str) -> configparser.ConfigParser:
    p = configparser.ConfigParser(interpolation=None, strict=True, delimiters=("=",), comment_prefixes=("#", ";"))
    p.optionxform = str  # systemd keys are case-sensitive
    p.read_string(text)
    return p


def test_the_shipped_unit_runs_the_venvs_fawkes_and_is_not_restarted_after_bad_input():
    u = parse(UNIT.read_text())
    assert set(u.sections()) == {"Unit", "Service", "Install"}
    s = u["Service"]
    exe, *args = s["ExecStart"].split()
    assert exe == "/opt/fawkes/venv/bin/fawkes" and args[:2] == ["coordinator", "run"]
    assert args[2:] == ["--config", "/etc/fawkes/config.yaml"]
    assert s["User"] == s["Group"] == "fawkes" and s["Restart"] == "on-failure"
    assert s["RestartPreventExitStatus"] == "2"  # bad config: the one line is in the journal, no restart loop
    assert s["ExecReload"] == "/bin/kill -HUP $MAINPID"  # fawkes inventory apply / systemctl reload
    assert s["ReadWritePaths"] == "/var/lib/fawkes" and s["Environment"]  # FAWKES_HOME: the state's default home
    assert u["Install"]["WantedBy"] == "multi-user.target"


def test_setup_service_refuses_bad_arguments():
    for args in (["--prefix", "relative"], ["--prefix", "/a b"], ["--prefix", "/a/../b"], ["--prefix", "/a;rm"],
                 ["--user", "Bad User"], ["--user", "x\ny"], ["--bogus"]):
        r = subprocess.run(["bash", str(SETUP), *args, "--print-unit"], capture_output=True, text=True, timeout=60,
                           check=False)
        assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1, (args, r.stderr)


def test_the_unit_for_a_venv_verifies_and_its_fawkes_runs(tmp_path):
    r = subprocess.run(["bash", str(SETUP), "--prefix", str(tmp_path / "opt"), "--user", "root", "--print-unit"],
                       capture_output=True, text=True, timeout=60, check=True)
    u = parse(r.stdout)
    exe = u["Service"]["ExecStart"].split()[0]
    assert exe == f"{tmp_path}/opt/venv/bin/fawkes" and u["Service"]["User"] == "root"
    # the venv the guide makes (python3 -m venv; pip install .), here without the index: its dependencies
    # from this interpreter's site-packages
    venv = tmp_path / "opt" / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    pip = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps",
                          "--disable-pip-version-check", str(REPO)], capture_output=True, text=True, timeout=900,
                         check=False)
    assert pip.returncode == 0, pip.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "FAWKES"))}
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path,
                             check=False)
    assert version.returncode == 0 and "fawkes" in version.stdout, version.stderr
    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import fawkes; print(fawkes.__file__)"],
                           capture_output=True, text=True, timeout=600, env=env, cwd=tmp_path, check=True)
    assert where.stdout.startswith(str(venv)), where.stdout  # the venv's copy, not this checkout
    meta = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "show", "fawkes-provisioner"],
                          capture_output=True, text=True, timeout=600, env=env, check=False)
    assert meta.returncode == 0 and "Name: fawkes-provisioner" in meta.stdout
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        unavailable("systemd-analyze is missing (apt-get install systemd)")  # fails under CI, skips elsewhere
    unit = tmp_path / "fawkes-coordinator.service"
    unit.write_text(r.stdout)
    v = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, timeout=600, check=False)
    assert v.returncode == 0, v.stderr
