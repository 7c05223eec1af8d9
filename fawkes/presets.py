"""Policy presets: named YAML files in ``policies/`` (or any path) holding mechanism settings.

A preset is a flat mapping of :class:`fawkes.mechanism.Settings` fields plus an optional
``description``.  A preset whose ``policy`` is a chapter-2 runner policy (GS, GG, GGD,
static) holds :class:`fawkes.mechanism.koala_mr.ResizeParams` fields instead.  Unknown keys,
wrong types and out-of-range values are a :class:`ConfigError` naming the file, line and key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from fawkes.errors import ConfigError, FawkesError
from fawkes.mechanism.koala_mr import RUNNER_POLICIES, ResizeParams
from fawkes.mechanism.settings import Settings
from fawkes.resources import data_dir
from fawkes.yamlfile import load_yaml, validate_data

#: the chapter-2 runner policies (one table: fawkes.mechanism.koala_mr)
CH2_POLICIES = RUNNER_POLICIES


class _SettingsFile(Settings):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""


class _ResizeFile(ResizeParams):
    model_config = ConfigDict(frozen=True, extra="forbid")
    description: str = ""


@dataclass(frozen=True)
class Preset:
    """A preset file, read and validated once.  ``explicit`` names the settings the file sets
    (an experiment's own defaults fill in the rest, ``fawkes simulate``)."""

    name: str
    path: Path
    description: str
    settings: Settings | None = None  # a FAWKES preset
    resize: ResizeParams | None = None  # a chapter-2 (KOALA-MR) preset
    explicit: frozenset[str] = frozenset()


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
    runner = str(data.get("policy", "")) in CH2_POLICIES
    model = validate_data(path, data, lines, _ResizeFile if runner else _SettingsFile)
    explicit = frozenset(model.model_fields_set - {"description"})
    if runner:
        return Preset(path.stem, path, model.description, resize=_base(model, ResizeParams), explicit=explicit)
    return Preset(path.stem, path, model.description, settings=_base(model, Settings), explicit=explicit)


def _base(model, cls):
    """The validated file model as its base class (same values, no second validation)."""
    return cls.model_construct(_fields_set=model.model_fields_set - {"description"},
                               **{k: getattr(model, k) for k in cls.model_fields})


def load_preset(name_or_path: str | Path) -> Settings:
    """The mechanism settings of a FAWKES preset (shipped name or YAML path)."""
    preset = read_preset(name_or_path)
    if preset.settings is None:
        raise ConfigError(str(preset.path), f"{preset.resize.policy} is a chapter-2 runner policy, not a FAWKES preset", field="policy")
    return preset.settings


def loop_policy(policy_or_preset: str, **overrides: Any) -> tuple[Settings, ResizeParams | None]:
    """What the coordinator's loop runs: FAWKES settings, plus the runner parameters when the
    policy is a chapter-2 one (GS, GG, GGD, static, or such a preset), whose offer period is then
    the loop's period.  ``overrides`` are settings the caller validated (a config's periods)."""
    name = next((p for p in CH2_POLICIES if p.lower() == policy_or_preset.lower()), None)
    if name is not None:
        resize = ResizeParams.for_policy(name)
    else:
        preset = None if _is_policy_name(policy_or_preset) else read_preset(policy_or_preset)
        if preset is None or preset.resize is None:
            return settings_for(policy_or_preset, **overrides), None
        resize = preset.resize
    if "period_s" in overrides:
        resize = resize.model_copy(update={"offer_period_s": overrides["period_s"]})
    overrides["period_s"] = resize.offer_period_s
    return Settings(policy="None").model_copy(update=overrides), resize


def settings_for(policy_or_preset: str, **overrides: Any) -> Settings:
    """A policy name (``TD``) or a FAWKES preset (name or path), with ``overrides`` (already
    validated values, such as a config's periods) applied."""
    base = Settings(policy=policy_or_preset) if _is_policy_name(policy_or_preset) else load_preset(policy_or_preset)
    return base.model_copy(update=overrides) if overrides else base


def _is_policy_name(text: str) -> bool:
    from fawkes.mechanism.policies import policy_names

    return text.lower() in (n.lower() for n in policy_names())
