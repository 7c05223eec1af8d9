"""Conventions of the test suite itself (issue 25, item 4).

Every skip for want of something in the environment (root, cgroups, a network namespace, a
PostgreSQL server, chromium, the SSH lab) goes through ``unavailable()`` in ``tests/conftest.py``,
which fails under CI (``$CI`` set) and skips elsewhere: CI must never pass by skipping.  So a test
module may not call ``pytest.skip``, ``pytest.importorskip`` or ``pytest.mark.skip``/``skipif``
itself, except at the few call sites listed in :data:`ALLOWED`, which skip for another reason.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

try:
    from conftest import unavailable
except ImportError:  # pragma: no cover
    from tests.conftest import unavailable

TESTS = Path(__file__).resolve().parent

#: the skips that are no environment skip: (file, enclosing function or "<module>") -> why
ALLOWED = {
    ("conftest.py", "unavailable"): "the helper itself",
    ("test_bad_input_cli.py", "test_an_empty_postgres_database_is_no_state"):
        "its SQLite parameter is no case: the missing file is tested above it",
}

_SKIPS = {"pytest.skip", "pytest.importorskip", "pytest.mark.skip", "pytest.mark.skipif"}


def _dotted(node: ast.AST) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def skip_sites(source: str, filename: str = "<source>") -> list[tuple[str, int]]:
    """(enclosing function or "<module>", line) of every skip in ``source``: ``pytest.skip(...)``,
    ``pytest.importorskip(...)``, ``pytest.mark.skip``/``skipif`` (called or not), and a ``skip`` or
    ``importorskip`` imported from pytest by name."""
    found: list[tuple[str, int]] = []

    class Visitor(ast.NodeVisitor):
        def __init__(self) -> None:
            self.stack = ["<module>"]

        def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
            self.stack.append(node.name)
            self.generic_visit(node)  # decorators included: a skipif decorator belongs to its test
            self.stack.pop()

        visit_FunctionDef = visit_AsyncFunctionDef = _function

        def visit_Attribute(self, node: ast.Attribute) -> None:
            name = _dotted(node)
            if name in _SKIPS:
                found.append((self.stack[-1], node.lineno))
            elif not (name and name.endswith(".Exception") and name[:-len(".Exception")] in _SKIPS):
                self.generic_visit(node)  # pytest.skip.Exception: catching a skip is no skip

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.module and node.module.split(".")[0] == "pytest" and \
                    any(a.name in ("skip", "importorskip", "skipif") for a in node.names):
                found.append((self.stack[-1], node.lineno))

    Visitor().visit(ast.parse(source, filename))
    return found


def test_every_environment_skip_goes_through_unavailable():
    sites: dict[tuple[str, str], list[int]] = {}
    for path in sorted(TESTS.glob("*.py")):
        for where, line in skip_sites(path.read_text(), str(path)):
            sites.setdefault((path.name, where), []).append(line)
    stray = {f"{f}:{lines[0]} ({where})" for (f, where), lines in sites.items() if (f, where) not in ALLOWED}
    assert not stray, ("skip through conftest's unavailable() (fails under CI, skips elsewhere), or list a "
                       f"skip that is no environment skip in ALLOWED: {sorted(stray)}")
    assert set(sites) == set(ALLOWED), f"ALLOWED names call sites that skip no more: {set(ALLOWED) - set(sites)}"


def test_the_scan_finds_every_form_of_skip():
    source = '''
import pytest
from pytest import skip as s
pytestmark = pytest.mark.skipif(True, reason="x")

@pytest.mark.skip
def test_a():
    pass

def test_b():
    if True:
        pytest.skip("no root")
    pytest.importorskip("selenium")

def helper():
    unavailable("no root")  # the helper: no finding
    other.skip("not pytest")
    with pytest.raises(pytest.skip.Exception):  # catching a skip: no finding
        pass
'''
    assert skip_sites(source) == [("<module>", 3), ("<module>", 4), ("test_a", 6), ("test_b", 12), ("test_b", 13)]


def test_unavailable_fails_under_ci_and_skips_elsewhere(monkeypatch):
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required test resource unavailable in CI: no root"):
        unavailable("no root")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="^no root$"):
        unavailable("no root")


# ------------------------------------------------------------------ figures come from files that exist (issue 25, item 3)
REPO = TESTS.parent
RESULTS = REPO / "bench" / "results"
#: what bench/results_meta.py's meta() writes beside every file's figures
META_KEYS = ("command", "commit", "date", "load")
#: a path under bench/results/ as the docs write it: shell braces allowed, anywhere in the name
_CITED = re.compile(r"bench/results/([A-Za-z0-9_.{},*-]+)")
_CITED_EXT = (".json", ".log", ".md")

#: results files written before bench/results_meta.py (d454e56, 2026-11-26 23:51 UTC) that lack one or
#: more of META_KEYS: file -> why, and where the docs give what the file lacks.  Frozen: a file not listed
#: here must carry every key, and a listed one that gains them must leave the list (the test says so).
META_EXCEPTIONS = {
    "twin_heldout_seed785405_prediction_2026-11-27.json": "the held-out twin's sealed prediction (its SHA-256 was "
                                                         "printed before the None run: its bytes stay as written); "
                                                         "command, commit, date and load are in its run's file "
                                                         "twin_heldout_seed785405_2026-11-27.json",
    "app_jvm_opts_2026-11-26.json": "before results_meta.py; the load per run is in the file (load_1m), the "
                                    "command in docs/lab.md",
    "app_jvm_opts_runs2_2026-11-27.json": "written by the bench before it recorded its meta (it does since): the "
                                          "load per run is in the file (load_1m); the command, the commit (frozen "
                                          "f383f67) and the time (20:23-20:36 UTC) in bench/results/HISTORY.md",
    "demo_first_2026-11-26.json": "a demo report (fawkes demo --json) of before results_meta.py; command and "
                                  "load in bench/results/HISTORY.md",
    "demo_first_c1_2026-11-26.json": "a demo report of before results_meta.py; docs/live.md gives the setting",
    "demo_first_c1_stream150_2026-11-26.json": "a demo report of before results_meta.py; docs/live.md",
    "demo_measure_none_2026-11-26.json": "a demo report of before results_meta.py; bench/results/HISTORY.md",
    "demo_second_2026-11-26.json": "a demo report of before results_meta.py; bench/results/HISTORY.md",
    "dp_shrinks_2026-11-25.json": "before results_meta.py; the load at start and end is in its .log",
    "fault_campaign_2026-11-26.json": "before results_meta.py; the load at start and end is in its .log",
    "lab_policies_2026-11-25.json": "before results_meta.py; command, commit and load noted in docs/live.md",
    "lab_policies_2026-11-26.json": "before results_meta.py; command, commit and load noted in docs/live.md",
    "lab_policies_twin_2026-11-26.json": "before results_meta.py; command in docs/live.md",
    "scale_nodes_2026-11-26.json": "before results_meta.py; date and load noted in docs/lab.md",
}


def _expand(name: str) -> list[str]:
    """Shell brace expansion of one name (``a{1,2}_b.{json,log}`` -> 4 names); ValueError on braces
    that do not pair."""
    m = re.search(r"\{([^{}]*)\}", name)
    if m is None:
        if "{" in name or "}" in name:
            raise ValueError(name)
        return [name]
    return [x for alt in m.group(1).split(",") for x in _expand(name[:m.start()] + alt + name[m.end():])]


def cited_results(text: str) -> list[str]:
    """The ``bench/results/`` files that ``text`` names: ``bench/results/x.json`` (``.log``, ``.md``) and
    the shell-brace forms ``bench/results/x.{json,log}``, ``bench/results/x{1,2}_y.json`` (each name).
    A glob (``fleet_*.json``) or the bare directory names no file; braces that do not pair raise
    ValueError."""
    out = []
    for m in _CITED.finditer(text):
        raw = m.group(1).rstrip(".,")
        if not raw or "*" in raw:
            continue
        out.extend(n for n in _expand(raw) if n.endswith(_CITED_EXT))
    return out


def test_the_citation_scan_reads_every_form():
    assert cited_results("raw: `bench/results/a_2026-11-25.{json,log}`; see bench/results/b.json, "
                         "bench/results/c.log. and bench/results/d.csv, bench/results/ and bench/results/e_*.json; "
                         "`bench/results/f{1,22}_x.{json,log}` bench/results/HISTORY.md") == \
        ["a_2026-11-25.json", "a_2026-11-25.log", "b.json", "c.log",
         "f1_x.json", "f1_x.log", "f22_x.json", "f22_x.log", "HISTORY.md"]
    with pytest.raises(ValueError):
        cited_results("bench/results/a{1,2_x.json")


def _docs() -> list[Path]:
    """What may quote a figure: the README, docs/, and the run log(s) under bench/results/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted(RESULTS.glob("*.md"))]


