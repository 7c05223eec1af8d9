"""The executor of a SIMULATED inventory: the SSH executor's interface, answered from the world.

What the service itself runs on hosts (besides its drivers, which call the world directly): the
liveness check ``true`` (sampler, reconciler cleanup) and the dispatcher's job launch, poll and cancel.
Those are recognised by their templates and answered from :class:`~fawkes.simfleet.world.World`; any
other command fails with exit code 127 and is counted in the world's report (``unsimulated``), so a
service feature the simulated fleet does not model (CERES' usage windows, suspend, UBIS' lending)
fails visibly instead of passing for real.  A failed host answers nothing (``exit_code`` None), as an
unreachable SSH host does.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping

from fawkes.errors import FawkesError
from fawkes.ssh.executor import Result
from fawkes.ssh.shell import Script, render


class SimulatedExecutor:
    """Thread-safe; one per :class:`~fawkes.inventory.Inventory` fleet (they share its world)."""

    simulated = True

    def __init__(self, world, names: Iterable[str]):
        self.world = world
        self.targets = {n: n for n in names}
        self.failures = 0  # commands a failed host did not answer (fawkes_ssh_failures_total)
        self.connects = 0

    def __enter__(self) -> "SimulatedExecutor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """The coordinator stops: the world's report is written (when the inventory names one)."""
        self.world.write_report()

    def add_target(self, target) -> None:
        raise FawkesError(f"{target.name}: a simulated fleet has no hosts but its own")

    def remove_target(self, name: str) -> None:
        self.targets.pop(name, None)

    def _names(self, hosts) -> list[str]:
        if hosts is None:
            return list(self.targets)
        if isinstance(hosts, str):
            hosts = [hosts]
        names = list(hosts)
        unknown = [h for h in names if h not in self.targets]
        if unknown:
            raise FawkesError(f"unknown host(s): {', '.join(unknown[:5])}")
        return names

    def run(self, hosts, command, *, timeout: float | None = None, env: Mapping[str, object] | None = None,
            on_result: Callable[[Result], None] | None = None) -> dict[str, Result]:
        return self.run_each({h: command for h in self._names(hosts)}, timeout=timeout, on_result=on_result)

    def run_each(self, commands: Mapping[str, object], *, timeout: float | None = None,
                 on_result: Callable[[Result], None] | None = None) -> dict[str, Result]:
        self._names(commands)
        out = {}
        for h, cmd in commands.items():
            r = self._one(h, cmd)
            out[h] = r
            if on_result:
                on_result(r)
        return out

    def put_each(self, files, mode: int = 0o644, on_result=None) -> dict[str, Result]:
        return {h: self._refuse(h, "upload") for h in self._names(files)}

    def put(self, host: str, data, remote_path: str, mode: int = 0o644) -> Result:
        return self._refuse(host, "upload")

    def _refuse(self, host: str, what: str) -> Result:
        with self.world.lock:
            self.world.unsimulated[what] += 1
        msg = f"simulated host: no simulation of {what}"
        return Result(host, False, 127, "", msg, msg, 0.0)

    def _one(self, host: str, cmd) -> Result:
        t0 = time.monotonic()
        w = self.world
        with w.lock:
            w._fail_hosts(w.now())
            h = w.hosts.get(host)
            if h is None or not h.up:
                self.failures += 1
                msg = "simulated host down (failed)" if h is not None else "not a simulated host"
                return Result(host, False, None, "", "", msg, time.monotonic() - t0)
            tpl = cmd.template if isinstance(cmd, Script) else render(cmd)
            vals = cmd.values if isinstance(cmd, Script) else {}
            if tpl.strip() == "true":
                out = ""
            elif "setsid nohup" in tpl and "d" in vals:
                out = w.launch(host, str(vals["d"]), str(vals["inner"]))
            elif "kill -0 $(cat pid)" in tpl and "d" in vals:
                out = w.poll(host, str(vals["d"]))
            elif "body" in vals and "> cancelled" in str(vals["body"]):
                out = w.cancel(host, str(vals["d"]))
            else:
                return self._refuse(host, " ".join(render(cmd).split())[:60])
        return Result(host, True, 0, out, "", None, time.monotonic() - t0)
