"""UBIS U-6: T_alloc tuned online by hill-climbing (spec seeds, UBIS U-6; ``docs/ambiguities.md``).

A node lends its slack to opportunistic tasks while its use is under ``T_alloc`` x its capacity
(U-2).  A higher ``T_alloc`` lends more slack and lets the watchdog preempt more (U-3).  The climb
reads, every window, what lending gained: the work opportunistic tasks did (task-seconds of
progress), less the work the preemptions threw away (the progress of the tasks stopped), per
second of the window.  It moves ``T_alloc`` one step in its current direction after a window that
gained at least as much as the one before, and turns round after a window that gained less or
when the step would leave ``[lo, hi]``.  A window in which no task waited for slack measures nothing about
``T_alloc`` (there was nothing to lend to): it leaves the state as it is.  Pure: the caller keeps
the state and measures the windows.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class TallocClimb:
    """The climb's state: the current ``t_alloc``, its step, bounds and direction (+1 up, -1 down), and
    the last window's gain (None before the first window)."""

    t_alloc: float = 0.7
    step: float = 0.05
    lo: float = 0.5
    hi: float = 0.95
    direction: int = 1
    last_gain: float | None = None

    def __post_init__(self) -> None:
        if not (0 < self.lo <= self.t_alloc <= self.hi <= 1) or self.step <= 0 or self.direction not in (1, -1):
            raise ValueError("0 < lo <= t_alloc <= hi <= 1, step > 0 and direction +1 or -1")


def window_gain(opportunistic_work_s: float, lost_work_s: float, window_s: float) -> float:
    """What lending slack gained over a window: opportunistic progress less the preempted tasks' progress
    thrown away, per second."""
    return (opportunistic_work_s - lost_work_s) / window_s


def climb(state: TallocClimb, gain: float, waited: bool = True) -> TallocClimb:
    """The state after a window that gained ``gain`` (``window_gain``); ``waited``: some task waited for
    slack during the window (else nothing is learnt)."""
    if not waited:
        return state
    d = state.direction
    if state.last_gain is not None and gain < state.last_gain:
        d = -d
    t = round(state.t_alloc + d * state.step, 6)
    if not state.lo <= t <= state.hi:  # at a bound: the only way left is back
        d = -d
        t = min(state.hi, max(state.lo, round(state.t_alloc + d * state.step, 6)))
    return replace(state, t_alloc=t, direction=d, last_gain=gain)