def test_every_result_file_the_docs_cite_exists_and_parses():
    cited: dict[str, list[str]] = {}
    for doc in _docs():
        for name in cited_results(doc.read_text()):
            cited.setdefault(name, []).append(doc.relative_to(REPO).as_posix())
    assert len(cited) >= 40, cited  # the docs cite at least these many today: the scan still reads them
    missing = sorted(f"bench/results/{n} (cited in {', '.join(sorted(set(d)))})" for n, d in cited.items()
                     if not (RESULTS / n).is_file())
    assert not missing, f"cited but missing: {missing}"
    for name in cited:
        path = RESULTS / name
        text = path.read_text()
        assert text.strip(), f"{path} is empty"
        if name.endswith(".json"):
            try:
                json.loads(text)
            except ValueError as exc:
                pytest.fail(f"{path}: not JSON: {exc}")


def meta_of(doc) -> dict:
    """A results file's meta: at the top level (``{**meta(), ...}``) or under ``"meta"`` (both are
    written by bench/results_meta.py's callers)."""
    if isinstance(doc, dict) and isinstance(doc.get("meta"), dict):
        return doc["meta"]
    return doc if isinstance(doc, dict) else {}


def meta_problems(doc) -> list[str]:
    """What the file lacks of command (text), commit (hex, ``+dirty`` allowed, or ``unknown``), date
    (ISO UTC) and load (the three load averages)."""
    m = meta_of(doc)
    bad = [k for k in META_KEYS if k not in m]
    if "command" in m and not (isinstance(m["command"], str) and m["command"].strip()):
        bad.append("command (empty)")
    if "commit" in m and not (isinstance(m["commit"], str) and
                              re.fullmatch(r"(?:[0-9a-f]{7,40}(?:\+dirty)?|unknown)", m["commit"])):
        bad.append(f"commit ({m['commit']!r})")
    if "date" in m and not (isinstance(m["date"], str) and
                            re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", m["date"])):
        bad.append(f"date ({m['date']!r})")
    if "load" in m and not (isinstance(m["load"], list) and len(m["load"]) == 3 and
                            all(isinstance(x, (int, float)) and not isinstance(x, bool) and 0 <= x < 1e6
                                for x in m["load"])):
        bad.append(f"load ({m['load']!r})")
    return bad


def test_the_meta_check_reads_both_layouts_and_refuses_what_is_missing():
    good = {"command": "bench_x.py --json out.json", "commit": "3b58153+dirty", "date": "2026-11-27T06:24:01Z",
            "load": [1.5, 2, 3.25]}
    assert meta_problems(good) == [] and meta_problems({"meta": good, "rows": []}) == []
    assert meta_problems({"rows": []}) == list(META_KEYS)
    assert meta_problems([1, 2]) == list(META_KEYS)
    assert meta_problems({**good, "load": [1.0, 2.0]}) == ["load ([1.0, 2.0])"]
    assert meta_problems({**good, "load": [float("nan"), 1, 1]}) == ["load ([nan, 1, 1])"]
    assert meta_problems({**good, "date": "yesterday"}) == ["date ('yesterday')"]
    assert meta_problems({**good, "commit": "main"}) == ["commit ('main')"]
    assert meta_problems({**good, "command": " "}) == ["command (empty)"]


def test_every_results_json_carries_its_command_commit_date_and_load():
    """Every bench/results/*.json (cited or not) carries bench/results_meta.py's keys, or is one of the
    frozen exceptions; an exception that now carries them, or names no file, must leave the list."""
    lacking = {}
    for path in sorted(RESULTS.glob("*.json")):
        problems = meta_problems(json.loads(path.read_text()))
        if problems:
            lacking[path.name] = problems
    new = {n: p for n, p in lacking.items() if n not in META_EXCEPTIONS}
    assert not new, f"results files without {META_KEYS} (write them with bench/results_meta.py's meta()): {new}"
    stale = sorted(set(META_EXCEPTIONS) - set(lacking))
    assert not stale, f"META_EXCEPTIONS lists files that carry the meta now, or do not exist: {stale}"
    assert all(reason.strip() for reason in META_EXCEPTIONS.values())


def test_one_meaning_per_class_name():
    """No two classes of fawkes/ share a name (issue 28 item 5): a reader who meets ``Node`` knows which."""
    where: dict[str, list[str]] = {}
    for path in sorted((TESTS.parent / "fawkes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(TESTS.parent)))
    assert {k: v for k, v in where.items() if len(v) > 1} == {}
