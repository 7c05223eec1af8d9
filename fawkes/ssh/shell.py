"""Build remote shell commands in which every substituted value is quoted.

    Script("mkdir -p {d} && cd {d} && {java} -version", d=path, java=java_bin)

The template is trusted text written by fawkes; each ``{name}`` value is passed through
:func:`quote` (lists become several quoted words; a nested Script is inserted as is).
An argv sequence is rendered with :func:`shlex.join`.
"""

from __future__ import annotations

import re
import shlex
import string
from collections.abc import Mapping, Sequence
from os import PathLike
from typing import Union

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def quote(value: object) -> str:
    """One shell word that the remote shell turns back into exactly ``str(value)``."""
    if isinstance(value, bool) or value is None:
        raise TypeError(f"refusing to quote {value!r}: pass a string")
    text = str(value) if isinstance(value, (str, int, float, PathLike)) else None
    if text is None:
        raise TypeError(f"cannot quote a {type(value).__name__}")
    if "\0" in text:
        raise ValueError("a NUL byte cannot be passed through a shell")
    return shlex.quote(text)


class Script:
    """A trusted shell template; substituted values are always quoted."""

    __slots__ = ("template", "values", "_text")

    def __init__(self, template: str, /, **values: object):
        self.template = template
        self.values = values
        self._text = self._render()

    def _render(self) -> str:
        out = []
        for literal, name, spec, conv in string.Formatter().parse(self.template):
            out.append(literal)
            if name is None:
                continue
            if spec or conv or not name.isidentifier():
                raise ValueError(f"Script field {{{name}}}: only plain {{name}} fields are allowed")
            if name not in self.values:
                raise KeyError(f"Script field {{{name}}} has no value")
            out.append(_word(self.values[name]))
        return "".join(out)

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return f"Script({self._text!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Script) and other._text == self._text

    def __hash__(self) -> int:
        return hash(self._text)

    def __add__(self, other: "Script") -> "Script":
        return then(self, other)


def _word(value: object) -> str:
    if isinstance(value, Script):
        return str(value)
    if isinstance(value, (list, tuple)):
        return " ".join(quote(v) for v in value)
    return quote(value)


Command = Union[Script, Sequence[str], str]


def render(command: Command) -> str:
    """The shell text of a command: an argv list is joined with quoting, a Script rendered.

    A plain ``str`` is taken as a trusted literal command (no substitution at all): never
    build one from input, use a Script or an argv list for that.
    """
    if isinstance(command, Script):
        return str(command)
    if isinstance(command, str):
        if "\0" in command:
            raise ValueError("a NUL byte cannot be passed through a shell")
        return command
    if isinstance(command, Sequence) and command:
        return " ".join(quote(a) for a in command)
    raise TypeError(f"not a command: {command!r}")


def env_assignments(env: Mapping[str, object]) -> Script:
    """``export A='x' B='y z';`` (names checked, values quoted); empty Script for no env."""
    if not env:
        return Script("")
    parts = []
    for k, v in env.items():
        if not _ENV_NAME.match(k):
            raise ValueError(f"environment variable name {k!r} is not an identifier")
        parts.append(f"{k}={quote(v)}")
    return _trusted("export " + " ".join(parts) + "; ")


def with_env(command: Command, env: Mapping[str, object] | None) -> Script:
    """``command`` run with extra environment variables."""
    return _trusted(str(env_assignments(env or {})) + render(command))


def then(*commands: Command) -> Script:
    """Commands joined with ``&&``."""
    return _trusted(" && ".join(render(c) for c in commands))


def background(command: Command, pid_file: str, log_file: str = "/dev/null",
               env: Mapping[str, object] | None = None) -> Script:
    """Start ``command`` detached with nohup, write its pid to ``pid_file``, return at once.

    The parent directories of ``pid_file`` and ``log_file`` are created.
    """
    inner = render(with_env(command, env)) if env else render(command)
    return Script("mkdir -p \"$(dirname {pid})\" \"$(dirname {log})\" && "
                  "{{ nohup sh -c {inner} > {log} 2>&1 < /dev/null & echo $! > {pid}; }}",
                  pid=pid_file, log=log_file, inner=inner)


def _trusted(text: str) -> Script:
    return Script(text.replace("{", "{{").replace("}", "}}"))


def trusted(text: str) -> Script:
    """Wrap trusted literal shell text (written by fawkes, never from input) as a Script."""
    return _trusted(text)
