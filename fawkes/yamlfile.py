"""Load YAML keeping the line of every key, and validate it with a pydantic model.

    data, lines = load_yaml(path)          # lines[("hosts", 0, "port")] == 7
    model = validate(path, InventoryModel)  # ConfigError "file:7: hosts[0].port: ..." on bad input

``lines`` maps a key path (a tuple of mapping keys and list indexes) to the 1-based line
where that key (or list item) starts; the empty path ``()`` is the document.  Duplicate
keys in one mapping are an error (plain PyYAML would silently keep the last one).
Every problem becomes a :class:`fawkes.errors.ConfigError` naming file, line and field.
"""

from __future__ import annotations

import os
import stat

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from fawkes.errors import ConfigError

Lines = dict[tuple, int]
M = TypeVar("M", bound=pydantic.BaseModel)

__all__ = ["Lines", "load_yaml", "load_yaml_text", "validate", "validate_data", "errors_for",
           "field_name", "line_of"]


#: the largest YAML file fawkes reads (an inventory of 100,000 hosts is about 4 MiB; a 30 MB one took
#: minutes and a GB of memory to parse)
MAX_YAML_BYTES = 8 * 1024 * 1024


#: the deepest nesting a YAML file may have (a config or inventory needs fewer than 10 levels)
MAX_YAML_DEPTH = 100
#: libyaml's parser and composer when PyYAML has them (an inventory of 100,000 hosts: ~5x faster)
_FAST = getattr(yaml, "CSafeLoader", None)
_Loader = _FAST or yaml.SafeLoader


def _check_events(text: str) -> None:
    """Refuse aliases and deep nesting before anything is composed, from the parser's events.

    A config, preset or inventory never needs ``*name``, and an alias bomb (a billion laughs)
    expands exponentially in everything that walks the data; 20,000 nested ``[`` would exhaust
    the recursion of the composer."""
    depth = 0
    for ev in yaml.parse(text, Loader=_Loader):
        if isinstance(ev, yaml.AliasEvent):
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not allowed here", ev.start_mark)
        if isinstance(ev, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise RecursionError
        elif isinstance(ev, yaml.CollectionEndEvent):
            depth -= 1


def read_regular(path: Path, limit: int = MAX_YAML_BYTES) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; a FIFO, device or directory is
    refused without blocking on it (opened non-blocking, checked with fstat)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(str(path), "not a regular file")
        if st.st_size > limit:
            raise ConfigError(str(path), f"too large ({st.st_size} bytes; at most {limit})")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise ConfigError(str(path), f"too large (more than {limit} bytes)")
    return data


def load_yaml(path: str | Path) -> tuple[Any, Lines]:
    """Read and parse ``path``; return ``(data, lines)``.  Raises ConfigError."""
    path = Path(path)
    try:
        text = read_regular(path).decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from None
    return load_yaml_text(text, str(path))


def load_yaml_text(text: str, file: str | None = None) -> tuple[Any, Lines]:
    """Parse YAML ``text`` (``file`` only names it in errors); return ``(data, lines)``."""
    loader = None
    try:
        _check_events(text)  # the reader already refuses NUL and other control characters
        loader = _Loader(text)
        node = loader.get_single_node()
        if node is None:
            return None, {(): 1}
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise ConfigError(file, f"invalid YAML: {exc.problem or exc.context}", line=line) from None
    except yaml.YAMLError as exc:
        raise ConfigError(file, f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise ConfigError(file, "invalid YAML: nested too deeply") from None
    finally:
        if loader is not None:
            loader.dispose()
    lines: Lines = {(): node.start_mark.line + 1}
    _walk(node, data, (), lines, file)
    return data, lines


def _walk(node: yaml.Node, data: Any, path: tuple, lines: Lines, file: str | None) -> None:
    if isinstance(node, yaml.MappingNode) and isinstance(data, Mapping):
        seen: set = set()
        for key_node, value_node in node.value:
            key = data_key(key_node)
            if key in seen:
                raise ConfigError(file, f"duplicate key {key!r}", line=key_node.start_mark.line + 1,
                                  field=field_name(path + (key,)))
            seen.add(key)
            lines[path + (key,)] = key_node.start_mark.line + 1
            if key in data:
                _walk(value_node, data[key], path + (key,), lines, file)
    elif isinstance(node, yaml.SequenceNode) and isinstance(data, list):
        for i, (item_node, item) in enumerate(zip(node.value, data)):
            lines[path + (i,)] = item_node.start_mark.line + 1
            _walk(item_node, item, path + (i,), lines, file)


_KEYS = yaml.SafeLoader("")  # one constructor for every key (building one per key was most of a big file's time)


def data_key(key_node: yaml.Node) -> Any:
    """The Python value of a mapping key node (as the safe loader builds it)."""
    if isinstance(key_node, yaml.ScalarNode):
        try:
            return _KEYS.construct_object(key_node)
        finally:
            _KEYS.constructed_objects.clear()
    return repr(key_node)


def field_name(path: Sequence, data: Any = None) -> str:
    """``("hosts", 0, "port")`` -> ``"hosts[0].port"``.  With the ``data`` the path walks, a number
    that is a mapping's key (``1: x`` in YAML) is named as a key, ``1``, not as an index ``[1]``."""
    out = ""
    cur = data
    for part in path:
        if isinstance(part, int) and not isinstance(cur, Mapping):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
        cur = cur.get(part) if isinstance(cur, Mapping) else (
            cur[part] if isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur) else None)
    return out


def line_of(lines: Lines, path: Sequence) -> int | None:
    """The line of the longest prefix of ``path`` that has one."""
    path = tuple(path)
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path)


