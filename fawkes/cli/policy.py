"""``fawkes policy``: list, show and check weighting policies and presets."""

from __future__ import annotations

import json

import click

from fawkes.mechanism.policies import get_policy, policy_names
from fawkes.presets import preset_names, read_preset


@click.group()
def policy() -> None:
    """Weighting policies and policy presets (policies/*.yaml)."""


@policy.command("list")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def list_(as_json: bool) -> None:
    """The registered policies and the shipped presets."""
    presets = [read_preset(n) for n in preset_names()]
    if as_json:
        click.echo(json.dumps({
            "policies": [{"name": n, "kind": get_policy(n).kind} for n in policy_names()],
            "presets": [{"name": p.name, "description": p.description} for p in presets],
        }, indent=2))
        return
    click.echo("policies: " + ", ".join(f"{n} ({get_policy(n).kind})" for n in policy_names()))
    click.echo("presets:")
    for p in presets:
        click.echo(f"  {p.name:<10} {p.description}")


@policy.command()
@click.argument("preset")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def show(preset: str, as_json: bool) -> None:
    """Every setting of a preset (shipped name or YAML path), defaults included."""
    p = read_preset(preset)
    values = (p.settings or p.resize).model_dump(mode="json")
    if as_json:
        click.echo(json.dumps({"name": p.name, "path": str(p.path), "description": p.description,
                               "settings": values}, indent=2))
        return
    click.echo(f"# {p.path}")
    if p.description:
        click.echo(f"# {p.description}")
    for k, v in values.items():
        click.echo(f"{k}: {json.dumps(v)}")


@policy.command()
@click.argument("files", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="machine-readable output (after every file passed)")
def check(files: tuple[str, ...], as_json: bool) -> None:
    """Validate preset files; the first problem is reported with its file, line and key."""
    checked = []
    for f in files:
        p = read_preset(f)
        checked.append({"file": f, "name": p.name, "ok": True})
        if not as_json:
            click.echo(f"{f}: ok")
    if as_json:
        click.echo(json.dumps(checked, indent=2))
