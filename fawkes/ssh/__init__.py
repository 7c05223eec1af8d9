"""The SSH layer: a parallel executor (paramiko) and quoting helpers for remote shell commands.

The names below are imported on first use (PEP 562): a submodule such as ``fawkes.ssh.cgroups``
or ``fawkes.ssh.shell`` does not pull in paramiko (a tenth of a second) for a reader of the state
(``fawkes status``) that never opens a connection."""

from __future__ import annotations

import importlib

_FROM = {"Executor": "executor", "Result": "executor", "Target": "executor",
         **{n: "shell" for n in ("Command", "Script", "background", "env_assignments", "quote", "render", "then",
                                  "trusted", "with_env")}}

__all__ = [
    "Command",
    "Executor",
    "Result",
    "Script",
    "Target",
    "background",
    "env_assignments",
    "quote",
    "render",
    "then",
    "trusted",
    "with_env",
]


def __getattr__(name: str):
    module = _FROM.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
