"""``fawkes plan``: what the next tick would decide now, executing nothing; ``--at TIME``: with the
minima the config's schedules give at that time (``docs/mechanism.md``, scheduled minima)."""

from __future__ import annotations

import json
import re
import time

import click

from fawkes.config import load_config, open_store, state_option
from fawkes.errors import FawkesError

_AHEAD = re.compile(r"^\+\s*([0-9]{1,9}(?:\.[0-9]{1,6})?)\s*([smhdw])$", re.IGNORECASE)
_SPAN_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_MAX_AHEAD_S = 10 * 366 * 86400.0


def parse_at(text: str, now: float) -> float:
    """``--at``: ``+3h`` (ahead of now), an ISO date/time (UTC unless given), epoch seconds, or a
    span back from now (``12h``, as ``--since`` elsewhere).  One-line FawkesError otherwise."""
    from fawkes.cli.trace import parse_when

    if len(text) > 64:
        raise FawkesError("--at: longer than 64 characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise FawkesError("--at: a newline, NUL or other control character")
    m = _AHEAD.match(text.strip())
    if m:
        ahead = float(m.group(1)) * _SPAN_S[m.group(2).lower()]
        if ahead > _MAX_AHEAD_S:
            raise FawkesError(f"--at: {text[:40]!r} is more than 10 years ahead")
        return now + ahead
    try:
        return parse_when("--at", text, now)
    except FawkesError:
        raise FawkesError(f"--at: expected +SPAN ahead (+3h, +2d), an ISO date/time (2026-11-28T01:30Z, UTC unless "
                          f"given), epoch seconds, or a span back (12h), not {text[:40]!r}") from None


@click.command()
@click.option("--policy", default=None, metavar="NAME_OR_PRESET", help="decide with this policy or preset instead")
@click.option("--at", "at_text", default=None, metavar="TIME",
              help="the minima the schedules give at TIME (+3h, 2026-11-28T01:30Z, epoch seconds), on today's state")
@state_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def plan(policy: str | None, at_text: str | None, state: str | None, as_json: bool) -> None:
    """Show what the next tick would do (weights, discrimination, targets, plan); change nothing."""
    from fawkes.config import loop_policy
    from fawkes.coordinator.control import Control
    from fawkes.presets import loop_policy as policy_loop

    cfg = load_config()
    at = None if at_text is None else parse_at(at_text, time.time())
    settings, runner = policy_loop(policy) if policy else loop_policy(cfg)
    if policy and cfg.schedules:  # the config's schedules hold whatever policy decides
        settings = settings.model_copy(update={"schedules": tuple(s.as_setting() for s in cfg.schedules)})
    with open_store(state) as store:
        control = Control(store, settings, runner=runner)
        d = control.preview(minima_at=at)
        scheduled = _scheduled(control.snapshot(minima_at=at), settings, at) if at is not None else None
    if as_json:
        out = d.to_dict()
        if scheduled is not None:
            out |= {"at": at, "scheduled": scheduled}
        click.echo(json.dumps(out, indent=2, default=str))
        return
    if scheduled is not None:
        click.echo(f"at {_iso(at)}: " + ("no schedule active" if not scheduled["active"] else
                                           f"{len(scheduled['active'])} schedule(s) active"))
        for s in scheduled["active"]:
            click.echo(f"  {s['cluster']:<16} min {s['min_core']} from {_iso(s['from'])} until {_iso(s['until'])} "
                       f"(cron {s['cron']!r} {s['timezone']})")
        for name, m in scheduled["minima"].items():
            click.echo(f"  {name:<16} minimum {m['own']} -> {m['effective']}"
                       + (f" (schedule {m['scheduled']}, capped: the pool holds no more)"
                          if m["effective"] < m["scheduled"] else ""))
    click.echo(f"policy {d.policy}, T={settings.period_s:g}s, tau={settings.tau:g}: {d.reason}")
    for name in d.targets:
        w = d.weights.get(name)
        disc = d.discrimination.get(name)
        click.echo(f"  {name:<16} weight {'-' if w is None else f'{w:.3f}':>6}  "
                   f"D {'-' if disc is None else f'{disc:+.2f}':>8}  target {d.targets[name]}")
    for g in d.plan.grows:
        click.echo(f"  + {g.cluster}: {g.host} as {g.role.value}")
    for s in d.plan.shrinks:
        click.echo(f"  - {s.cluster}: {s.node} ({s.role.value}, {s.mode.value})")
    if d.plan.empty:
        click.echo("  no change")


def _scheduled(snap, settings, at: float) -> dict:
    """The schedules active at ``at`` and, per live cluster they name, its own, scheduled and effective
    minimum (the effective one as the decision saw it: capped by the pool)."""
    from fawkes.mechanism import schedules as sch

    active = []
    for s in settings.schedules:
        t = sch.last_fire(s, at)
        if t is not None:
            active.append({"cluster": s[0], "cron": s[1], "min_core": s[2], "timezone": s[4], "from": t,
                           "until": t + s[3]})
    wanted = sch.minima_at(settings.schedules, at)
    minima = {c.name: {"own": c.core_minimum, "scheduled": wanted[c.name], "effective": c.min_core}
              for c in snap.clusters if c.name in wanted}
    return {"active": active, "minima": minima}


def _iso(t: float) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
