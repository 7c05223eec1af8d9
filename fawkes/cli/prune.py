"""``fawkes prune``: apply the retention config once (the coordinator also does it periodically)."""

from __future__ import annotations

import time

import click

from fawkes.cli.params import MAX_KEEP_S, count, seconds
from fawkes.config import load_config, resolve_state_url, state_option


@click.command()
@click.option("--samples-s", type=seconds(0, MAX_KEEP_S, min_open=True), default=None, metavar="SECONDS",
              help="keep samples this long (overrides retention.samples_s; never below the mechanism's window)")
@click.option("--events-s", type=seconds(0, MAX_KEEP_S, min_open=True), default=None, metavar="SECONDS",
              help="keep events this long (overrides retention.events_s)")
@click.option("--decisions-keep", type=count(1), default=None, metavar="N",
              help="keep the newest N decisions (overrides retention.decisions_keep)")
@click.option("--dry-run", is_flag=True, help="count what would go, delete nothing")
@state_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def prune(samples_s: float | None, events_s: float | None, decisions_keep: int | None,
          dry_run: bool, state: str | None, as_json: bool) -> None:
    """Delete samples, events and decisions older than the retention config says; print what went."""
    from fawkes.cli.status import emit_json, when
    from fawkes.config import mechanism_settings
    from fawkes.coordinator.retention import prune as prune_state
    from fawkes.store import Store

    cfg = load_config()
    overrides = {k: v for k, v in dict(samples_s=samples_s, events_s=events_s, decisions_keep=decisions_keep).items()
                 if v is not None}
    retention = cfg.retention.model_copy(update=overrides)
    settings = mechanism_settings(cfg)
    with Store(resolve_state_url(state), create=False) as store:
        r = prune_state(store, retention, settings, time.time(), dry_run=dry_run)
    if as_json:
        emit_json(r.to_dict())
        return
    verb = "would delete" if dry_run else "deleted"
    if r.samples_before is None:
        click.echo("samples:   kept (retention.samples_s is null)")
    else:
        floor = ", the mechanism's window max(T, T_idle)" if r.samples_kept_s != retention.samples_s else ""
        click.echo(f"samples:   {r.samples} {verb}, older than {when(r.samples_before)} "
                   f"(kept {_span(r.samples_kept_s)}{floor})")
    if r.events_before is None:
        click.echo("events:    kept (retention.events_s is null)")
    else:
        click.echo(f"events:    {r.events} {verb}, older than {when(r.events_before)} "
                   f"(kept {_span(retention.events_s)})")
    if r.decisions_keep is None:
        click.echo("decisions: kept (retention.decisions_keep is null)")
    else:
        click.echo(f"decisions: {r.decisions} {verb} (kept the newest {r.decisions_keep})")


def _span(seconds: float) -> str:
    """``7d``, ``12h``, ``90s``: a retention period as an admin writes it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"
