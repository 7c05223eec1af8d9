"""The coordinator config file and the state URL resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from fawkes.config import CoordinatorConfig, default_state_url, load_config, resolve_state_url
from fawkes.errors import ConfigError


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """Keep the user's real config and state out of these tests."""
    monkeypatch.setenv("FAWKES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FAWKES_CONFIG", raising=False)
    monkeypatch.delenv("FAWKES_STATE", raising=False)


def write(tmp_path: Path, text: str, name: str = "coordinator.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_defaults_without_any_file(tmp_path):
    cfg = load_config()
    assert cfg == CoordinatorConfig()
    assert (cfg.period, cfg.sample_period, cfg.metrics.bind, cfg.metrics.port, cfg.log_format) == \
        (60.0, 5.0, "127.0.0.1", 9464, "text")
    assert cfg.state_url() == f"sqlite:///{tmp_path / 'home' / 'fawkes.db'}" == default_state_url()


def test_default_state_without_fawkes_home(monkeypatch, tmp_path):
    monkeypatch.delenv("FAWKES_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_state_url() == f"sqlite:///{tmp_path}/.local/share/fawkes/fawkes.db"


def test_full_file_with_relative_paths(tmp_path):
    p = write(tmp_path, """
state: state/fawkes.db
inventory: inv.yaml
policy: td-tc
period: 120
sample_period: 10
metrics: {bind: 0.0.0.0, port: 9100}
log_format: json
""")
    cfg = load_config(p)
    assert cfg.inventory == tmp_path / "inv.yaml" and cfg.period == 120 and cfg.metrics.port == 9100
    assert cfg.state_url() == f"sqlite:///{tmp_path}/state/fawkes.db" and cfg.log_format == "json"
    assert cfg.source == p


def test_default_file_under_fawkes_home_is_read(tmp_path):
    (tmp_path / "home").mkdir()
    write(tmp_path / "home", "state: postgresql://fawkes@db.example/fawkes\n", "config.yaml")
    assert resolve_state_url() == "postgresql+psycopg://fawkes@db.example/fawkes"


@pytest.mark.parametrize("text, line, field, message", [
    ("period: 60\nstate_url: x\n", 2, "state_url", "unknown field"),
    ("period: -1\n", 1, "period", "greater than or equal to 1"),
    ("period: .inf\n", 1, "period", "finite number"),
    ("period: 1.0e300\n", 1, "period", "less than or equal to"),
    ("metrics:\n  bind: 127.0.0.1\n  port: 70000\n", 3, "metrics.port", "less than or equal to 65535"),
    ("metrics:\n  bind: not-an-ip\n", 2, "metrics.bind", "does not appear to be an IPv4 or IPv6 address"),
    ("log_format: xml\n", 1, "log_format", "'text' or 'json'"),
    ("period: 10\nsample_period: 20\n", None, None, "sample_period (20) must not exceed period (10)"),
    ("state: mysql://x/y\n", 1, "state", "unsupported state URL scheme"),
    ("period: 1\nperiod: 2\n", 2, "period", "duplicate key"),
    ("- a\n- b\n", 1, None, "expected a mapping"),
    ("source: x\n", 1, "source", "unknown field"),
])
def test_errors_name_file_line_and_key(tmp_path, text, line, field, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(str(p)) and message in msg and "\n" not in msg
    if line is not None:
        assert msg.startswith(f"{p}:{line}")
    if field is not None:
        assert f": {field}: " in msg


def test_named_config_must_exist(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_config(tmp_path / "missing.yaml")


def test_state_precedence_flag_env_config_default(monkeypatch, tmp_path):
    p = write(tmp_path, f"state: {tmp_path}/from-config.db\n")
    monkeypatch.setenv("FAWKES_CONFIG", str(p))
    assert resolve_state_url() == f"sqlite:///{tmp_path}/from-config.db"
    assert resolve_state_url("postgresql://u@/d") == "postgresql+psycopg://u@/d"
    assert resolve_state_url(str(tmp_path / "x.db")) == f"sqlite:///{tmp_path}/x.db"


def test_retention_defaults_and_values(tmp_path):
    r = CoordinatorConfig().retention
    assert (r.samples_s, r.events_s, r.decisions_keep, r.every_s) == (7 * 86400, 30 * 86400, 10080, 3600)
    cfg = load_config(write(tmp_path, "retention:\n  samples_s: 3600\n  events_s: null\n  decisions_keep: 5\n"
                                      "  every_s: 60\n"))
    assert (cfg.retention.samples_s, cfg.retention.events_s, cfg.retention.decisions_keep,
            cfg.retention.every_s) == (3600, None, 5, 60)


@pytest.mark.parametrize("text, line, field, message", [
    ("retention:\n  samples_s: 0\n", 2, "retention.samples_s", "greater than 0"),
    ("retention:\n  events_s: -5\n", 2, "retention.events_s", "greater than 0"),
    ("retention:\n  events_s: a week\n", 2, "retention.events_s", "valid number"),
    ("retention:\n  decisions_keep: 0\n", 2, "retention.decisions_keep", "greater than or equal to 1"),
    ("retention:\n  decisions_keep: 2.5\n", 2, "retention.decisions_keep", "valid integer"),
    ("retention:\n  every_s: null\n", 2, "retention.every_s", "valid number"),
    ("retention:\n  sample_s: 10\n", 2, "retention.sample_s", "unknown field"),
    ("retention: 30\n", 1, "retention", "valid dictionary"),
])
def test_retention_errors_name_the_key(tmp_path, text, line, field, message):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert msg.startswith(f"{p}:{line}: {field}: ") and message in msg and "\n" not in msg, msg
