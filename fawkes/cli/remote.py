"""The command line as a client of the coordinator's HTTP API (``docs/api.md``).

With ``--url URL`` (or ``FAWKES_URL``) the commands that a team runs (``cluster request``, ``cluster
release``, ``submit``, ``jobs``, ``jobs cancel``, ``status``) send their request to the API instead of
opening the state; without it they open the state as before.  The token comes from ``FAWKES_TOKEN``,
else from a token file (``--token-file``/``FAWKES_TOKEN_FILE``, else ``~/.config/fawkes/token`` when it
exists; readable by its owner only), never from an argument that ``ps`` would show.  Plain ``http://``
is refused to any host but this machine's loopback (the token would cross the network in clear)."""

from __future__ import annotations

import ipaddress
import json
import os
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode, urlsplit

import click

from fawkes.errors import FawkesError

F = TypeVar("F", bound=Callable)
TIMEOUT_S = 30.0


def remote_options(f: F) -> F:
    f = click.option("--token-file", "token_file", metavar="FILE", envvar="FAWKES_TOKEN_FILE", default=None,
                     help="file holding the API token (mode 0600; default: $FAWKES_TOKEN, else "
                          "~/.config/fawkes/token)")(f)
    return click.option("--url", "url", metavar="URL", envvar="FAWKES_URL", default=None,
                        help="the coordinator's API (https://host:port); without it the state is opened "
                             "directly")(f)


def default_token_file() -> Path:
    home = os.environ.get("FAWKES_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".config" / "fawkes") / "token"


def read_token(token_file: str | None) -> str:
    env = os.environ.get("FAWKES_TOKEN")
    if env and not token_file:
        return env.strip()
    path = Path(token_file).expanduser() if token_file else default_token_file()
    where = "--token-file/FAWKES_TOKEN_FILE" if token_file else str(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            raise FawkesError(f"{where}: {path} is not a regular file")
        if st.st_mode & 0o077:
            raise FawkesError(f"{where}: {path} is readable by others (mode {stat.S_IMODE(st.st_mode):o}); "
                              f"chmod 600 {path}")
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        raise FawkesError(f"--url needs a token: set FAWKES_TOKEN or write it to {path} "
                          "(or --token-file FILE)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise FawkesError(f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not text or "\n" in text:
        raise FawkesError(f"{where}: {path} must hold one token on one line")
    return text


def check_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c in url for c in "\0\r\n "):
        raise FawkesError(f"--url/FAWKES_URL: must be http(s)://HOST[:PORT], got {url[:80]!r}")
    if parts.scheme == "http" and not _loopback(parts.hostname):
        raise FawkesError(f"--url/FAWKES_URL: plain http to {parts.hostname} would send the token in clear; "
                          "use https (docs/api.md, TLS)")
    return url.rstrip("/")


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Remote:
    """The API at ``url`` with ``token``."""

    def __init__(self, url: str, token: str):
        self.url, self.token = check_url(url), token

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             query: dict[str, Any] | None = None) -> Any:
        target = self.url + path + (f"?{urlencode({k: v for k, v in query.items() if v is not None})}"
                                    if query else "")
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(target, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Accept": "application/json",
            **({"Content-Type": "application/json"} if data is not None else {})})
        try:
            with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
                return json.loads(resp.read() or b"null")
        except urllib.error.HTTPError as exc:
            try:
                why = json.loads(exc.read()).get("error") or exc.reason
            except (ValueError, AttributeError, OSError):
                why = exc.reason
            raise FawkesError(f"{self.url}: {exc.code} {why}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", None) or exc
            raise FawkesError(f"{self.url}: cannot reach the API: {reason}") from None


def remote(url: str | None, token_file: str | None) -> Remote | None:
    """The API client when ``--url``/``FAWKES_URL`` is given, else None (open the state directly)."""
    if not url:
        return None
    return Remote(url, read_token(token_file))


def cluster_path(name: str) -> str:
    return quote(name, safe="")
