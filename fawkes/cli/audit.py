"""``fawkes audit [--since]``: the audit trail (who, what, when, result) of mutating API requests and
commands; and :func:`audited`, which records a command's own row (``cluster request``/``release``,
``submit``, ``jobs cancel``, ``host fail``/``restore``, ``down``, ``token create``/``revoke``)."""

from __future__ import annotations

import getpass
import time
from collections.abc import Iterator
from contextlib import contextmanager

import click

from fawkes.cli.params import count
from fawkes.cli.status import emit_json, json_option, print_table, record, when
from fawkes.config import open_store, state_option
from fawkes.errors import FawkesError


def os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        import os

        return f"uid {os.getuid()}"


@contextmanager
def audited(store, action: str, target: str | None) -> Iterator[None]:
    """Record the command's audit row (actor: the OS user) once its body succeeded.  Bad input writes
    nothing, not even an audit row (the command line's rule); the API audits its refusals, which come
    from other machines."""
    yield
    store.record_audit(actor=f"user {os_user()}", via="cli", action=action, target=target, result="ok")


_SINCE_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def _since(text: str | None) -> float | None:
    if text is None:
        return None
    t = text.strip()
    if t[-1:] in _SINCE_UNIT and t[:-1].isdigit() and len(t) <= 8:
        return time.time() - int(t[:-1]) * _SINCE_UNIT[t[-1]]
    raise FawkesError(f"--since: must be an age such as 30m, 12h or 7d, got {text[:40]!r}")


@click.command()
@click.option("--since", default=None, metavar="AGE", help="only rows of the last AGE (30m, 12h, 7d)")
@click.option("--limit", "-n", type=count(1), default=100, show_default=True, help="the newest N rows")
@state_option
@json_option
def audit(since: str | None, limit: int, state: str | None, as_json: bool) -> None:
    """The audit trail: every mutating API request and command, oldest first."""
    after = _since(since)
    with open_store(state) as store:
        rows = store.audit(since=after, limit=limit)
    if as_json:
        emit_json([record(r) for r in rows])
        return
    print_table(None, ["time", "who", "via", "what", "target", "result", "status", "detail"],
                [(when(r.time), r.actor, r.via, r.action, r.target, r.result, r.status, r.detail) for r in rows])
