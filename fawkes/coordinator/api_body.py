"""Request bodies of the HTTP API: read within a size limit, parsed as one JSON object, and each field
checked by the very option of the ``fawkes`` command that takes it (its click type), then by the store,
as the command line is: one :class:`ApiError` naming the field, and nothing written.

A JSON number reaches the option as the text a shell would pass (``repr``), so ``1.5`` for an integer,
``true`` for a number, NaN, an infinity, a negative or ``10**30`` is refused as ``--min-core 1.5`` is."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import click


class ApiError(Exception):
    """One HTTP error: ``status`` and a one-line message (naming the field)."""

    def __init__(self, status: int, message: str, headers: tuple[tuple[str, str], ...] = ()):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers


def read_json(environ: Mapping[str, Any], limit: int) -> dict[str, Any]:
    """The request body as a JSON object: at most ``limit`` bytes (a larger announced body is refused
    unread, 413), ``Content-Type: application/json`` (415), UTF-8 JSON without duplicate keys (400)."""
    ctype = str(environ.get("CONTENT_TYPE") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise ApiError(415, "body: Content-Type must be application/json")
    raw_len = environ.get("CONTENT_LENGTH") or ""
    if not str(raw_len).isdigit():
        raise ApiError(411, "body: Content-Length required")
    length = int(raw_len)
    if length > limit:
        raise ApiError(413, f"body: {length} bytes is more than the limit of {limit}")
    try:
        raw = environ["wsgi.input"].read(length) if length else b""
    except OSError:  # the client stopped sending (timeout) or went away
        raise ApiError(408, "body: not received in time") from None
    if len(raw) != length:
        raise ApiError(400, "body: shorter than its Content-Length")
    try:
        data = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except UnicodeDecodeError:
        raise ApiError(400, "body: not UTF-8") from None
    except (ValueError, RecursionError) as exc:
        raise ApiError(400, f"body: not JSON ({str(exc).splitlines()[0][:120]})") from None
    if not isinstance(data, dict):
        raise ApiError(400, f"body: must be a JSON object, got {type(data).__name__}")
    for k, v in data.items():  # JSON's \ud800 escapes decode to lone surrogates, which no database stores
        try:
            json.dumps([k, v], ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ApiError(400, f"{_show(k.encode('utf-8', 'replace').decode())}: not valid Unicode "
                                "(a lone surrogate)") from None
    return data


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k[:40]!r}")
        out[k] = v
    return out


def only(body: Mapping[str, Any], allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> None:
    """Refuse an unknown field or a missing required one (400 naming it)."""
    for k in body:
        if k not in allowed:
            raise ApiError(400, f"{_show(k)}: unknown field (known: {', '.join(allowed)})")
    for k in required:
        if body.get(k) is None:
            raise ApiError(400, f"{k}: required")


def _show(key: str) -> str:
    return repr(key[:40]) if not key.isidentifier() else key


def _cli_text(field: str, value: Any) -> str:
    """``value`` as the command-line word the option would get: strings as they are, numbers as
    written; anything else (a bool, null, a list, an object) is no option value."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"{field}: must be a string or a number, got {json.dumps(value)[:60]}")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # 'nan', 'inf': the option refuses them as it refuses them typed
    return repr(value)


def option(command: click.Command, param: str, field: str, value: Any) -> Any:
    """``value`` checked and converted by the parameter ``param`` of the CLI ``command`` (None stays
    None); a refusal is an :class:`ApiError` 400 naming ``field``."""
    if value is None:
        return None
    p = next(x for x in command.params if x.name == param)
    if p.type is click.UNPROCESSED or isinstance(p.type, click.types.StringParamType):
        if not isinstance(value, str):
            raise ApiError(400, f"{field}: must be a string, got {json.dumps(value)[:60]}")
        return p.type.convert(value, p, None)
    try:
        return p.type.convert(_cli_text(field, value), p, None)
    except click.BadParameter as exc:
        raise ApiError(400, f"{field}: {' '.join(exc.format_message().split())}") from None


def options(command: click.Command, param: str, field: str, value: Any, *, most: int = 1000) -> list[Any]:
    """A list field of a ``nargs=-1`` parameter (an application's words, job ids): each item as
    :func:`option` checks it."""
    if not isinstance(value, list):
        raise ApiError(400, f"{field}: must be a list, got {json.dumps(value)[:60]}")
    if len(value) > most:
        raise ApiError(400, f"{field}: at most {most} items, got {len(value)}")
    return [option(command, param, f"{field}[{i}]", v) for i, v in enumerate(value)]
