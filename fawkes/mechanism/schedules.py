"""Scheduled minima (issue 27, item 3): a cluster's minimum raised on a cron schedule for a while.

A schedule is ``(cluster, cron, min_core, seconds, timezone)`` (``Settings.schedules``; the
coordinator config's ``schedules:``, a preset's too).  It is active from each time its cron
expression fires (APScheduler's :class:`CronTrigger`, five crontab fields) for ``seconds``.
:func:`minima_at` is the pure function time -> minimum per cluster; :func:`raise_minima` feeds it
into a :class:`Snapshot` before the decision sees it.  Both snapshot builders call :func:`apply`:
the coordinator's (:func:`fawkes.coordinator.view.build_snapshot`) and the simulator's
(``fawkes.sim.engine``), so the decision loop itself is unchanged and the simulator replays
schedules exactly as the coordinator applies them.

What a raised minimum does (``docs/mechanism.md``, scheduled minima):

* it only raises: the minimum is the largest of the cluster's own ``min_core`` and every active
  schedule's value (overlapping schedules: the largest wins);
* it is a floor on the cluster's target (targets, shrink victims, admission's committed minima);
  the nodes above the cluster's own minimum are grown as the policy's ``grow_type`` (TC or TR),
  never as core nodes, so they can leave again when the schedule ends (core nodes never do);
* it never takes the pool past its minima: a raised minimum is capped at what the pool's
  capacity leaves after every other admitted cluster's minimum (clusters in admission order),
  so the mechanism's invariant "the minima fit the pool" (admission, A-9) still holds; while
  it holds capacity, queued requests whose minimum no longer fits wait, as for any minimum;
* it applies to admitted clusters only: a request still queued is admitted at its own minimum.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from functools import lru_cache

from fawkes.mechanism.model import Snapshot

#: a schedule's longest duration (366 days)
MAX_DURATION_S = 366 * 86400.0
MAX_CRON = 200
_DURATION = re.compile(r"^(?:(\d{1,6})d)?(?:(\d{1,7})h)?(?:(\d{1,9})m)?(?:(\d{1,10})s)?$")
_DOW = re.compile(r"^(\*|[a-z]{3}(-[a-z]{3})?(,[a-z]{3}(-[a-z]{3})?)*)$", re.IGNORECASE)
#: where check_cron looks for a first firing (a fixed time: the check does not depend on the clock)
_FROM = datetime(2000, 1, 1, tzinfo=UTC)

Schedule = tuple[str, str, int, float, str]  # cluster, cron, min_core, seconds, timezone


def duration_seconds(v: object) -> float:
    """A schedule's ``for``: seconds (a finite number > 0) or ``3h``, ``90m``, ``1d12h``, ``45s``;
    at most :data:`MAX_DURATION_S`.  Raises ValueError."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise ValueError(f"seconds or a duration such as 3h, 90m, 1d12h, not {type(v).__name__}")  # noqa: TRY004
    if isinstance(v, str):
        m = _DURATION.match(v.strip()) if len(v) <= 40 else None
        if m is None or not any(m.groups()):
            raise ValueError(f"{v[:40]!r}: seconds or a duration such as 3h, 90m, 1d12h, 45s")
        d, h, mi, s = (int(x or 0) for x in m.groups())
        v = d * 86400 + h * 3600 + mi * 60 + s
    if not (math.isfinite(v) and 0 < v <= MAX_DURATION_S):
        raise ValueError(f"{v!r}: more than 0 s and at most {MAX_DURATION_S:g} s (366 days)")
    return float(v)


@lru_cache(maxsize=1024)
def trigger(cron: str, tz: str):
    from apscheduler.triggers.cron import CronTrigger

    return CronTrigger.from_crontab(cron, timezone=tz)


def check_timezone(tz: object) -> str:
    """An IANA time zone name (``UTC``, ``Europe/Amsterdam``).  Raises ValueError."""
    from zoneinfo import ZoneInfo

    if not isinstance(tz, str) or not re.fullmatch(r"[A-Za-z][A-Za-z0-9_+/-]{0,63}", tz) or ".." in tz:
        raise ValueError(f"{str(tz)[:40]!r} is not a time zone name")
    try:
        ZoneInfo(tz)
    except Exception:  # noqa: BLE001 -- ZoneInfoNotFoundError, ValueError, IsADirectoryError...
        raise ValueError(f"{tz!r}: unknown time zone") from None
    return tz


