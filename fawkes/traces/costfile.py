"""Cost files (``fawkes simulate --cost-file FILE``): YAML of :class:`~fawkes.sim.costs.CostModel` fields.

    # written by `fawkes trace from-state --costs FILE`, or by hand
    map_slots: 1
    reduce_slots: 1
    job_overhead_s: 31.5
    tc_ready_s: 22.0
    apps:                      # optional: per-application fields
      sort: {beta_in: 0.3}
    clusters:                  # optional: per-cluster fields (a pool of several kinds)
      flink: {kind: flink-hdfs, job_startup_s: 21.4, tr_ready_s: 12.0}

Every value is a finite number (or true/false where the field is a flag), checked by the model;
a bad file ends in one line naming the file and the field.  The file's values are overrides like
``--cost KEY=VALUE`` items, which come after them (and win).
"""

from __future__ import annotations

import math
import stat
from pathlib import Path
from typing import Any

import yaml

from fawkes.errors import ConfigError

MAX_BYTES = 1 << 20
MAX_NUMBER = 1e15


def read_text_file(path: str | Path, what: str = "file") -> str:
    """A small regular UTF-8 text file without NUL bytes, or a one-line ConfigError."""
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        raise ConfigError(str(p), f"{what} not found") from None
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(str(p), f"not a regular file (a {what} must be one)")
    if st.st_size > MAX_BYTES:
        raise ConfigError(str(p), f"{st.st_size} bytes; a {what} is at most {MAX_BYTES}")
    try:
        data = p.read_bytes()
    except OSError as exc:
        raise ConfigError(str(p), f"cannot read: {exc.strerror or exc}") from None
    if b"\0" in data:
        raise ConfigError(str(p), "contains a NUL byte: not a text file")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(str(p), f"not UTF-8 (byte {exc.start})") from None


def _value(path: Path, key: str, v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v  # the model says whether a flag fits the field
    if isinstance(v, str):  # YAML 1.1 reads 1e300 (no dot) as text; the model would coerce it
        try:
            num = float(v)
        except ValueError:
            return v  # a literal (penalty: off), or rejected by the model
        return _value(path, key, num) if not math.isfinite(num) or abs(num) > MAX_NUMBER else v
    if isinstance(v, (int, float)):
        if not math.isfinite(v):
            raise ConfigError(str(path), f"not a finite number: {v!r}", field=key)
        if abs(v) > MAX_NUMBER:
            raise ConfigError(str(path), f"{v!r} is out of range (at most {MAX_NUMBER:g})", field=key)
        return v
    raise ConfigError(str(path), f"expected a number, got {type(v).__name__}", field=key)


def load_cost_file(path: str | Path) -> tuple[tuple[str, Any], ...]:
    """The file's fields as validated ``cost_model`` overrides (``apps.NAME.FIELD`` for apps,
    ``clusters.NAME.FIELD`` for one MR-cluster)."""
    p = Path(path)
    return parse_cost_text(read_text_file(p, "cost file"), p)


def parse_cost_text(text: str, p: str | Path) -> tuple[tuple[str, Any], ...]:
    """A cost file's text (named ``p`` in errors) as validated ``cost_model`` overrides."""
    from fawkes.sim.costs import cost_model

    if "\0" in text:
        raise ConfigError(str(p), "contains a NUL byte: not a text file")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(str(p), f"not YAML: {getattr(exc, 'problem', None) or exc}",
                          line=mark.line + 1 if mark else None) from None
    if doc is None:
        return ()
    if not isinstance(doc, dict):
        raise ConfigError(str(p), f"expected a mapping of cost-model fields, got {type(doc).__name__}")
    over: list[tuple[str, Any]] = []
    for k, v in doc.items():
        key = str(k)
        if key in ("apps", "clusters"):
            if not isinstance(v, dict):
                raise ConfigError(str(p), "expected a mapping NAME: {FIELD: VALUE}", field=key)
            for name, fields in v.items():
                where = f"{key}.{str(name)[:64]!r}" if not str(name).isprintable() else f"{key}.{name}"
                if not isinstance(fields, dict):
                    raise ConfigError(str(p), "expected a mapping FIELD: VALUE", field=where)
                for f, x in fields.items():
                    over.append((f"{key}.{name}.{f}", _value(p, f"{where}.{f}", x)))
        else:
            over.append((key, _value(p, key, v)))
    for i, (key, _) in enumerate(over):
        try:
            cost_model(tuple(over[: i + 1]))
        except ValueError as exc:
            msg = str(exc)
            msg = msg[len(key) + 2:] if msg.startswith(key + ": ") else msg
            raise ConfigError(str(p), msg, field=key if key.isprintable() else None) from None
    return tuple(over)
