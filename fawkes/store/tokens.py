"""Teams' HTTP API tokens (schema v11): created with a random secret shown once, stored as its
SHA-256 only, expiring, revocable.  See :mod:`fawkes.coordinator.api_http` for how they are used and
``docs/api.md`` for the scopes."""

from __future__ import annotations

import hashlib
import math
import secrets

from sqlmodel import col, select, update

from fawkes.errors import FawkesError
from fawkes.store import validate
from fawkes.store.base import StoreBase
from fawkes.store.schema import ApiToken

#: what a token may do; ``admin``: every action on every cluster
SCOPES = ("submit", "cancel", "status", "request", "release", "admin")
#: a token's secret: this prefix, then 43 URL-safe characters (32 random bytes)
SECRET_PREFIX = "fawkes_"
#: the longest a token may live: 10 years
MAX_TOKEN_S = 10 * 365 * 86400.0
_MAX_SECRET_LEN = 200


def secret_hash(secret: str) -> str:
    """The SHA-256 (hex) of a token's secret: what the state keeps."""
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()


def check_scopes(field: str, scopes: object) -> list[str]:
    items = list(scopes) if isinstance(scopes, (list, tuple)) else None
    if not items or any(not isinstance(s, str) or s not in SCOPES for s in items):
        raise FawkesError(f"{field}: must be one or more of {', '.join(SCOPES)}, got {scopes!r}")
    return list(dict.fromkeys(items))


class TokensMixin(StoreBase):
    """API tokens."""

    def create_token(self, team: str, scopes: list[str], clusters: list[str], *,
                     expires_s: float | None) -> tuple[ApiToken, str]:
        """A new token for ``team``: returns (its record, its secret).  The secret is not stored (only its
        SHA-256) and cannot be shown again.  ``clusters``: the cluster names it may act on (none with
        the admin scope: every one); ``expires_s``: seconds from now (None: never)."""
        validate.name("team", team)
        scopes = check_scopes("scope", scopes)
        clusters = list(dict.fromkeys(validate.name("clusters", c) for c in clusters))
        if not clusters and "admin" not in scopes:
            raise FawkesError("clusters: name the clusters the token may act on (or give it the admin scope)")
        if expires_s is not None and (isinstance(expires_s, bool) or not isinstance(expires_s, (int, float))
                                      or not math.isfinite(expires_s) or not 0 < expires_s <= MAX_TOKEN_S):
            raise FawkesError(f"expires: must be a duration in (0, {MAX_TOKEN_S:.0f}] seconds or never, "
                              f"got {expires_s!r}")
        secret = SECRET_PREFIX + secrets.token_urlsafe(32)
        now = self.clock()
        with self.session(write=True) as s:
            t = ApiToken(team=team, secret_sha256=secret_hash(secret), scopes=scopes, clusters=clusters,
                         created_at=now, expires_at=None if expires_s is None else now + expires_s)
            s.add(t)
            s.flush()
            self._event(s, "token", f"token {t.id} created for team {team} (scopes {','.join(scopes)}; "
                        f"clusters {','.join(clusters) or 'all'})")
            return t, secret

    def list_tokens(self) -> list[ApiToken]:
        with self.session() as s:
            return list(s.exec(select(ApiToken).order_by(col(ApiToken.id))).all())

    def revoke_token(self, token_id: int) -> ApiToken:
        """Revoke token ``token_id`` (from now on refused); revoking it again changes nothing."""
        validate.positive_int("id", token_id)
        now = self.clock()
        with self.session(write=True) as s:
            t = s.get(ApiToken, token_id)
            if t is None:
                raise FawkesError(f"token {token_id}: no such token")
            if t.revoked_at is None:
                t.revoked_at = now
                s.add(t)
                self._event(s, "token", f"token {t.id} of team {t.team} revoked")
            s.flush()
            return t

    def authenticate(self, secret: object) -> ApiToken:
        """The live token whose secret is ``secret``; else :class:`FawkesError` saying why (unknown,
        revoked, expired), never echoing the secret."""
        if (not isinstance(secret, str) or not secret.startswith(SECRET_PREFIX) or len(secret) > _MAX_SECRET_LEN
                or not secret.isprintable()):
            raise FawkesError("token: not a fawkes token")
        with self.session() as s:
            t = s.exec(select(ApiToken).where(ApiToken.secret_sha256 == secret_hash(secret))).first()
        if t is None:
            raise FawkesError("token: unknown")
        if t.revoked_at is not None:
            raise FawkesError(f"token {t.id}: revoked")
        if t.expires_at is not None and t.expires_at <= self.clock():
            raise FawkesError(f"token {t.id}: expired")
        return t

    def touch_token(self, token_id: int) -> None:
        """Note that token ``token_id`` was used now (``fawkes token list`` shows it)."""
        with self.session(write=True) as s:
            s.execute(update(ApiToken).where(ApiToken.id == token_id).values(last_used_at=self.clock()))
