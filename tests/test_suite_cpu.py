"""bench/suite_cpu.py's reading of the per-test CPU file the suite writes with FAWKES_TEST_CPU
(tests/conftest.py), and its refusals: one line, exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = [sys.executable, str(ROOT / "bench" / "suite_cpu.py")]


def test_a_pytest_run_records_each_tests_cpu_and_the_tool_sums_it_by_module(tmp_path):
    (tmp_path / "test_burn.py").write_text(
        "import subprocess, sys\n"
        "def test_spin():\n    sum(i * i for i in range(3_000_000))\n"
        "def test_child():\n    subprocess.run([sys.executable, '-c', 'sum(i * i for i in range(3_000_000))'], check=True)\n"
        "def test_idle():\n    pass\n")
    out = tmp_path / "cpu.jsonl"
    env = {**os.environ, "FAWKES_TEST_CPU": str(out)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "tests.conftest",
                        "--rootdir", str(tmp_path), str(tmp_path / "test_burn.py")],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {json.loads(line)["test"].split("::")[1]: json.loads(line) for line in out.read_text().splitlines()}
    assert set(rows) == {"test_spin", "test_child", "test_idle"}
    assert rows["test_spin"]["self_s"] > 0.1 and rows["test_spin"]["children_s"] < 0.05
    assert rows["test_child"]["children_s"] > 0.1  # the waited child's CPU, not pytest's
    assert rows["test_idle"]["self_s"] + rows["test_idle"]["children_s"] < 0.1
    t = subprocess.run([*TOOL, "--tests", str(out), "--top", "2"], capture_output=True, text=True, timeout=60)
    assert t.returncode == 0, t.stderr
    lines = t.stdout.splitlines()
    assert lines[0].startswith("3 tests, ")
    assert lines[2].endswith("test_burn.py") and lines[2].split()[4] == "3"
    assert sum(1 for line in lines if "::test_" in line) == 2  # --top 2


@pytest.mark.parametrize("content, said", [
    ("not json\n", "line 1: not a test's CPU record"),
    ('{"test": "t", "self_s": NaN, "children_s": 0, "wall_s": 0}\n', "line 1: a time out of range"),
    ('{"test": "t", "self_s": 1, "children_s": -1, "wall_s": 0}\n', "line 1: a time out of range"),
    ('{"test": "t", "self_s": 1e30, "children_s": 0, "wall_s": 0}\n', "line 1: a time out of range"),
    ('{"test": "t", "self_s": 1, "wall_s": 0}\n', "line 1: not a test's CPU record"),
])
def test_a_bad_file_is_refused_in_one_line(tmp_path, content, said):
    f = tmp_path / "cpu.jsonl"
    f.write_text(content)
    r = subprocess.run([*TOOL, "--tests", str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == f"suite_cpu.py: --tests {f}: {said}"


def test_a_fifo_a_missing_file_and_two_modes_are_refused(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for args, said in [(["--tests", str(fifo)], f"--tests {fifo}: not a regular file"),
                       (["--tests", str(tmp_path / "nope")], f"--tests {tmp_path / 'nope'}: not a regular file"),
                       (["--tests", str(fifo), "--read", str(fifo)], "give one of --read FILE, --tests FILE or -- COMMAND")]:
        r = subprocess.run([*TOOL, *args], capture_output=True, text=True, timeout=60)
        assert (r.returncode, r.stderr.strip()) == (2, f"suite_cpu.py: {said}"), r.stderr
