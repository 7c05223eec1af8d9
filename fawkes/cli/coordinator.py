"""``fawkes coordinator``: run the coordinator service in the foreground; ``status``: is one running."""

from __future__ import annotations

import os
import sys

import click

from fawkes.cli.params import seconds
from fawkes.config import load_config, resolve_state_url, state_option


@click.group()
def coordinator() -> None:
    """The long-running coordinator (run it under systemd: scripts/fawkes-coordinator.service)."""


@coordinator.command()
@click.option("--inventory", metavar="FILE", default=None, help="inventory file (overrides the config's)")
@click.option("--for", "duration", type=seconds(1), default=None, metavar="SECONDS",
              help="stop after this long (default: until SIGTERM)")
@click.option("--no-metrics", is_flag=True, help="do not serve Prometheus /metrics (nor the dashboard)")
@click.option("--no-dashboard", is_flag=True, help="serve /metrics only, not the web dashboard "
              "(config: metrics.dashboard: false)")
@state_option
def run(inventory: str | None, duration: float | None, no_metrics: bool, no_dashboard: bool,
        state: str | None) -> None:
    """Run the control loop in the foreground; SIGTERM stops it cleanly after the current step."""
    from fawkes.coordinator.metrics_http import serve
    from fawkes.coordinator.service import run_service, setup_logging

    from fawkes import faults
    from fawkes.errors import FawkesError

    try:
        faults.check()  # a test hook (docs/reliability.md): a malformed value is refused before anything
    except ValueError as exc:
        raise FawkesError(str(exc)) from None
    cfg = load_config()
    if state or os.environ.get("FAWKES_STATE"):  # --state/FAWKES_STATE over the config's state, as everywhere
        cfg = cfg.model_copy(update={"state": resolve_state_url(state)})
    setup_logging(cfg.log_format)
    reserved = None if no_metrics else _reserve_port(cfg)  # the port is taken before anything is written
    served: list[int] = []

    def on_lead(coord) -> None:  # metrics once this process leads (a standby serves none)
        if not no_metrics and not served:
            dashboard = cfg.metrics.dashboard and not no_dashboard
            _, _, port = serve(coord.store, coord.counters, cfg.metrics.bind, cfg.metrics.port, server=reserved,
                               dashboard=dashboard, web_ui=coord.sampler.web_ui, api=cfg.api)
            served.append(port)
            scheme = "https" if cfg.api.tls_cert is not None else "http"
            click.echo(f"metrics: {scheme}://{cfg.metrics.bind}:{port}/metrics"
                       + (f", dashboard: {scheme}://{cfg.metrics.bind}:{port}/" if dashboard else "")
                       + (f", teams' API: {scheme}://{cfg.metrics.bind}:{port}/api/v1/" if cfg.api.enabled else ""),
                       err=True)

    run_service(cfg, inventory_path=inventory, duration_s=duration, on_lead=on_lead)


def _reserve_port(cfg):
    """Bind the metrics/dashboard address now (served once this process leads): a port in use or an
    address not on this machine is one line naming the config's ``metrics``, before any write.  An
    address other than loopback gets a warning: the pages have no authentication."""
    import ipaddress
    import logging

    from fawkes.coordinator.dashboard import reserve_server
    from fawkes.errors import ConfigError

    import errno

    import ssl

    bind, port = cfg.metrics.bind, cfg.metrics.port
    tls = (str(cfg.api.tls_cert), str(cfg.api.tls_key)) if cfg.api.tls_cert is not None else None
    try:
        server = reserve_server(bind, port, tls=tls)
    except ssl.SSLError as exc:
        raise ConfigError(str(cfg.source) if cfg.source else None,
                          f"cannot use the certificate and key: {exc.reason or exc}", field="api.tls_cert") from None
    except OSError as exc:
        field = "metrics.port" if exc.errno in (errno.EADDRINUSE, errno.EACCES) else "metrics.bind"
        raise ConfigError(str(cfg.source) if cfg.source else None,
                          f"cannot listen on {bind}:{port}: {exc.strerror or exc}", field=field) from None
    if bind != "localhost" and not ipaddress.ip_address(bind).is_loopback:
        logging.getLogger("fawkes.coordinator").warning(
            "metrics.bind %s: /metrics and the dashboard are reachable from other machines, without "
            "authentication (bind 127.0.0.1 unless that is wanted)", bind)
        if cfg.api.enabled and tls is None:
            logging.getLogger("fawkes.coordinator").warning(
                "metrics.bind %s: the teams' API is served without TLS to other machines: tokens cross the "
                "network in clear (set api.tls_cert and api.tls_key, or bind 127.0.0.1 behind a TLS reverse "
                "proxy: docs/api.md)", bind)
    return server


@coordinator.command()
@state_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def status(state: str | None, as_json: bool) -> None:
    """Is a coordinator running on this state: pid, uptime, lease (which instance leads), last tick
    and its age.  Read-only.  Exit code 0 when one runs, 3 when none does."""
    from fawkes.cli.status import emit_json
    from fawkes.coordinator.leadership import coordinator_status

    st = coordinator_status(resolve_state_url(state))
    if as_json:
        emit_json(st)
    else:
        for line in _status_lines(st):
            click.echo(line)
    if not st["running"]:
        sys.exit(3)


def _ago(s: float) -> str:
    s = max(0.0, s)
    if s < 120:
        return f"{s:.1f}s"
    m, sec = divmod(int(s), 60)
    h, m = divmod(m, 60)
    d, h = divmod(h, 24)
    return (f"{d}d {h}h {m}m" if d else f"{h}h {m}m {sec}s" if h else f"{m}m {sec}s")


def _status_lines(st: dict) -> list[str]:
    from fawkes.cli.status import when

    lease = st["lease"]
    out = [f"state {st['state']}"]
    if lease is None:
        out.append("coordinator: never ran on this state")
    elif st["running"]:
        out.append(f"coordinator: running, pid {lease['pid']} on {lease['hostname']}, up {_ago(st['uptime_s'])}")
        out.append(f"leader: {lease['holder']} (token {lease['token']}), leading for {_ago(st['leading_s'])}, "
                   f"lease renewed {_ago(st['renewed_ago_s'])} ago, expires in {_ago(st['expires_in_s'])}")
    else:
        why = "its process is gone" if st["process"] == "gone" else f"its lease expired {_ago(-st['expires_in_s'])} ago"
        out.append(f"coordinator: not running (last: pid {lease['pid']} on {lease['hostname']}, token {lease['token']}; "
                   f"{why})")
    tick = st["last_tick"]
    if tick is None:
        out.append("last tick: none yet")
    else:
        late = " (overdue)" if st["running"] and tick["period_s"] and tick["age_s"] > 2 * tick["period_s"] else ""
        out.append(f"last tick: {tick['tick']} at {when(tick['time'])}, {_ago(tick['age_s'])} ago"
                   + (f" (T = {tick['period_s']:g}s)" if tick["period_s"] else "") + late)
    return out
