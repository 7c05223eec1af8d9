"""fawkes.yamlfile: line numbers per key path, pydantic errors as ConfigError with file/line/field."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict, Field

from fawkes.errors import ConfigError
from fawkes.yamlfile import field_name, load_yaml, validate


class Item(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    size: int = Field(ge=1)


class Doc(BaseModel):
    model_config = ConfigDict(extra="forbid")
    title: str
    items: list[Item] = []


def write(tmp_path, text):
    p = tmp_path / "doc.yaml"
    p.write_text(text)
    return p


def test_lines_per_key_path(tmp_path):
    p = write(tmp_path, "title: x\n# comment\nitems:\n  - name: a\n    size: 1\n  - {name: b, size: 2}\n")
    data, lines = load_yaml(p)
    assert data["items"][1] == {"name": "b", "size": 2}
    assert lines[("title",)] == 1
    assert lines[("items",)] == 3
    assert lines[("items", 0)] == 4 and lines[("items", 0, "size")] == 5
    assert lines[("items", 1, "name")] == 6


def test_validate_ok(tmp_path):
    doc = validate(write(tmp_path, "title: x\nitems: [{name: a, size: 3}]\n"), Doc)
    assert doc.items[0].size == 3


@pytest.mark.parametrize("text,line,field,words", [
    ("title: x\nitems:\n  - name: a\n    size: 0\n", 4, "items[0].size", "greater than or equal to 1"),
    ("title: x\nitems:\n  - name: a\n    size: 1\n    colour: red\n", 5, "items[0].colour", "unknown field"),
    ("title: x\nitems:\n  - size: 1\n", 3, "items[0].name", "required field missing"),
    ("items: []\n", 1, "title", "required field missing"),
    ("title: x\ntitle: y\n", 2, "title", "duplicate key"),
    ("title: [unclosed\n", 2, None, "invalid YAML"),
])
def test_errors_name_file_line_field(tmp_path, text, line, field, words):
    p = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        validate(p, Doc)
    e = err.value
    assert (e.file, e.line, e.field) == (str(p), line, field)
    assert words in str(e)
    assert str(e).startswith(f"{p}:{line}")
    assert "\n" not in str(e)


def test_several_problems_are_counted(tmp_path):
    p = write(tmp_path, "title: 1\nitems:\n  - {name: a, size: 0}\n  - {name: b, size: -1}\n")
    with pytest.raises(ConfigError, match=r"and 2 more problems"):
        validate(p, Doc)


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        validate(tmp_path / "nope.yaml", Doc)
    with pytest.raises(ConfigError):
        validate(write(tmp_path, ""), Doc)


def test_field_name():
    assert field_name(("hosts", 3, "labels", 0)) == "hosts[3].labels[0]"
    assert field_name(()) == ""


def test_hostile_files_are_one_line_errors_and_never_block(tmp_path):
    """NUL bytes, a FIFO (would block a plain read forever), a directory, an alias bomb, deep nesting
    and an oversized file: each is a ConfigError naming the file, raised at once."""
    import os

    from fawkes.yamlfile import MAX_YAML_BYTES, load_yaml

    nul = tmp_path / "nul.yaml"
    nul.write_bytes(b"a: 1\x00\n")
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    bomb = tmp_path / "bomb.yaml"
    lines, prev = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]'], "a"
    for name in "bcdefghijk":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
        prev = name
    bomb.write_text("\n".join(lines) + "\n")
    deep = tmp_path / "deep.yaml"
    deep.write_text("a: " + "[" * 20000 + "]" * 20000 + "\n")
    big = tmp_path / "big.yaml"
    with big.open("wb") as f:
        f.truncate(MAX_YAML_BYTES + 1)
    cases = {nul: "unacceptable character #x0000", fifo: "not a regular file", tmp_path: "not a regular file",
             bomb: "aliases (*name) are not allowed", deep: "nested too deeply", big: "too large"}
    for path, words in cases.items():
        with pytest.raises(ConfigError) as err:
            load_yaml(path)
        msg = str(err.value)
        assert msg.startswith(str(path)) and words in msg and "\n" not in msg, msg
