"""Policy presets: named YAML files in ``policies/`` (or any path) holding mechanism settings.

A preset is a flat mapping of :class:`fawkes.mechanism.Settings` fields plus an optional
``description``.  A preset whose ``policy`` is a chapter-2 runner policy (GS, GG, GGD,
static) holds :class:`fawkes.mechanism.koala_mr.ResizeParams` fields instead.  Unknown keys,
wrong types and out-of-range values are a :class:`ConfigError` naming the file, line and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import ConfigDict

from fawkes.errors import ConfigError, FawkesError
from fawkes.mechanism.koala_mr import ResizeParams
from fawkes.mechanism.settings import Settings
from fawkes.resources import data_dir
from fawkes.yamlfile import load_yaml, validate_data

CH2_POLICIES = ("GS", "GG", "GGD", "static")


class _SettingsFile(Settings):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""


class _ResizeFile(ResizeParams):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""


@dataclass(frozen=True)
class Preset:
    name: str
    path: Path
    description: str
    settings: Settings | None = None  # a FAWKES preset
    resize: ResizeParams | None = None  # a chapter-2 (KOALA-MR) preset


def preset_names() -> list[str]:
    return sorted(p.stem for p in data_dir("policies").glob("*.yaml"))


def find_preset(name_or_path: str | Path) -> Path:
    """A path to an existing file, or the name of a shipped preset."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise ConfigError(str(p), "no such preset file")
        return p
    shipped = data_dir("policies") / f"{name_or_path}.yaml"
    if not shipped.is_file():
        raise FawkesError(f"unknown preset {str(name_or_path)!r}; shipped presets: {', '.join(preset_names())}")
    return shipped


def read_preset(name_or_path: str | Path) -> Preset:
    path = find_preset(name_or_path)
    data, lines = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(str(path), "a preset is a mapping of setting: value", line=lines.get(()))
    if str(data.get("policy", "")) in CH2_POLICIES:
        r = validate_data(path, data, lines, _ResizeFile)
        params = ResizeParams(**r.model_dump(exclude={"description"}))
        return Preset(path.stem, path, r.description, resize=params)
    s = validate_data(path, data, lines, _SettingsFile)
    return Preset(path.stem, path, s.description, settings=Settings(**s.model_dump(exclude={"description"})))


def load_preset(name_or_path: str | Path) -> Settings:
    """The mechanism settings of a FAWKES preset (shipped name or YAML path)."""
    preset = read_preset(name_or_path)
    if preset.settings is None:
        raise ConfigError(str(preset.path), f"{preset.resize.policy} is a chapter-2 runner policy, not a FAWKES preset", field="policy")
    return preset.settings


def settings_for(policy_or_preset: str, **overrides) -> Settings:
    """A policy name (``TD``) or a preset (name or path), with field overrides applied."""
    from fawkes.mechanism.policies import policy_names

    if policy_or_preset.lower() in (n.lower() for n in policy_names()):
        base = Settings(policy=policy_or_preset)
    else:
        base = load_preset(policy_or_preset)
    return Settings(**(base.model_dump() | overrides)) if overrides else base
