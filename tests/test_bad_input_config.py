"""Hostile and mistaken values in the coordinator config, presets and inventories (issue 16, item 5):
refused when the file is read, in one line naming the file, line and field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fawkes.config import load_config
from fawkes.errors import ConfigError
from fawkes.frameworks.render import DEFAULT_OPTIONS, check_option

try:
    from test_cli_conventions import inproc
    from test_cli_store import fawkes, refused
except ImportError:
    from tests.test_cli_conventions import inproc
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
    ("app_jvm_opts: \"-Xss1m; reboot\"", "app_jvm_opts: expected JVM flags"),
    ("app_jvm_opts: \"-Xss1m\\n-javaagent:/x.jar\"", "app_jvm_opts: expected JVM flags"),
    ("app_jvm_opts: \"-Da=\\0\"", "app_jvm_opts: expected JVM flags"),
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
    assert check_option("app_jvm_opts", "-XX:TieredStopAtLevel=1") == "-XX:TieredStopAtLevel=1"
    assert check_option("worker_memory_mb", "") == ""


def test_coordinator_with_a_bad_option_creates_no_state(tmp_path):
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    (tmp_path / "cfg.yaml").write_text("state: s.db\ninventory: inv.yaml\ncluster_options:\n"
                                       "  executor_memory: '1g; rm -rf /'\n")
    refused(fawkes("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"),
            "cfg.yaml:3: cluster_options: executor_memory: expected a size")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "inv.yaml"]


# ------------------------------------------------------------------ d, g: integers and seconds the state and the loop can hold
@pytest.mark.parametrize("text, message", [
    ("retention: {samples_s: .inf}\n", ":1: retention.samples_s: Input should be a finite number"),
    ("retention: {events_s: 1.0e300}\n", ":1: retention.events_s: Input should be less than or equal to 3153600000"),
    ("retention: {decisions_keep: 99999999999999999999}\n", "retention.decisions_keep: Input should be less than"),
    ("retention: {every_s: 1.0e-9}\n", "retention.every_s: Input should be greater than or equal to 1"),
])
def test_retention_bounds(tmp_path, text, message):
    assert message in config_error(tmp_path, text)


def inventory(tmp_path: Path, host: str) -> Path:
    p = tmp_path / "inv.yaml"
    p.write_text(f"version: 1\nhosts:\n  - {{name: u1, address: 10.9.0.1, {host}}}\n")
    return p


@pytest.mark.parametrize("host, message", [
    ("cores: 1000000000000000000000000000000", ":3: hosts[0].cores: Input should be less than or equal to 1048576"),
    ("memory: 99999999999999TiB", ":3: hosts[0].memory: memory '99999999999999TiB': more than 1 EiB"),
    ("memory: 1" + "0" * 400 + "MiB", "more than 1 EiB"),
    ("memory: 99999999999999999999", "hosts[0].memory: Input should be less than or equal to 1099511627776"),
    ("disks: [{path: /d, size_gb: .inf}]", "hosts[0].disks[0].size_gb: Input should be a finite number"),
])
def test_inventory_host_sizes_are_bounded(tmp_path, host, message):
    """``inventory check`` refuses what would overflow the state's integers when the coordinator syncs it."""
    r = fawkes("inventory", "check", "--no-files", str(inventory(tmp_path, host)))
    refused(r, message)


