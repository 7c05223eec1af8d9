"""``fawkes plan``: what the next tick would decide now, executing nothing."""

from __future__ import annotations

import json

import click

from fawkes.config import load_config, open_store, state_option


@click.command()
@click.option("--policy", default=None, metavar="NAME_OR_PRESET", help="decide with this policy or preset instead")
@state_option
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def plan(policy: str | None, state: str | None, as_json: bool) -> None:
    """Show what the next tick would do (weights, discrimination, targets, plan); change nothing."""
    from fawkes.coordinator.control import Control, loop_policy
    from fawkes.presets import loop_policy as policy_loop

    cfg = load_config()
    settings, runner = policy_loop(policy) if policy else loop_policy(cfg)
    with open_store(state) as store:
        d = Control(store, settings, runner=runner).preview()
    if as_json:
        click.echo(json.dumps(d.to_dict(), indent=2, default=str))
        return
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
