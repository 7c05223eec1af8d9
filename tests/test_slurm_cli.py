"""CLI inputs around SLURM: `fawkes lab slurm` with bad lab directories, `inventory from-slurm`
inside an allocation (no lab, no root needed)."""

from __future__ import annotations

import os

import pytest
import yaml

from tests.conftest import run_cli


@pytest.mark.parametrize("sub", [("lab", "slurm", "status"), ("lab", "slurm", "up")])
def test_lab_slurm_bad_dirs_one_line_exit_2(tmp_path, sub):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (tmp_path / "file").write_text("x")
    for d in ("/dev/null", str(fifo), str(tmp_path / "file"), str(tmp_path / "missing"), f"{tmp_path}/a\nb",
              f"{tmp_path}/a b"):
        r = run_cli(*sub, "--dir", d)
        assert r.returncode == 2, (d, r.stderr)
        assert r.stderr.count("\n") == 1 and r.stderr.startswith("fawkes: error: no lab in"), r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo", "file"]  # nothing created


def test_from_slurm_inside_an_allocation_needs_no_flags(tmp_path):
    env = {"SLURM_JOB_NODELIST": "h[1-3],g7", "SLURM_JOB_CPUS_PER_NODE": "2(x3),1"}
    r = run_cli("inventory", "from-slurm", env=env)
    assert r.returncode == 0, r.stderr
    inv = yaml.safe_load(r.stdout)
    assert [(h["name"], h["cores"]) for h in inv["hosts"]] == [("h1", 2), ("h2", 2), ("h3", 2), ("g7", 1)]


def test_from_slurm_an_explicit_nodelist_does_not_take_the_allocations_cpus():
    """--nodelist names other nodes than the allocation's: its CPU counts do not apply to them."""
    env = {"SLURM_JOB_NODELIST": "h[1-3]", "SLURM_JOB_CPUS_PER_NODE": "2(x3)"}
    r = run_cli("inventory", "from-slurm", "--nodelist", "n[1-5]", env=env)
    assert r.returncode == 0, r.stderr
    assert [h.get("cores") for h in yaml.safe_load(r.stdout)["hosts"]] == [None] * 5
    r = run_cli("inventory", "from-slurm", "--nodelist", "n[1-5]", "--cpus-per-node", "4(x5)", env=env)
    assert [h["cores"] for h in yaml.safe_load(r.stdout)["hosts"]] == [4] * 5
    # without --nodelist, an explicit --cpus-per-node still goes with the allocation's nodes
    r = run_cli("inventory", "from-slurm", "--cpus-per-node", "8(x3)", env=env)
    assert [(h["name"], h["cores"]) for h in yaml.safe_load(r.stdout)["hosts"]] == [("h1", 8), ("h2", 8), ("h3", 8)]
