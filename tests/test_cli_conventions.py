"""Conventions every ``fawkes`` command keeps (issue 30, item 6), checked on the command tree itself so a
new command cannot break them unnoticed:

* every command that prints data has ``--json`` (the exceptions are listed, each with why);
* a short flag means one thing across all commands (``-f`` is ``--framework`` everywhere);
* every command that reads the state takes ``--state`` and ``--config`` (the state URL from the config);
* every command naming a cluster answers an unknown one alike: exit 2, ``cluster X: no such cluster``;
* shell completion (click's) answers for the lazily imported commands.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from fawkes.cli import cli
from fawkes.store import Store
from tests.conftest import cli_in_process

try:
    from test_cli_store import fawkes, ok, refused
except ImportError:
    from tests.test_cli_store import fawkes, ok, refused

REPO = Path(__file__).resolve().parent.parent


def inproc(*args: str, env: dict | None = None, state: str | None = None) -> subprocess.CompletedProcess:
    """``fawkes ARGS`` in this process (:func:`tests.conftest.cli_in_process`) with the test's state and
    none of the user's (every ``FAWKES_*`` unset, ``FAWKES_HOME`` somewhere that does not exist)."""
    e: dict[str, str | None] = {k: None for k in os.environ if k.startswith("FAWKES_")}
    e["FAWKES_HOME"] = "/nonexistent/fawkes-home-for-tests"  # never the user's own state
    if state:
        e["FAWKES_STATE"] = state
    e.update(env or {})
    return cli_in_process(args, env=e)


#: commands with no --json, and why: none of them prints records a script would parse
NO_JSON = {
    "config example": "prints a commented YAML config (the document itself)",
    "config reference": "prints docs/config.md (the document itself)",
    "coordinator run": "a service: it logs, it prints no data",
    "inventory from-slurm": "prints an inventory YAML file (the document itself)",
    "trace from-spark": "writes a CSV trace (the document itself)",
    "trace from-state": "writes a CSV trace (the document itself)",
    "lab up": "the test lab: starts namespaces; 'lab status --json' prints its hosts",
    "lab down": "the test lab: removes namespaces",
    "lab crash": "the test lab: stops one host's sshd",
    "lab revive": "the test lab: restarts one host's sshd",
    "lab slurm up": "the test lab: starts SLURM daemons; 'lab slurm status --json' prints them",
    "lab slurm down": "the test lab: stops SLURM daemons",
}


def commands() -> dict[str, click.Command]:
    """Every leaf command of ``fawkes`` by its path ("cluster request")."""
    ctx = click.Context(cli)
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, path: list[str]) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                walk(cmd.get_command(ctx, name), [*path, name])
        else:
            out[" ".join(path)] = cmd

    walk(cli, [])
    return out


def options(cmd: click.Command) -> list[click.Option]:
    return [p for p in cmd.params if isinstance(p, click.Option)]


def flags(cmd: click.Command) -> set[str]:
    return {o for p in options(cmd) for o in (*p.opts, *p.secondary_opts)}


ALL = commands()


def test_the_walk_sees_every_command():
    assert {"status", "events", "cluster request", "jobs list", "policy show", "inventory probe",
            "framework add", "coordinator run", "host drain", "inventory apply"} <= set(ALL)
    assert set(NO_JSON) <= set(ALL), sorted(set(NO_JSON) - set(ALL))  # no stale exemption


@pytest.mark.parametrize("path", sorted(ALL))
def test_every_data_printing_command_has_json(path):
    if path in NO_JSON:
        assert "--json" not in flags(ALL[path]), f"{path} has --json now: drop its exemption"
        return
    assert "--json" in flags(ALL[path]), f"fawkes {path}: no --json (add it, or list it in NO_JSON with why)"


def test_a_short_flag_means_one_thing_everywhere():
    meaning: dict[str, set[str]] = {}
    where: dict[str, list[str]] = {}
    for path, cmd in ALL.items():
        for p in options(cmd):
            names = [*p.opts, *p.secondary_opts]
            longs = sorted(o for o in names if o.startswith("--"))
            for short in (o for o in names if not o.startswith("--")):
                meaning.setdefault(short, set()).add(longs[0] if longs else "(none)")
                where.setdefault(short, []).append(path)
    clashes = {s: (sorted(m), where[s]) for s, m in meaning.items() if len(m) > 1}
    assert not clashes, clashes
    assert all(m != {"(none)"} for m in meaning.values())  # every short flag has its long name
    assert meaning["-f"] == {"--framework"} and meaning["-n"] == {"--limit"}


