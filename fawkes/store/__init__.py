"""Durable coordinator state: SQLite by default, PostgreSQL by URL.

``Store(url)`` opens (and creates or migrates) the state; its methods are the only way
the CLI and the coordinator read and change it.  See ``docs/state.md`` for the schema,
the lifecycle tables and versioning.

The names below are imported from their modules on first use (:mod:`fawkes.lazy`): importing
``fawkes.store.db`` or ``fawkes.store.lifecycle`` alone does not load the schema or SQLAlchemy's ORM.
"""

from fawkes.lazy import exports

_WHERE = {
    "Store": "api",
    "normalize_url": "db",
    **dict.fromkeys(["CLUSTER_TRANSITIONS", "JOB_TRANSITIONS", "NODE_TIMEOUTS", "NODE_TRANSITIONS", "HostState",
                     "JobState", "NodeState"], "lifecycle"),
    "SCHEMA_VERSION": "migrations:CURRENT", "MIGRATIONS": "migrations", "ensure_schema": "migrations",
    **dict.fromkeys(["ClusterTransition", "DecisionRecord", "Event", "Framework", "Host", "Job", "MRCluster", "Node",
                     "NodeTransition", "Sample"], "schema"),
}
exports(__name__, _WHERE)

__all__ = sorted(_WHERE)
