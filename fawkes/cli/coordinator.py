"""``fawkes coordinator``: run the coordinator service in the foreground."""

from __future__ import annotations

import click

from fawkes.config import load_config


@click.group()
def coordinator() -> None:
    """The long-running coordinator (run it under systemd: scripts/fawkes-coordinator.service)."""


@coordinator.command()
@click.option("--config", "config_path", metavar="FILE", envvar="FAWKES_CONFIG", default=None,
              help="coordinator config (state, inventory, policy, period, metrics)")
@click.option("--inventory", metavar="FILE", default=None, help="inventory file (overrides the config's)")
@click.option("--for", "duration", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="stop after this long (default: until SIGTERM)")
@click.option("--no-metrics", is_flag=True, help="do not serve Prometheus /metrics")
def run(config_path: str | None, inventory: str | None, duration: float | None, no_metrics: bool) -> None:
    """Run the control loop in the foreground; SIGTERM stops it cleanly after the current step."""
    from fawkes.coordinator.metrics_http import serve
    from fawkes.coordinator.service import build, setup_logging

    cfg = load_config(config_path)
    setup_logging(cfg.log_format)
    coord = build(cfg, inventory_path=inventory)
    if not no_metrics:
        _, _, port = serve(coord.store, coord.counters, cfg.metrics.bind, cfg.metrics.port)
        click.echo(f"metrics: http://{cfg.metrics.bind}:{port}/metrics", err=True)
    left = coord.run(duration_s=duration)
    if left:  # worker threads still in driver calls: their intent is recorded, do not wait for them
        import logging
        import os

        logging.shutdown()
        os._exit(0)
