"""The FAWKES mechanism, pure: functions of a :class:`Snapshot`, no I/O, no clock.

The loop: :mod:`fawkes.mechanism.controller` (``controller.tick`` and ``controller.between``,
each (memory, snapshot) in, (plan, next memory) out), built on :func:`decide` (one tick),
:func:`admit_now` (admission between ticks) and :func:`refill` (grow towards standing targets
as hosts free up); :func:`sample_cluster` builds a policy sample.  Types live in
:mod:`fawkes.mechanism.model`, the loop's memory in :mod:`fawkes.mechanism.memory`.

The names below are imported from their modules on first use (:mod:`fawkes.lazy`): importing
``fawkes.mechanism.model`` alone does not build the settings' schema or register the policies.
"""

from fawkes.lazy import exports

_WHERE = {
    "Admission": "admission", "admit": "admission",
    "Decision": "decide", "admit_now": "decide", "decide": "decide", "refill": "decide",
    "is_inactive": "inactivity", "next_idle_since": "inactivity",
    **dict.fromkeys(["CLUSTER_TRANSITIONS", "ClusterMetrics", "ClusterRequest", "ClusterState", "ClusterView",
                     "Grow", "JobFacts", "NodeView", "Plan", "Role", "Shrink", "ShrinkMode", "Snapshot"], "model"),
    "plan_towards": "plan", "shrink_victims": "plan",
    **dict.fromkeys(["get_policy", "normalise", "policy_names", "register"], "policies"),
    "sample_cluster": "sampling",
    "Settings": "settings",
    "weighted_targets": "targets",
    "ClusterMemory": "memory", "Memory": "memory",
}
exports(__name__, _WHERE, submodules=("controller",))

__all__ = sorted([*_WHERE, "controller"])
