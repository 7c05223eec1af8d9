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
_CITED = re.compile(r"bench/results/([A-Za-z0-9_.-]+?)\.(?:\{([a-z]+(?:,[a-z]+)*)\}|(json|log)\b)")


def cited_results(text: str) -> list[str]:
    """The ``bench/results/`` files that ``text`` names: ``bench/results/x.json``, ``.log`` and the
    shell-brace form ``bench/results/x.{json,log}`` (both)."""
    out = []
    for m in _CITED.finditer(text):
        for ext in (m.group(2).split(",") if m.group(2) else [m.group(3)]):
            out.append(f"{m.group(1)}.{ext}")
    return out


def test_the_citation_scan_reads_both_forms():
    assert cited_results("raw: `bench/results/a_2026-11-25.{json,log}`; see bench/results/b.json, "
                         "bench/results/c.log. and bench/results/d.csv") == \
        ["a_2026-11-25.json", "a_2026-11-25.log", "b.json", "c.log"]


def test_every_result_file_the_docs_cite_exists_and_parses():
    cited: dict[str, list[str]] = {}
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for name in cited_results(doc.read_text()):
            cited.setdefault(name, []).append(doc.relative_to(REPO).as_posix())
    assert len(cited) >= 10, cited  # the docs cite at least these many today: the scan still reads them
    missing = sorted(f"bench/results/{n} (cited in {', '.join(sorted(set(d)))})" for n, d in cited.items()
                     if not (REPO / "bench" / "results" / n).is_file())
    assert not missing, f"cited but missing: {missing}"
    for name in cited:
        path = REPO / "bench" / "results" / name
        text = path.read_text()
        assert text.strip(), f"{path} is empty"
        if name.endswith(".json"):
            try:
                json.loads(text)
            except ValueError as exc:
                pytest.fail(f"{path}: not JSON: {exc}")


def test_one_meaning_per_class_name():
    """No two classes of fawkes/ share a name (issue 28 item 5): a reader who meets ``Node`` knows which."""
    where: dict[str, list[str]] = {}
    for path in sorted((TESTS.parent / "fawkes").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(str(path.relative_to(TESTS.parent)))
    assert {k: v for k, v in where.items() if len(v) > 1} == {}