def test_every_state_reader_takes_state_and_config():
    readers = [p for p, c in ALL.items() if "--state" in flags(c)]
    assert len(readers) > 25
    for path in readers:
        cmd = ALL[path]
        assert "--config" in flags(cmd), f"{path}: --state but no --config"
        (state,) = [p for p in options(cmd) if "--state" in p.opts]
        (config,) = [p for p in options(cmd) if "--config" in p.opts]
        assert state.envvar == "FAWKES_STATE" and config.envvar == "FAWKES_CONFIG", path


#: the arguments each state reader needs to get as far as opening the state
STATE_ARGS = {
    "audit": [], "backup": ["{tmp}/copy.db"], "cluster list": [], "cluster release": ["a"], "cluster show": ["a"],
    "cluster wake": ["a"],
    "cluster request": ["a", "-f", "spark", "-m", "1"], "coordinator status": [], "down": ["--yes"], "events": [],
    "explain": [], "framework list": [], "framework remove": ["x"], "framework show": ["x"],
    "host fail": ["n0", "-r", "x"], "host list": [], "host protect": ["n0"], "host restore": ["n0"],
    "host drain": ["n0"], "jobs cancel": ["1"], "jobs list": [], "migrate": ["--dry-run"], "node protect": ["1"],
    "plan": [], "prune": ["--dry-run"], "status": [], "submit": ["a", "--", "x"], "token create": ["t", "--scope", "submit"],
    "token list": [], "token revoke": ["1"], "trace from-state": ["-o", "{tmp}/t.csv"],
    "inventory apply": ["{tmp}/inv.yaml"], "inventory probe": ["{tmp}/inv.yaml", "--framework", "x"],
}
#: state readers tested on their own: they need more than a state
STATE_ELSEWHERE = {
    "coordinator run": "test_coordinator_run_takes_state_from_flag_env_and_config",
    "framework add": "test_framework_add_creates_the_state_the_config_names",
    "render": "needs an inventory and a cluster: test_no_such_cluster_is_the_same_everywhere",
}


def test_the_state_args_cover_every_state_reader():
    readers = {p for p, c in ALL.items() if "--state" in flags(c)}
    assert readers == set(STATE_ARGS) | set(STATE_ELSEWHERE)


