"""Hostile and mistaken values in the coordinator config, presets and inventories (issue 16, item 5):
refused when the file is read, in one line naming the file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from fawkes.config import load_config
from fawkes.errors import ConfigError
from fawkes.frameworks.render import DEFAULT_OPTIONS, check_option

try:
    from test_cli_store import fawkes, refused
except ImportError:
    from tests.test_cli_store import fawkes, refused


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("FAWKES_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("FAWKES_CONFIG", raising=False)
    monkeypatch.delenv("FAWKES_STATE", raising=False)


def config_error(tmp_path: Path, text: str) -> str:
    p = tmp_path / "cfg.yaml"
    p.write_text(text)
    with pytest.raises(ConfigError) as e:
        load_config(p)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}:")
    return msg[len(str(p)):]


# ------------------------------------------------------------------ c: cluster_options typed when the config is read
@pytest.mark.parametrize("option, message", [
    ('decommission_allow_mode: "ALLOW\\nspark.driver.extraJavaOptions -javaagent:/opt/evil.jar"',
     ":2: cluster_options: decommission_allow_mode: expected one of ALLOW, LOCAL, DENY, got 'ALLOW\\n"),
    ("replication: abc", ":2: cluster_options: replication: expected an integer 1..2147483647, got 'abc'"),
    ("replication: 0", "replication: expected an integer 1..2147483647, got '0'"),
    ("heartbeat_s: 99999999999999999999", "heartbeat_s: expected an integer 1..2147483647"),
    ("worker_memory_mb: abc", "worker_memory_mb: expected an integer 1..2147483647, got 'abc'"),
    ("executor_memory: '1g; rm -rf /'", "executor_memory: expected a size such as 512m, 1g or 134217728"),
    ("nn_heap: \"1g\\n\"", "nn_heap: expected a size"),
    ("daemon_jvm_opts: \"-Xss1m $(reboot)\"", "daemon_jvm_opts: expected JVM flags"),
    ("spark_log_level: \"info\\nrootLogger.appenderRef.x.ref = evil\"", "spark_log_level: expected one of off, fatal"),
    ("reduce_slowstart: .nan", "reduce_slowstart: expected a number 0..1"),
    ("reduce_slowstart: 2", "reduce_slowstart: expected a number 0..1"),
    ("replication: true", "replication: expected a string or a number, got bool"),
    ("replication: [1]", "replication: expected a string or a number, got list"),
    ("no_such: 1", "cluster_options: unknown option(s) no_such"),
])
def test_bad_cluster_options_are_refused_when_the_config_is_read(tmp_path, option, message):
    assert message in config_error(tmp_path, f"period: 60\ncluster_options:\n  {option}\n")


def test_good_cluster_options_are_normalised():
    assert {k: check_option(k, v) for k, v in DEFAULT_OPTIONS.items()} == DEFAULT_OPTIONS
    assert check_option("replication", 2) == "2" and check_option("decommission_allow_mode", "local") == "LOCAL"
    assert check_option("daemon_jvm_opts", "-Xss1m -XX:+UseSerialGC") == "-Xss1m -XX:+UseSerialGC"
    assert check_option("worker_memory_mb", "") == ""


def test_coordinator_with_a_bad_option_creates_no_state(tmp_path):
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    (tmp_path / "cfg.yaml").write_text("state: s.db\ninventory: inv.yaml\ncluster_options:\n"
                                       "  executor_memory: '1g; rm -rf /'\n")
    refused(fawkes("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"),
            "cfg.yaml:3: cluster_options: executor_memory: expected a size")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "inv.yaml"]
