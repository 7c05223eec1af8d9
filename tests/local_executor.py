"""An executor that runs each host's command on this machine with ``sh -c``: the text the SSH executor
would send (``fawkes.ssh.shell.render``), for the tests whose "hosts" are directories and processes here
(suspend, a removal's last step, the port check).  ``commands`` records (host, text) in order."""

from __future__ import annotations

import subprocess

from fawkes.ssh.executor import Result
from fawkes.ssh.shell import render


class LocalExecutor:
    def __init__(self):
        self.commands: list[tuple[str, str]] = []

    def run_each(self, commands, *, timeout=None, on_result=None):
        out = {}
        for h, c in commands.items():
            text = render(c)
            self.commands.append((h, text))
            r = subprocess.run(["sh", "-c", text], capture_output=True, text=True, timeout=timeout or 60)
            out[h] = Result(h, r.returncode == 0, r.returncode, r.stdout, r.stderr,
                            None if r.returncode == 0 else f"exit {r.returncode}", 0.0)
            if on_result:
                on_result(out[h])
        return out

    def run(self, hosts, command, *, timeout=None):
        return self.run_each({h: command for h in ([hosts] if isinstance(hosts, str) else hosts)}, timeout=timeout)