# ------------------------------------------------------------------ h, i: inventory security and duplicates
def test_strict_host_keys_off_is_warned_about_and_only_a_yaml_boolean(tmp_path):
    p = tmp_path / "inv.yaml"
    p.write_text("version: 1\nstrict_host_keys: false\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    r = fawkes("inventory", "check", "--no-files", str(p))
    assert r.returncode == 0 and r.stdout.strip() == f"{p}: ok (1 hosts, 0 groups)"
    assert r.stderr.strip() == (f"{p}: strict_host_keys: false: SSH host keys are not verified; whoever answers at "
                                "a host's address gets its commands (give known_hosts and strict_host_keys: true)")
    for spelling in ("'no'", "0", "'false'"):
        p.write_text(f"version: 1\nstrict_host_keys: {spelling}\nhosts:\n  - {{name: u1, address: 10.9.0.1}}\n")
        refused(fawkes("inventory", "check", "--no-files", str(p)),
                f"{p}:2: strict_host_keys: Input should be a valid boolean")


@pytest.mark.parametrize("a, b", [("::1", "0:0:0:0:0:0:0:1"), ("2001:db8::1", "2001:DB8:0::1"),
                                  ("node1.example.org", "NODE1.example.org.")])
def test_duplicate_addresses_in_other_spellings(tmp_path, a, b):
    p = tmp_path / "inv.yaml"
    p.write_text(f"version: 1\nhosts:\n  - {{name: a, address: '{a}'}}\n  - {{name: b, address: '{b}'}}\n")
    refused(fawkes("inventory", "check", "--no-files", str(p)),
            f"{p}:4: hosts[1].address: duplicate address '{b}' (also hosts[0])")


# ------------------------------------------------------------------ i: errors point at the right line and field
def test_sample_period_above_period_points_at_sample_period(tmp_path):
    assert config_error(tmp_path, "period: 10\nsample_period: 20\n") == \
        ":2: sample_period: sample_period (20) must not exceed period (10)"


def test_preset_sample_period_above_period_points_at_it(tmp_path):
    p = tmp_path / "p.yaml"
    p.write_text("policy: TD\nperiod_s: 60\nsample_period_s: 120\n")
    refused(fawkes("policy", "check", str(p)), f"{p}:3: sample_period_s: sample_period_s (120) must not exceed")


# ------------------------------------------------------------------ j: a chapter-2 preset's offer period (issue 30, item 7b)
@pytest.mark.parametrize("value, message", [
    (".nan", "offer_period_s: Input should be a finite number"),
    (".inf", "offer_period_s: Input should be a finite number"),
    ("-1", "offer_period_s: Input should be greater than or equal to 1"),
    ("1.0e-9", "offer_period_s: Input should be greater than or equal to 1"),
    ("0.999", "offer_period_s: Input should be greater than or equal to 1"),
    (str(10**30), "offer_period_s: Input should be less than or equal to 31536000"),
    ("31536001", "offer_period_s: Input should be less than or equal to 31536000"),
    ('"30\\n"', "offer_period_s: Input should be a valid number"),  # a quoted newline
    ('"30\\0"', "offer_period_s: Input should be a valid number"),  # a quoted NUL
    ('"30"', "offer_period_s: Input should be a valid number"),
    ("true", "offer_period_s: Input should be a valid number"),
])
@pytest.mark.parametrize("policy", ["GS", "GGD"])
def test_runner_preset_offer_period_is_bounded_like_every_period(tmp_path, policy, value, message):
    p = tmp_path / "p.yaml"
    p.write_text(f"policy: {policy}\noffer_period_s: {value}\nk_grow: 1.5\n")
    refused(fawkes("policy", "check", str(p)), f"{p}:2: {message}")


def test_runner_preset_offer_period_raw_control_bytes_and_the_bounds(tmp_path):
    p = tmp_path / "p.yaml"
    for raw in (b"30\0", b"30\n5"):  # a NUL byte in the file; a newline that makes the value a second line
        p.write_bytes(b"policy: GS\noffer_period_s: " + raw + b"\n")
        refused(fawkes("policy", "check", str(p)), f"{p}")
    p.write_bytes(b"policy: GS\noffer_period_s: \"3\x000\"\n")
    refused(fawkes("policy", "check", str(p)), f"{p}")
    for ok in ("1", "31536000", "30"):
        p.write_text(f"policy: GS\noffer_period_s: {ok}\n")
        r = fawkes("policy", "check", str(p))
        assert r.returncode == 0 and r.stdout.strip() == f"{p}: ok", r.stderr
    p.write_text("policy: GG\noffer_size: 1000001\n")
    refused(fawkes("policy", "check", str(p)), f"{p}:2: offer_size: Input should be less than or equal to 1000000")


def test_an_integer_key_is_named_as_a_key(tmp_path):
    assert config_error(tmp_path, "period: 10\n1: 2\n") == ":2: 1: a key must be a name, not int 1"


def test_empty_state_is_refused_not_the_config_directory(tmp_path):
    assert config_error(tmp_path, "state: ''\n") == \
        ":1: state: empty: leave state out for the default, or name a file or URL"


def test_relative_policy_file_is_relative_to_the_config(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "mine.yaml").write_text("policy: EQ\nperiod_s: 30\n")
    (conf / "cfg.yaml").write_text("policy: mine.yaml\n")
    monkeypatch.chdir(tmp_path)  # not the config's directory
    cfg = load_config(conf / "cfg.yaml")
    assert cfg.policy == str(conf / "mine.yaml")
    from fawkes.config import loop_policy

    settings, _ = loop_policy(cfg)
    assert settings.policy == "EQ"
    assert load_config(_write(tmp_path, "policy: td-tc\n")).policy == "td-tc"  # a shipped name stays a name


def _write(d: Path, text: str) -> Path:
    p = d / "other.yaml"
    p.write_text(text)
    return p


# ------------------------------------------------------------------ e: YAML that would take minutes or the stack
def test_yaml_nesting_and_aliases_are_refused_from_the_parser_events(tmp_path):
    from fawkes.yamlfile import MAX_YAML_DEPTH, load_yaml_text

    ok_depth = "[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH
    assert load_yaml_text(ok_depth, "f")[0] is not None
    with pytest.raises(ConfigError, match="^f: invalid YAML: nested too deeply$"):
        load_yaml_text("[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1), "f")
    with pytest.raises(ConfigError, match=r"^f:3: invalid YAML: aliases \(\*name\) are not allowed here$"):
        load_yaml_text("a: &a [x, x]\nb: 1\nc: [*a]\n", "f")


# ------------------------------------------------------------------ issue 29: idle_timeout_s (never) and save_to
@pytest.mark.parametrize("text, message", [
    ("idle_timeout_s: .nan", ":1: idle_timeout_s: nan: seconds (> 0"),
    ("idle_timeout_s: .inf", ":1: idle_timeout_s: inf: seconds (> 0"),
    ("idle_timeout_s: -1", ":1: idle_timeout_s: -1: seconds (> 0"),
    ("idle_timeout_s: 0", ":1: idle_timeout_s: 0: seconds (> 0"),
    ("idle_timeout_s: 1.0e+30", ":1: idle_timeout_s: 1e+30: seconds (> 0"), ("idle_timeout_s: 1.0e30", ":1: idle_timeout_s: '1.0e30': seconds"),
    ("idle_timeout_s: 1000000000000000000000000000000", ":1: idle_timeout_s: 1000000000000000000000000000000: seconds"),
    ('idle_timeout_s: "never\\n"', ":1: idle_timeout_s: 'never\\n': seconds (> 0"),
    ('idle_timeout_s: "12\\0"', ":1: idle_timeout_s: '12\\x00': seconds"),
    ("idle_timeout_s: Never", ":1: idle_timeout_s: 'Never': seconds"),
    ("idle_timeout_s: true", ":1: idle_timeout_s: seconds (> 0, at most 3.1536e+07) or 'never', not bool"),
    ("idle_timeout_s: [1]", ":1: idle_timeout_s: seconds (> 0, at most 3.1536e+07) or 'never', not list"),
    ("clusters:\n  etl: {idle_timeout_s: .nan}", ":2: clusters.etl.idle_timeout_s: nan: seconds"),
    ("clusters:\n  etl: {idle_timeout_s: -3}", ":2: clusters.etl.idle_timeout_s: -3: seconds"),
    ("clusters:\n  etl: {idle_timeout_s: 600, nope: 1}", "clusters.etl.nope: unknown field"),
    ('clusters:\n  "et l": {idle_timeout_s: 600}', "clusters: 'et l' is not a cluster name"),
    ('clusters:\n  "etl\\n": {idle_timeout_s: 600}', "clusters: 'etl\\n' is not a cluster name"),
    ("save_to: relative/path", ":1: save_to: String should match pattern"),
    ('save_to: "/srv/saved\\nrm -rf /"', ":1: save_to: String should match pattern"),
    ('save_to: "/srv/sa ved"', ":1: save_to: String should match pattern"),
    ('save_to: "/srv/\\0"', ":1: save_to: String should match pattern"),
    ("save_to: /srv/../etc", ":1: save_to: '/srv/../etc': no '..' in the path"),
    ("save_to: 12", ":1: save_to: Input should be a valid string"),
    ("clusters:\n  etl: {save_to: '/a;b'}", ":2: clusters.etl.save_to: String should match pattern"),
])
def test_bad_idle_timeouts_and_save_paths_are_refused(tmp_path, text, message):
    assert message in config_error(tmp_path, text + "\n")


def test_idle_timeout_never_and_per_cluster_reach_the_loop(tmp_path):
    from fawkes.config import loop_policy

    p = tmp_path / "cfg.yaml"
    p.write_text("policy: td-damped\nidle_timeout_s: never\nsave_to: /srv/saved/\n"
                 "clusters:\n  etl: {idle_timeout_s: 600, save_to: /shared/etl}\n  bi: {idle_timeout_s: never}\n")
    cfg = load_config(p)
    s = loop_policy(cfg)[0]
    assert s.idle_timeout == float("inf") and s.idle_timeout_of("bi") == float("inf")
    assert s.idle_timeout_of("etl") == 600.0 and s.idle_timeout_of("other") == float("inf")
    assert cfg.save_to_of("etl") == "/shared/etl" and cfg.save_to_of("bi") == "/srv/saved"
    p.write_text("idle_timeout_s: 90\n")
    assert loop_policy(load_config(p))[0].idle_timeout_of("x") == 90.0


def test_save_to_inside_a_cluster_directory_is_refused_before_anything_is_written(tmp_path):
    """In process (fawkes.cli.main, the entry point: the same refusal, without an interpreter start
    that starved past minutes beside the lab tests in CI)."""
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1, work_dir: /w}\n")
    for key in ("save_to: /w/clusters/x", "clusters:\n  etl: {save_to: /w/clusters}"):
        (tmp_path / "cfg.yaml").write_text(f"state: s.db\ninventory: inv.yaml\n{key}\n")
        refused(inproc("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"),
                "which a cluster's teardown wipes")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "inv.yaml"]


