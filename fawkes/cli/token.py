"""``fawkes token create|list|revoke``: the teams' tokens for the HTTP API (``docs/api.md``).

These open the state directly (an admin on the coordinator's machine); the secret of a new token is
printed once, on stdout, and never stored (only its SHA-256) nor logged."""

from __future__ import annotations

import re

import click

from fawkes.cli.audit import audited
from fawkes.cli.status import emit_json, json_option, print_table, when
from fawkes.config import open_store, state_option
from fawkes.errors import FawkesError
from fawkes.store.tokens import MAX_TOKEN_S, SCOPES

_DURATION = re.compile(r"^([0-9]{1,6})([smhdw]?)$")
_UNIT = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(field: str, text: str) -> float | None:
    """``30d``, ``12h``, ``90m``, ``3600`` (seconds) or ``never`` (None), at most 10 years."""
    if text == "never":
        return None
    m = _DURATION.match(text)
    if not m or int(m.group(1)) == 0 or int(m.group(1)) * _UNIT[m.group(2)] > MAX_TOKEN_S:
        raise FawkesError(f"{field}: must be a duration such as 30d, 12h, 90m or 3600 (seconds), at most "
                          f"{MAX_TOKEN_S / 86400:.0f}d, or never; got {text[:40]!r}")
    return float(int(m.group(1)) * _UNIT[m.group(2)])


def _csv(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()] if text else []


@click.group()
def token() -> None:
    """Teams' tokens for the coordinator's HTTP API (docs/api.md)."""


@token.command()
@click.argument("team")
@click.option("--scope", "scope", required=True, metavar="LIST",
              help=f"comma-separated: {', '.join(SCOPES)} (admin: everything, on every cluster)")
@click.option("--clusters", default="", metavar="LIST", help="comma-separated cluster names the token may act on")
@click.option("--expires", default="30d", show_default=True, metavar="DURATION",
              help="how long it is valid: 30d, 12h, 90m, SECONDS or never")
@state_option
@json_option
def create(team: str, scope: str, clusters: str, expires: str, state: str | None, as_json: bool) -> None:
    """Create a token for TEAM; its secret is printed once (keep it in a file of mode 0600)."""
    expires_s = parse_duration("--expires", expires)
    with open_store(state) as store, audited(store, "token.create", team):
        t, secret = store.create_token(team, _csv(scope), _csv(clusters), expires_s=expires_s)
    if as_json:
        emit_json({"id": t.id, "team": t.team, "scopes": t.scopes, "clusters": t.clusters,
                   "expires_at": t.expires_at, "token": secret})
        return
    click.echo(secret)
    click.echo(f"token {t.id} for team {t.team}: scopes {','.join(t.scopes)}, clusters "
               f"{','.join(t.clusters) or 'all'}, expires {when(t.expires_at) or 'never'}. The secret above is "
               "shown once and not kept: give it to the team (FAWKES_TOKEN or a token file).", err=True)


@token.command(name="list")
@state_option
@json_option
def list_(state: str | None, as_json: bool) -> None:
    """Every token: team, scopes, clusters, expiry, revocation, last use (never a secret)."""
    with open_store(state) as store:
        rows = store.list_tokens()
    if as_json:
        emit_json([{k: getattr(t, k) for k in ("id", "team", "scopes", "clusters", "created_at", "expires_at",
                                               "revoked_at", "last_used_at")} for t in rows])
        return
    print_table(None, ["id", "team", "scopes", "clusters", "created", "expires", "revoked", "last used"],
                [(t.id, t.team, ",".join(t.scopes), ",".join(t.clusters) or "all", when(t.created_at),
                  when(t.expires_at) or "never", when(t.revoked_at), when(t.last_used_at)) for t in rows])


@token.command()
@click.argument("token_id", metavar="ID", type=click.IntRange(1, 2**63 - 1))
@state_option
@json_option
def revoke(token_id: int, state: str | None, as_json: bool) -> None:
    """Revoke token ID: refused from its next request on."""
    with open_store(state) as store, audited(store, "token.revoke", f"token {token_id}"):
        t = store.revoke_token(token_id)
    if as_json:
        emit_json({"id": t.id, "team": t.team, "revoked_at": t.revoked_at})
    else:
        click.echo(f"token {t.id} of team {t.team}: revoked")
