"""Validation of user-supplied values: one-line :class:`FawkesError` naming the field."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fawkes.errors import FawkesError

#: cluster and framework names: usable in paths, unit names, YARN queues and host names
NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,62}$")
#: host names as written in an inventory (RFC 1123 labels, dots allowed, underscores tolerated)
HOST_RE = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9])?$")


def name(field: str, value: object) -> str:
    """Return ``value`` if it is a safe identifier (letter first; letters, digits, ``_``, ``-``; <= 63)."""
    if not isinstance(value, str) or not NAME_RE.fullmatch(value):
        raise FawkesError(
            f"{field}: invalid name {value!r} (a letter, then up to 62 letters, digits, '_' or '-')"
        )
    return value


def host(field: str, value: object) -> str:
    if not isinstance(value, str) or not HOST_RE.fullmatch(value):
        raise FawkesError(f"{field}: invalid host name {value!r}")
    return value


#: the largest integer a database column holds (SQLite INTEGER, PostgreSQL BIGINT)
INT64_MAX = 2**63 - 1


def positive_int(field: str, value: object, *, minimum: int = 1, maximum: int = INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
        raise FawkesError(f"{field}: must be an integer >= {minimum} (at most {maximum}), got {value!r}")
    return value


def optional_number(field: str, value: object, *, minimum: float = 0.0, finite: bool = False) -> float | None:
    """``value`` if None or a number >= ``minimum`` (never NaN; with ``finite``, never infinite)."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum or value != value
            or (finite and value in (float("inf"), float("-inf")))):
        raise FawkesError(f"{field}: must be a number >= {minimum:g}{' and finite' if finite else ''}, got {value!r}")
    return value


def seconds(field: str, value: object) -> float | None:
    """An optional duration: a finite number of seconds > 0, at most a year."""
    if value is None:
        return None
    if (isinstance(value, bool) or not isinstance(value, (int, float)) or value != value
            or not 0 < value <= 365 * 86400):
        raise FawkesError(f"{field}: must be a number of seconds in (0, 31536000], got {value!r}")
    return value


def text(field: str, value: object, *, optional: bool = True) -> str | None:
    """A free string (path, URL): non-empty, single line, no NUL."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip() or any(c in value for c in "\0\n\r"):
        raise FawkesError(f"{field}: must be a non-empty single-line string, got {value!r}")
    return value


def argv(field: str, value: Sequence[object]) -> list[str]:
    items = list(value)
    if not items:
        raise FawkesError(f"{field}: the application command is empty (use: -- APP [ARGS])")
    for item in items:
        if not isinstance(item, str) or "\0" in item:
            raise FawkesError(f"{field}: arguments must be strings without NUL, got {item!r}")
    if not items[0].strip():
        raise FawkesError(f"{field}: the application name is empty")
    return [str(i) for i in items]
