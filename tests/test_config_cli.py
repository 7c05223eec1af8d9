"""``fawkes config reference|example|check`` (issue 30, item 4): docs/config.md is generated from the
schema, the example passes the check, and the check refuses bad values in one line creating nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from fawkes.config import ClusterConfig, CoordinatorConfig, MetricsConfig, PoolConfig, RetentionConfig
from fawkes.config_doc import EXAMPLE, reference_markdown

try:
    from test_cli_store import REPO, fawkes, ok, refused
except ImportError:
    from tests.test_cli_store import REPO, fawkes, ok, refused

INVENTORY = "version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1, work_dir: /w}\n"


def test_committed_reference_is_what_the_schema_generates():
    committed = (REPO / "docs" / "config.md").read_text()
    assert committed == reference_markdown(), (
        "docs/config.md is stale: regenerate it with 'python3 -m fawkes.config_doc > docs/config.md'")


def test_reference_lists_every_field_with_its_description_default_and_bounds():
    md = reference_markdown()
    for prefix, model in [("", CoordinatorConfig), ("metrics.", MetricsConfig), ("retention.", RetentionConfig),
                          ("pool.", PoolConfig), ("clusters.<name>.", ClusterConfig)]:
        for name, f in model.model_fields.items():
            if f.exclude:
                continue
            assert f.description, f"{prefix}{name} has no description"
            assert f"| `{prefix}{name}` |" in md
    row = next(line for line in md.splitlines() if line.startswith("| `period` |"))
    assert "| 60 |" in row and ">= 1, <= 31536000, finite" in row
    assert "| `metrics.port` | integer | 9464 | >= 0, <= 65535 |" in md
    assert ok(fawkes("config", "reference")) == md


def _dir(tmp_path: Path, config: str) -> Path:
    (tmp_path / "inventory.yaml").write_text(INVENTORY)
    (tmp_path / "config.yaml").write_text(config)
    return tmp_path / "config.yaml"


def test_example_passes_the_check_and_the_check_creates_nothing(tmp_path):
    text = ok(fawkes("config", "example"))
    assert text == EXAMPLE
    cfg = _dir(tmp_path, text)
    out = ok(fawkes("config", "check", str(cfg)))
    assert out.startswith(f"OK {cfg}:") and "inventory" in out and "(1 hosts)" in out
    summary = json.loads(ok(fawkes("config", "check", str(cfg), "--json")))
    assert summary["ok"] is True and summary["hosts"] == 1 and summary["policy"] == "td-damped"
    assert summary["state"].endswith(str(tmp_path / "fawkes.db"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "inventory.yaml"]
    # every top-level key of the schema appears in the example (set, or commented out)
    for name, f in CoordinatorConfig.model_fields.items():
        if not f.exclude:
            assert f"\n{name}:" in "\n" + text or f"\n# {name}:" in "\n" + text, name


@pytest.mark.parametrize("line, message", [
    ("period: .nan", "period"),
    ("period: .inf", "period"),
    ("host_grace: -1", "host_grace"),
    ("parallel_operations: 0", "parallel_operations"),
    ("parallel_operations: 1000000000000000000000000000000", "parallel_operations"),
    ("parallel_operations: 2.5", "parallel_operations"),
    ("retention: {decisions_keep: 1000000000000000000000000000000}", "retention.decisions_keep"),
    ("metrics: {port: 1000000000000000000000000000000}", "metrics.port"),
    ("timeouts: {op: -1}", "timeouts.op"),
    ('policy: "td-tc\\n"', "policy"),
    ('save_to: "/srv/a\\0b"', "save_to"),
    ('state: "sqlite:///x\\0y"', "state"),
    ("inventory: missing.yaml", "missing.yaml"),
    ("policy: no-such-preset", "no-such-preset"),
    ("save_to: /w/clusters/x", "which a cluster's teardown wipes"),
])
def test_bad_values_are_refused_in_one_line_creating_nothing(tmp_path, capsys, line, message):
    """In process (the subprocess path is the same main(): see the tests below)."""
    from fawkes.cli import main

    base = "state: s.db\n" + ("" if line.startswith("inventory:") else "inventory: inventory.yaml\n")
    cfg = _dir(tmp_path, f"{base}{line}\n")
    for extra in ([], ["--json"]):
        assert main(["config", "check", str(cfg), *extra]) == 2
        out, err = capsys.readouterr()
        lines = err.strip().splitlines()
        assert out == "" and len(lines) == 1 and lines[0].startswith("fawkes: error: ") and message in lines[0], err
        assert str(cfg) in lines[0] or message in ("missing.yaml",), err  # names the file
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "inventory.yaml"]


def test_the_file_itself_fifo_directory_missing_nul_newline(tmp_path):
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    refused(fawkes("config", "check", str(fifo)), "not a regular file")
    refused(fawkes("config", "check", str(tmp_path)), str(tmp_path))
    refused(fawkes("config", "check", str(tmp_path / "none.yaml")), "none.yaml")
    refused(fawkes("config", "check", "a\nb.yaml"), "control character")
    refused(fawkes("config", "check", ""), "control character")
    r = fawkes("config", "check")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fifo.yaml"]


def test_an_inventory_that_is_a_fifo_and_a_state_that_is_not_ours(tmp_path):
    os.mkfifo(tmp_path / "inv.fifo")
    cfg = _dir(tmp_path, "state: s.db\ninventory: inv.fifo\n")
    refused(fawkes("config", "check", str(cfg)), "not a regular file")
    (tmp_path / "s.db").write_text("not sqlite")
    cfg.write_text("state: s.db\ninventory: inventory.yaml\n")
    refused(fawkes("config", "check", str(cfg)), "not a SQLite database")
    assert (tmp_path / "s.db").read_text() == "not sqlite"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "inv.fifo", "inventory.yaml", "s.db"]


NONROOT = "version: 1\ndefaults: {user: fawkes-svc}\nhosts:\n  - {name: u1, address: 10.9.0.1, work_dir: /w}\n" \
          "  - {name: u2, address: 10.9.0.2, work_dir: /w, user: root}\n"


@pytest.mark.parametrize("line, field, ok_as_root", [
    ("shrink_mode: suspend", "shrink_mode", True),
    ("opportunistic: {default: accept}", "opportunistic", True),
    ("opportunistic: {clusters: {etl: accept}}", "opportunistic", True),
    ("shrink_mode: graceful", None, True),
    ("shrink_mode: fp", None, True),
])
def test_what_needs_root_on_the_hosts_is_refused_for_a_service_user(tmp_path, capsys, line, field, ok_as_root):
    """Issue 30 item 2: suspend and UBIS' watchdog need root (cgroups) on the hosts; a non-root hosts' user
    is refused at config check in one line naming the key and the hosts, not degraded with a warning."""
    from fawkes.cli import main

    cfg = _dir(tmp_path, f"state: s.db\ninventory: inventory.yaml\n{line}\n")
    (tmp_path / "inventory.yaml").write_text(NONROOT)
    rc = main(["config", "check", str(cfg)])
    out, err = capsys.readouterr()
    if field is None:
        assert rc == 0, err
    else:
        lines = err.strip().splitlines()
        assert rc == 2 and out == "" and len(lines) == 1, err
        assert field in lines[0] and "u1 log in as fawkes-svc, not root" in lines[0] and "u2" not in lines[0], err
    (tmp_path / "inventory.yaml").write_text(NONROOT.replace("user: fawkes-svc", "user: root"))
    assert (main(["config", "check", str(cfg)]) == 0) is ok_as_root, capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "inventory.yaml"]


def test_the_coordinator_refuses_suspend_for_a_service_user_before_writing(tmp_path, capsys):
    """``coordinator run`` makes the same check before the state or its lock exists."""
    from fawkes.cli import main

    cfg = _dir(tmp_path, "state: s.db\ninventory: inventory.yaml\nshrink_mode: suspend\n")
    (tmp_path / "inventory.yaml").write_text(NONROOT)
    assert main(["coordinator", "run", "--config", str(cfg), "--no-metrics"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "shrink_mode" in lines[0] and "not root" in lines[0], lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml", "inventory.yaml"]
