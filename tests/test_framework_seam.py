"""The framework seam (issue 23): the service knows nodes, roles, removal modes, samples and jobs,
never a framework's names.  No identifier and no string literal of the code under
``fawkes/coordinator``, ``fawkes/mechanism`` and ``fawkes/store`` names a framework; comments and
docstrings may (they explain what a kind does), and so may ``fawkes/frameworks``, where the kinds live.
"""

from __future__ import annotations

import io
import re
import token
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "fawkes"
PACKAGES = ("coordinator", "mechanism", "store")
NAMES = re.compile(r"spark|hdfs|datanode|namenode|flink|dask", re.IGNORECASE)


def _docstring_starts(source: str) -> set[tuple[int, int]]:
    """(line, column) where each docstring token starts: the first statement of a module, class or
    function when it is a lone string expression."""
    import ast

    starts = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                starts.add((first.lineno, first.col_offset))
    return starts


def leaks(source: str) -> list[tuple[int, str]]:
    """(line, token) of every NAME or non-docstring STRING token naming a framework."""
    docs = _docstring_starts(source)
    out = []
    fstring = 0
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        kind = tok.type
        if kind == getattr(token, "FSTRING_START", None):
            fstring += 1
        elif kind == getattr(token, "FSTRING_END", None):
            fstring -= 1
        check = kind == token.NAME or (kind == token.STRING and tok.start not in docs) \
            or kind == getattr(token, "FSTRING_MIDDLE", None)
        if check and NAMES.search(tok.string):
            out.append((tok.start[0], tok.string))
    return out


def files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_the_checker_sees_names_and_strings_not_comments_or_docstrings():
    src = ('"""Spark docs are fine."""\n'
           "# so are HDFS comments\n"
           "def f(x):\n"
           '    """A docstring naming the NameNode."""\n'
           "    spark_home = 1\n"
           '    y = "hdfs://x"\n'
           "    z = f'{x} DataNode'\n"
           "    return x.Flink, 'dask'\n")
    got = [t for _, t in leaks(src)]
    assert "spark_home" in got and '"hdfs://x"' in got and "Flink" in got and "'dask'" in got
    assert any("DataNode" in t for t in got)
    assert not any("docs" in t or "NameNode" in t for t in got)


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_framework_names_in_the_service(path):
    found = leaks(path.read_text())
    assert not found, f"{path.relative_to(ROOT.parent)}: framework names in code: " + ", ".join(
        f"line {ln}: {t[:60]}" for ln, t in found)