@pytest.mark.parametrize("path", sorted(STATE_ARGS))
def test_config_names_the_state_for_every_reader(path, tmp_path):
    """--config alone (no --state, no FAWKES_STATE) takes the state from the config: a config naming a
    missing file makes every reader refuse that very file, creating nothing."""
    (tmp_path / "inv.yaml").write_text("hosts:\n  - {name: n0, address: 10.0.0.1}\n")
    missing = tmp_path / "nowhere" / "state.db"
    (tmp_path / "nowhere").mkdir()
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state: {missing}\n")
    args = [a.format(tmp=tmp_path) for a in STATE_ARGS[path]]
    r = inproc(*path.split(), "--config", str(cfg), *args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert str(missing) in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert list((tmp_path / "nowhere").iterdir()) == []


def test_config_from_environment_and_state_flag_over_it(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url, create=True) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state: {tmp_path / 's.db'}\n")
    ok(fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", "--config", str(cfg)))
    assert [c["name"] for c in json.loads(ok(fawkes("cluster", "list", "--json", env={"FAWKES_CONFIG": str(cfg)})))] \
        == ["a"]
    assert json.loads(ok(fawkes("status", "--json", "--config", str(cfg))))["clusters"][0]["name"] == "a"
    refused(fawkes("status", "--config", str(cfg), "--state", str(tmp_path / "other.db")), "other.db")


def test_framework_add_creates_the_state_the_config_names(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state: {tmp_path / 'made.db'}\n")
    out = json.loads(ok(fawkes("framework", "add", "lab", "--kind", "spark", "--spark-home", "/opt/spark",
                               "--shared-dir", "/srv", "--no-check", "--json", "--config", str(cfg))))
    assert out["name"] == "lab" and out["kind"] == "spark" and (tmp_path / "made.db").is_file()
    assert json.loads(ok(fawkes("framework", "remove", "lab", "--json", "--config", str(cfg))))["removed"] is True
    refused(fawkes("framework", "remove", "lab", "--config", str(cfg)), "lab")


def test_coordinator_run_takes_state_from_flag_env_and_config(tmp_path):
    """``coordinator run`` reads the state like every command: --state, else FAWKES_STATE, else the config's.
    A state that is not a database is refused before anything is created beside it, so where the refusal
    points shows which one was read."""
    bad = {k: tmp_path / f"{k}.db" for k in ("flag", "env", "cfg")}
    for p in bad.values():
        p.write_text("not a database\n")
    (tmp_path / "inv.yaml").write_text("hosts:\n  - {name: n0, address: 127.0.0.1}\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state: {bad['cfg']}\ninventory: inv.yaml\npolicy: td-tc\n")
    run = ["coordinator", "run", "--config", str(cfg), "--no-metrics", "--for", "1"]
    for args, env, which in (([], {}, "cfg"), ([], {"FAWKES_STATE": str(bad["env"])}, "env"),
                             (["--state", str(bad["flag"])], {"FAWKES_STATE": str(bad["env"])}, "flag")):
        r = fawkes(*run, *args, env=env)
        refused(r, str(bad[which]))
        assert not any(p.name.endswith(".lock") for p in tmp_path.iterdir())


# ---------------------------------------------------------------- no such cluster
#: every command that names a cluster, with an unknown one
NOSUCH = {
    "cluster show": ["nosuch"], "cluster release": ["nosuch"], "cluster wake": ["nosuch"], "jobs list": ["nosuch"],
    "submit": ["nosuch", "--", "x"], "events": ["--cluster", "nosuch"], "render": ["nosuch", "-i", "{tmp}/inv.yaml"],
}


def _names_a_cluster(path: str, cmd: click.Command) -> bool:
    return any(p.name == "cluster" or (path.startswith("cluster ") and isinstance(p, click.Argument)
                                       and p.name == "name") for p in cmd.params)


def test_every_command_naming_a_cluster_is_checked():
    # cluster request names a new cluster (an existing one is refused: tests/test_cli_store.py)
    assert {p for p, c in ALL.items() if _names_a_cluster(p, c)} - {"cluster request"} == set(NOSUCH)


@pytest.mark.parametrize("path", sorted(NOSUCH))
def test_no_such_cluster_is_the_same_everywhere(path, tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    with Store(url, create=True) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.request_cluster("known", framework="spark", min_core=1)
    (tmp_path / "inv.yaml").write_text("hosts:\n  - {name: n0, address: 10.0.0.1}\n")
    r = inproc(*path.split(), *[a.format(tmp=tmp_path) for a in NOSUCH[path]], state=url)
    assert r.returncode == 2 and r.stdout == "" and r.stderr == "fawkes: error: cluster nosuch: no such cluster\n", \
        (r.stdout, r.stderr)


def test_a_newline_in_a_name_stays_on_one_line(tmp_path):
    url = f"sqlite:///{tmp_path / 's.db'}"
    Store(url, create=True).close()
    for args in (["jobs", "list", "a\nb"], ["events", "--cluster", "a\rb"], ["cluster", "show", "a\nb"]):
        r = inproc(*args, state=url)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "no such cluster" in r.stderr, r.stderr


# ---------------------------------------------------------------- completion
def test_shell_completion_answers(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAWKES_")}
    env["PYTHONPATH"] = str(REPO)

    def complete(words: str, cword: int) -> list[str]:
        r = subprocess.run([sys.executable, "-m", "fawkes"], capture_output=True, text=True, timeout=60, check=False,
                           env=env | {"_FAWKES_COMPLETE": "bash_complete", "COMP_WORDS": words,
                                      "COMP_CWORD": str(cword)})
        assert r.returncode == 0, r.stderr
        return [line.split(",", 1)[1] for line in r.stdout.splitlines()]

    assert complete("fawkes ev", 1) == ["events"]
    assert set(complete("fawkes host ", 2)) >= {"drain", "fail", "list", "restore"}
    assert "--json" in complete("fawkes policy show --j", 3)
    r = subprocess.run([sys.executable, "-m", "fawkes"], capture_output=True, text=True, timeout=60, check=True,
                       env=env | {"_FAWKES_COMPLETE": "bash_source"})
    assert "_fawkes_completion" in r.stdout and "complete " in r.stdout