def check_cron(cron: object, tz: str = "UTC") -> str:
    """Five crontab fields (minute hour day month day-of-week) that APScheduler reads and that fire at
    least once.  The day of week must be ``*`` or day names (``mon-fri``, ``sat,sun``): numbers mean
    other days to APScheduler (0 = Monday) than to cron (0 = Sunday).  Raises ValueError."""
    if not isinstance(cron, str):
        raise ValueError(f"a crontab string such as '0 1 * * *', not {type(cron).__name__}")  # noqa: TRY004
    if len(cron) > MAX_CRON:
        raise ValueError(f"longer than {MAX_CRON} characters")
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in cron):
        raise ValueError("a newline, NUL or other control character")
    fields = cron.split()
    if len(fields) != 5:
        raise ValueError(f"{cron[:60]!r}: five fields (minute hour day month day-of-week), got {len(fields)}")
    if not _DOW.match(fields[4]):
        raise ValueError(f"day of week {fields[4][:20]!r}: write * or day names (mon-fri, sat,sun); numbers "
                         "mean other days to APScheduler (0 = Monday) than to cron (0 = Sunday)")
    try:
        t = trigger(" ".join(fields), tz)
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{cron[:60]!r}: {str(exc)[:120]}") from None
    if t.get_next_fire_time(None, _FROM) is None:
        raise ValueError(f"{cron[:60]!r} never fires")
    return " ".join(fields)


def _first_fire(s: Schedule, since: float) -> float | None:
    """The first firing of ``s`` after ``since`` (exclusive), or None."""
    _, cron, _, _, tz = s
    t = trigger(cron, tz)
    fire = t.get_next_fire_time(None, datetime.fromtimestamp(since, tz=UTC))  # at or after since
    if fire is not None and fire.timestamp() <= since:
        fire = t.get_next_fire_time(fire, fire)
    return None if fire is None else fire.timestamp()


def active(s: Schedule, at: float) -> bool:
    """Whether schedule ``s`` holds at ``at``: it fired in (at - seconds, at]."""
    first = _first_fire(s, at - s[3])
    return first is not None and first <= at


def last_fire(s: Schedule, at: float) -> float | None:
    """The latest firing of ``s`` in (at - seconds, at] (the one whose window reaches furthest), None
    when it is not active at ``at``.  A search of about log2(seconds) firings (for display: the
    decision needs only :func:`active`)."""
    first = _first_fire(s, at - s[3])
    if first is None or first > at:
        return None
    lo, hi = 0.0, at - first  # a firing at or after at - hi and at or before at; find the latest
    while hi - lo > 0.5:
        mid = (lo + hi) / 2
        f = _first_fire(s, at - mid - 1e-6)
        if f is not None and f <= at:
            hi = at - f  # a firing at f: look for a later one
        else:
            lo = mid
    return at - hi


def minima_at(schedules: Iterable[Schedule], at: float) -> dict[str, int]:
    """Per cluster, the largest minimum of its schedules active at ``at`` (none active: absent)."""
    out: dict[str, int] = {}
    for s in schedules:
        if active(s, at):
            out[s[0]] = max(out.get(s[0], 0), s[2])
    return out


def raise_minima(snap: Snapshot, minima: Mapping[str, int]) -> Snapshot:
    """``snap`` with each admitted cluster's ``min_core`` raised to ``minima`` (never lowered), its own
    kept as ``core_min``; capped so that the minima of all admitted clusters fit ``snap.capacity``
    (clusters in admission order: an earlier cluster's raise goes first)."""
    if not minima or not any(c.name in minima for c in snap.clusters):
        return snap
    room = snap.capacity - sum(c.min_core for c in snap.clusters)
    out = []
    for c in snap.clusters:
        want = minima.get(c.name, 0)
        if want > c.min_core and room > 0:
            up = min(want - c.min_core, room)
            room -= up
            out.append(replace(c, min_core=c.min_core + up, core_min=c.min_core))
        else:
            out.append(c)
    return replace(snap, clusters=tuple(out))


def apply(snap: Snapshot, schedules: Iterable[Schedule], at: float | None = None) -> Snapshot:
    """The snapshot the decision sees: ``snap`` with the minima of ``schedules`` active at ``at``
    (default: ``snap.now``)."""
    schedules = tuple(schedules)
    if not schedules:
        return snap
    return raise_minima(snap, minima_at(schedules, snap.now if at is None else at))