def _data_path(data: Any, loc: Sequence) -> tuple:
    """Keep only the parts of a pydantic error location that are real keys of ``data``."""
    out: list = []
    cur = data
    for part in loc:
        if isinstance(cur, Mapping) and part in cur:
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            out.append(part)
            cur = cur[part]
        elif isinstance(cur, Mapping) and isinstance(part, str) and not part.startswith(("function-", "union")) \
                and "[" not in part:
            out.append(part)  # a missing or extra field: name it, line of its parent
            cur = None
        # else: pydantic-internal loc part (union member, validator name): skip
    return tuple(out)


def errors_for(file: str | None, data: Any, lines: Lines, exc: pydantic.ValidationError) -> list[ConfigError]:
    """Turn each pydantic error into a ConfigError with file, line and field."""
    out = []
    for err in exc.errors(include_url=False):
        path = _data_path(data, err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        elif err["type"] == "missing":
            msg = "required field missing"
        elif err["type"] == "invalid_key":
            msg = f"a key must be a name, not {type(err['input']).__name__} {err['input']!r}"
        if not path and isinstance(data, Mapping):  # a check across fields that names one first: point at it
            first = msg.split(" ", 1)[0]
            if first in data:
                path = (first,)
        out.append(ConfigError(file, msg, line=line_of(lines, path), field=field_name(path, data) or None))
    return out


def validate_data(file: str | Path | None, data: Any, lines: Lines, model_cls: type[M],
                  context: dict | None = None) -> M:
    """Validate already loaded data; the first problem is raised as ConfigError."""
    file = str(file) if file is not None else None
    try:
        return model_cls.model_validate(data, context=context)
    except pydantic.ValidationError as exc:
        errors = errors_for(file, data, lines, exc)
        first = errors[0]
        if len(errors) > 1:
            more = len(errors) - 1
            raise ConfigError(first.file, f"{first.detail} (and {more} more problem{'s' * (more > 1)})",
                              line=first.line, field=first.field) from None
        raise first from None


def validate(path: str | Path, model_cls: type[M], context: dict | None = None) -> M:
    """Load ``path`` and validate it with ``model_cls`` (use ``extra='forbid'`` models)."""
    data, lines = load_yaml(path)
    return validate_data(path, data, lines, model_cls, context=context)
