"""The ``timeouts`` config section: defaults, values, refusals, and the way to the reconciler."""

from __future__ import annotations

from pathlib import Path

import pytest

from fawkes.config import CoordinatorConfig, TimeoutsConfig, load_config
from fawkes.errors import ConfigError
from fawkes.store.lifecycle import NODE_TIMEOUTS, NodeState
from tests.conftest import run_cli


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("FAWKES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FAWKES_CONFIG", raising=False)
    monkeypatch.delenv("FAWKES_STATE", raising=False)


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "coordinator.yaml"
    p.write_text(text)
    return p


def test_defaults_are_the_lifecycle_timeouts():
    t = CoordinatorConfig().timeouts
    assert (t.requested, t.provisioning, t.draining) == (
        NODE_TIMEOUTS[NodeState.REQUESTED], NODE_TIMEOUTS[NodeState.PROVISIONING], NODE_TIMEOUTS[NodeState.DRAINING])
    assert (t.op, t.drain, t.graceful) == (600.0, 60.0, 120.0)
    assert CoordinatorConfig().shrink_mode is None  # the framework kind decides: spark-hdfs fp (B-6)


def test_values_from_the_file(tmp_path):
    cfg = load_config(write(tmp_path, "timeouts:\n  requested: 30\n  provisioning: 90.5\n  draining: 7200\n"
                                      "  op: 300\n  drain: 15\n"))
    assert cfg.timeouts == TimeoutsConfig(requested=30, provisioning=90.5, draining=7200, op=300, drain=15)
    partial = load_config(write(tmp_path, "timeouts: {drain: 5}\n")).timeouts
    assert partial.drain == 5 and partial.provisioning == TimeoutsConfig().provisioning


@pytest.mark.parametrize("text, line, field, message", [
    ("timeouts:\n  provisioning: .nan\n", 2, "timeouts.provisioning", "finite number"),
    ("timeouts:\n  draining: .inf\n", 2, "timeouts.draining", "finite number"),
    ("timeouts:\n  op: -5\n", 2, "timeouts.op", "greater than 0"),
    ("timeouts:\n  drain: 0\n", 2, "timeouts.drain", "greater than 0"),
    ("timeouts:\n  requested: 1000000000000000000000000000000\n", 2, "timeouts.requested",
     "less than or equal to 2592000"),
    ("timeouts:\n  requested: 1e30\n", 2, "timeouts.requested", "valid number"),  # YAML 1.1: a string
    ("timeouts:\n  provisioning: '600'\n", 2, "timeouts.provisioning", "valid number"),
    ("timeouts:\n  provisioning: ten minutes\n", 2, "timeouts.provisioning", "valid number"),
    ("timeouts:\n  op: true\n", 2, "timeouts.op", "valid number"),
    ("timeouts:\n  op: null\n", 2, "timeouts.op", "valid number"),
    ("period: 60\ntimeouts:\n  provision: 10\n", 3, "timeouts.provision", "unknown field"),
    ("timeouts: 30\n", 1, "timeouts", "valid dictionary"),
    ("timeouts:\n  graceful: -1\n", 2, "timeouts.graceful", "greater than 0"),
    ("period: 60\nshrink_mode: kill\n", 2, "shrink_mode", "'fp', 'graceful' or 'suspend'"),
    ("shrink_mode: \"graceful\\n\"\n", 1, "shrink_mode", "'fp', 'graceful' or 'suspend'"),
    ("shrink_mode: 1\n", 1, "shrink_mode", "'fp', 'graceful' or 'suspend'"),
])
def test_bad_timeouts_are_refused_naming_the_key(tmp_path, text, line, field, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}: {field}: ") and message in msg and "\n" not in msg, msg


def test_coordinator_run_refuses_a_bad_timeout_with_exit_2(tmp_path):
    p = write(tmp_path, "period: 60\ntimeouts:\n  drain: .nan\n")
    r = run_cli("coordinator", "run", "--config", str(p), "--no-metrics", "--for", "1")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{p}:3: timeouts.drain: " in lines[0] and "finite number" in lines[0], r.stderr


def test_build_passes_the_timeouts_to_the_reconciler(tmp_path):
    from fawkes.coordinator.service import build

    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inventory.yaml").write_text(
        "known_hosts: known_hosts\nhosts:\n  - {name: x1, address: 192.0.2.1, cores: 1}\n")
    cfg = load_config(write(tmp_path, "state: state.db\ninventory: inventory.yaml\n"
                                      "timeouts: {requested: 11, provisioning: 22, draining: 33, op: 44, drain: 55}\n"
                                      "shrink_mode: graceful\n"))
    coord = build(cfg)
    try:
        r = coord.reconciler
        assert r.timeouts == cfg.timeouts and r.shrink_mode == "graceful"
        assert r.limits() == {NodeState.REQUESTED: 11, NodeState.PROVISIONING: 22, NodeState.DRAINING: 33}
        assert (r.op_timeout, r.drain_timeout) == (44, 55)
    finally:
        coord.close(0)
        coord.store.close()
