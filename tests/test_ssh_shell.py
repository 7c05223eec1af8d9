"""Quoting helpers, checked by running the rendered commands in a real local /bin/sh."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fawkes.ssh.shell import Script, background, env_assignments, quote, render, then, with_env

HOSTILE = ["a b", "it's", 'say "hi"', "; touch PWNED", "$(touch PWNED)", "`touch PWNED`", "$HOME", "\\",
           "*", "-n", "", "line\nbreak", "ünï €", "{x}", "a'b\"c$d`e", "&& exit 3 ||", "#not a comment", "~"]
ARGV_PY = [sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))"]


def sh(text: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["/bin/sh", "-c", text], capture_output=True, text=True, cwd=cwd, timeout=30)


def test_argv_arrives_verbatim(tmp_path):
    p = sh(render([*ARGV_PY, *HOSTILE]), tmp_path)
    assert json.loads(p.stdout) == HOSTILE
    assert not (tmp_path / "PWNED").exists()


def test_script_values_are_quoted(tmp_path):
    s = Script("{py} {a} {b} {words}", py=ARGV_PY, a=HOSTILE[3], b=tmp_path / "dir with space", words=HOSTILE)
    p = sh(str(s), tmp_path)
    assert json.loads(p.stdout) == [HOSTILE[3], str(tmp_path / "dir with space"), *HOSTILE]
    assert not (tmp_path / "PWNED").exists()


def test_script_mkdir_cd(tmp_path):
    d = tmp_path / "x; touch PWNED" / "$(touch PWNED)"
    p = sh(str(Script("mkdir -p {d} && cd {d} && pwd", d=d)), tmp_path)
    assert p.stdout.strip() == str(d) and d.is_dir()
    assert not (tmp_path / "PWNED").exists()


def test_script_rejects_format_tricks():
    with pytest.raises(ValueError):
        Script("{a!r}", a="x")
    with pytest.raises(ValueError):
        Script("{a:>10}", a="x")
    with pytest.raises(ValueError):
        Script("{a.__class__}", a="x")
    with pytest.raises(KeyError):
        Script("echo {missing}")
    with pytest.raises(ValueError):
        quote("nul\0byte")
    with pytest.raises(TypeError):
        quote(None)
    assert str(Script("awk '{{print $1}}' {f}", f="a b")) == "awk '{print $1}' 'a b'"


def test_env_assignments(tmp_path):
    env = {"A": HOSTILE[4], "B_2": "x y", "C": "$(touch PWNED)"}
    p = sh(str(with_env([*ARGV_PY[:2], "import os, json; print(json.dumps([os.environ[k] for k in 'A B_2 C'.split()]))"],
                        env)), tmp_path)
    assert json.loads(p.stdout) == [env["A"], env["B_2"], env["C"]]
    assert not (tmp_path / "PWNED").exists()
    with pytest.raises(ValueError):
        env_assignments({"A;rm": "x"})
    assert str(env_assignments({})) == ""


def test_then_and_plain_string(tmp_path):
    p = sh(render(then(["echo", "a b"], Script("echo {x}", x="$y"), "echo literal")), tmp_path)
    assert p.stdout.splitlines() == ["a b", "$y", "literal"]
    with pytest.raises(TypeError):
        render([])


def test_background_writes_pid_and_returns(tmp_path):
    pid_file, log = tmp_path / "run dir" / "x.pid", tmp_path / "logs" / "x.log"
    p = sh(str(background(["sh", "-c", "echo started $0; sleep 30", "arg; $(touch PWNED)"], str(pid_file),
                          str(log))), tmp_path)
    assert p.returncode == 0
    pid = int(pid_file.read_text())
    import time
    try:
        deadline = time.monotonic() + 30  # its first line, before it is stopped (it used to be killed first,
        while not (log.exists() and log.read_text()) and time.monotonic() < deadline:  # a race under load)
            time.sleep(0.02)
        assert subprocess.run(["kill", "-0", str(pid)]).returncode == 0
    finally:
        subprocess.run(["kill", str(pid)])
    assert log.read_text().strip() == "started arg; $(touch PWNED)"
    assert not (tmp_path / "PWNED").exists()