def test_a_bad_idle_timeout_creates_no_state(tmp_path):
    """In process (fawkes.cli.main, the entry point: the same refusal, without an interpreter start
    that starved past minutes beside the lab tests in CI)."""
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    for bad in ("idle_timeout_s: .nan", "idle_timeout_s: -1", "clusters:\n  etl: {idle_timeout_s: \"1\\n\"}"):
        (tmp_path / "cfg.yaml").write_text(f"state: s.db\ninventory: inv.yaml\n{bad}\n")
        refused(inproc("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"), "idle_timeout_s")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "fifo.yaml", "inv.yaml"]
    refused(inproc("coordinator", "run", "--config", str(fifo), "--for", "1"), "fifo.yaml")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "fifo.yaml", "inv.yaml"]


# ------------------------------------------------------------------ issue 27: on_idle (scale to zero)
@pytest.mark.parametrize("text, message", [
    ("save_to: /s\non_idle: .nan", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: .inf", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: -1", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: 1000000000000000000000000000000", ":2: on_idle: Input should be 'release' or"),
    ('save_to: /s\non_idle: "hibernate\\n"', ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ('save_to: /s\non_idle: "hibernate\\0"', ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: Hibernate", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: true", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("save_to: /s\non_idle: [hibernate]", ":2: on_idle: Input should be 'release' or 'hibernate'"),
    ("clusters:\n  etl: {save_to: /s, on_idle: .nan}", ":2: clusters.etl.on_idle: Input should be 'release' or"),
    ("clusters:\n  etl: {save_to: /s, on_idle: -1}", ":2: clusters.etl.on_idle: Input should be 'release' or"),
    ("clusters:\n  etl: {save_to: /s, on_idle: 1000000000000000000000000000000}", ":2: clusters.etl.on_idle: Input"),
    ('clusters:\n  etl: {save_to: /s, on_idle: "release\\n"}', ":2: clusters.etl.on_idle: Input should be"),
    ('clusters:\n  etl: {save_to: /s, on_idle: "a\\0b"}', ":2: clusters.etl.on_idle: Input should be"),
    ("on_idle: hibernate", ":1: on_idle: hibernate needs a save_to (storage every master reaches)"),
    ("clusters:\n  etl: {on_idle: hibernate}", ":1: clusters.etl.on_idle: hibernate needs a save_to"),
])
def test_bad_on_idle_is_refused(tmp_path, text, message):
    assert message in config_error(tmp_path, text + "\n")


def test_on_idle_per_cluster_over_the_config():
    from fawkes.config import CoordinatorConfig

    cfg = CoordinatorConfig(save_to="/s", clusters={"etl": {"on_idle": "hibernate"}, "bi": {"on_idle": "release"}})
    assert cfg.hibernates("etl") and not cfg.hibernates("bi") and not cfg.hibernates("other")
    cfg = CoordinatorConfig(save_to="/s", on_idle="hibernate", clusters={"bi": {"on_idle": "release"}})
    assert cfg.hibernates("etl") and not cfg.hibernates("bi")
    cfg = CoordinatorConfig(clusters={"etl": {"on_idle": "hibernate", "save_to": "/shared/etl"}})
    assert cfg.hibernates("etl") and cfg.save_to_of("etl") == "/shared/etl"


def test_a_bad_on_idle_creates_no_state(tmp_path):
    """In process (fawkes.cli.main, the entry point: the same refusal, without an interpreter start
    that starved past minutes beside the lab tests in CI)."""
    (tmp_path / "inv.yaml").write_text("version: 1\nhosts:\n  - {name: u1, address: 10.9.0.1}\n")
    for bad, field in (("on_idle: hibernate", "on_idle"), ("clusters:\n  etl: {save_to: /s, on_idle: .nan}",
                                                           "clusters.etl.on_idle")):
        (tmp_path / "cfg.yaml").write_text(f"state: s.db\ninventory: inv.yaml\n{bad}\n")
        refused(inproc("coordinator", "run", "--config", str(tmp_path / "cfg.yaml"), "--for", "1"), field)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["cfg.yaml", "inv.yaml"]
