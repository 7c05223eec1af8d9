"""Inventory format, checks (file/line/field, exit 2, no traceback), probe on the lab."""

from __future__ import annotations

import pytest

from fawkes.errors import ConfigError
from fawkes.inventory import check_inventory, load_inventory
from tests.conftest import REPO, run_cli

GOOD = """\
version: 1
defaults:
  user: fawkes
  key_file: id_test
  cores: 8
  memory: 16GiB
groups:
  core: [a1, a2]
hosts:
  - name: a1
    address: 192.0.2.1
    labels: [core, ssd]
    rack: r1
  - name: a2
    address: 192.0.2.2
    port: 2222
    memory: 4096
    disks: [/data1, {path: /data2, size_gb: 100}]
  - name: a3
    address: node3.example.org
    user: other
    work_dir: /srv/fawkes
"""


@pytest.fixture
def inv_dir(tmp_path):
    (tmp_path / "id_test").write_text("not really a key\n")
    return tmp_path


def write(d, text, name="inv.yaml"):
    p = d / name
    p.write_text(text)
    return p


def test_load_applies_defaults(inv_dir):
    inv = load_inventory(write(inv_dir, GOOD))
    a1, a2, a3 = inv.hosts
    assert (a1.user, a1.port, a1.cores, a1.memory_mb, a1.labels, a1.rack) == ("fawkes", 22, 8, 16384,
                                                                              ("core", "ssd"), "r1")
    assert (a2.port, a2.memory_mb, [d.path for d in a2.disks]) == (2222, 4096, ["/data1", "/data2"])
    assert a1.key_file == inv_dir / "id_test"
    assert (a3.user, a3.work_dir, a1.work_dir) == ("other", "/srv/fawkes", "/var/lib/fawkes")
    assert [h.name for h in inv.select(["core"])] == ["a1", "a2"]
    assert [t.address for t in inv.targets(["a3"])] == ["node3.example.org"]


@pytest.mark.parametrize("old,new,line,field,words", [
    ("  - name: a2\n", "  - name: a1\n", 14, "hosts[1].name", "duplicate host name 'a1'"),
    ("    address: 192.0.2.2\n", "    address: 192.0.2.1\n", 15, "hosts[1].address", "duplicate address"),
    ("    port: 2222\n", "    port: 0\n", 16, "hosts[1].port", "greater than or equal to 1"),
    ("    port: 2222\n", "    port: 65536\n", 16, "hosts[1].port", "less than or equal to 65535"),
    ("    port: 2222\n", "    port: '22'\n", 16, "hosts[1].port", "integer"),
    ("  key_file: id_test\n", "  key_file: missing_key\n", 4, "defaults.key_file", "not found"),
    ("  - name: a3\n", "  - name: 'a3; rm -rf /'\n", 19, "hosts[2].name", "not a safe identifier"),
    ("  - name: a3\n", "  - name: -a3\n", 19, "hosts[2].name", "not a safe identifier"),
    ("    labels: [core, ssd]\n", "    labels: [core, '$(reboot)']\n", 12, "hosts[0].labels[1]",
     "not a safe identifier"),
    ("    rack: r1\n", "    rack: r 1\n", 13, "hosts[0].rack", "not a safe identifier"),
    ("    rack: r1\n", "    rakc: r1\n", 13, "hosts[0].rakc", "unknown field"),
    ("    address: node3.example.org\n", "    address: 'node3 example'\n", 20, "hosts[2].address",
     "neither an IP address nor a valid host name"),
    ("  core: [a1, a2]\n", "  core: [a1, zz]\n", 8, "groups.core[1]", "unknown host 'zz'"),
    ("    work_dir: /srv/fawkes\n", "    work_dir: srv\n", 22, "hosts[2].work_dir", "not an absolute path"),
    ("  memory: 16GiB\n", "  memory: 16 parsecs\n", 6, "defaults.memory", "memory"),
])
def test_check_names_file_line_field(inv_dir, old, new, line, field, words):
    assert old in GOOD
    p = write(inv_dir, GOOD.replace(old, new))
    problems = check_inventory(p)
    assert problems, "expected a problem"
    e = next((x for x in problems if x.field == field), problems[0])
    assert (e.file, e.line, e.field) == (str(p), line, field), str(e)
    assert words in e.detail
    with pytest.raises(ConfigError):
        load_inventory(p)


def test_all_problems_reported(inv_dir):
    text = GOOD.replace("  - name: a2\n", "  - name: a1\n").replace("    port: 2222\n", "    port: 99999\n")
    problems = check_inventory(write(inv_dir, text))
    assert [(e.line, e.field) for e in problems] == [(14, "hosts[1].name"), (16, "hosts[1].port")]


def test_cli_check_ok_and_errors(inv_dir):
    p = write(inv_dir, GOOD)
    r = run_cli("inventory", "check", str(p))
    assert r.returncode == 0 and "ok (3 hosts, 1 groups)" in r.stdout
    bad = write(inv_dir, GOOD.replace("    port: 2222\n", "    port: 70000\n").replace("  - name: a3\n",
                                                                                     "  - name: a2\n"), "bad.yaml")
    before = bad.read_text()
    r = run_cli("inventory", "check", str(bad))
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines == [f"fawkes: error: {bad}:16: hosts[1].port: Input should be less than or equal to 65535",
                     f"fawkes: error: {bad}:19: hosts[2].name: duplicate host name 'a2' (also hosts[1])"]
    assert bad.read_text() == before


def test_cli_check_missing_and_broken_file(tmp_path):
    r = run_cli("inventory", "check", str(tmp_path / "none.yaml"))
    assert r.returncode == 2 and "no such file" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("inventory", "check", str(write(tmp_path, "hosts: [\n")))
    assert r.returncode == 2 and "invalid YAML" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_shipped_examples_are_valid():
    for name in ("cluster-example.yaml", "lab-example.yaml"):
        assert check_inventory(REPO / "inventory" / name, check_files=False) == [], name


@pytest.mark.lab
def test_lab_inventory_and_probe(lab):
    inv = load_inventory(lab.inventory_path)
    assert [h.name for h in inv.hosts] == [h.name for h in lab.hosts]
    assert inv.known_hosts == lab.known_hosts and inv.strict_host_keys
    r = run_cli("inventory", "probe", str(lab.inventory_path), "-H", "h1", "-H", "h2", "-H", "h3", "-H", "h4")
    assert r.returncode == 0, r.stderr
    import os
    for h in ("h1", "h2", "h3", "h4"):
        assert h in r.stdout
    assert "h5" not in r.stdout
    assert f"{os.cpu_count()}" in r.stdout and "openjdk" in r.stdout.lower()


@pytest.mark.lab
def test_probe_reports_crashed_host(lab):
    from fawkes.inventory.probe import probe
    inv = load_inventory(lab.inventory_path)
    lab.crash("h8")
    try:
        seen = []
        res = probe(inv, inv.select(["h7", "h8"]), on_result=lambda p: seen.append(p.host), retries=0)
    finally:
        lab.revive("h8")
    assert sorted(seen) == ["h7", "h8"]
    assert res["h7"].ok and res["h7"].cores == __import__("os").cpu_count() and res["h7"].memory_mb > 100
    assert res["h7"].disk_free_mb > 0 and res["h7"].hostname == "h7"
    assert not res["h8"].ok and "refused" in res["h8"].error
