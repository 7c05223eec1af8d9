"""The SSH layer: a parallel executor (paramiko) and quoting helpers for remote shell commands."""

from fawkes.ssh.executor import Executor, Result, Target
from fawkes.ssh.shell import Command, Script, background, env_assignments, quote, render, then, trusted, with_env

__all__ = ["Executor", "Result", "Target", "Command", "Script", "background", "env_assignments", "quote",
           "render", "then", "trusted", "with_env"]
