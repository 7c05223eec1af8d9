"""Click parameter types shared by the commands: finite, bounded numbers (NaN, inf and 1e300 are
refused by the option's name, in click's one line)."""

from __future__ import annotations

import math

import click

from fawkes.mechanism.model import MAX_SECONDS

#: the largest integer the state stores (SQLite INTEGER, PostgreSQL BIGINT)
INT64_MAX = 2**63 - 1
#: the longest retention a command or config may ask for (100 years)
MAX_KEEP_S = 100 * 365 * 86400.0


class FiniteRange(click.FloatRange):
    """A :class:`click.FloatRange` that also refuses NaN and infinities (FloatRange lets NaN through)."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        rv = click.FloatRange.convert(self, value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return rv


def seconds(minimum: float = 0.0, maximum: float = MAX_SECONDS, *, min_open: bool = False) -> FiniteRange:
    return FiniteRange(min=minimum, max=maximum, min_open=min_open)


def count(minimum: int = 1) -> click.IntRange:
    """An integer >= ``minimum`` that fits the state (at most 2^63-1)."""
    return click.IntRange(min=minimum, max=INT64_MAX)
