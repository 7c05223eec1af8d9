"""Durable coordinator state: SQLite by default, PostgreSQL by URL.

``Store(url)`` opens (and creates or migrates) the state; its methods are the only way
the CLI and the coordinator read and change it.  See ``docs/state.md`` for the schema,
the lifecycle tables and versioning.
"""

from fawkes.store.api import Store
from fawkes.store.db import normalize_url
from fawkes.store.lifecycle import (
    CLUSTER_TRANSITIONS,
    JOB_TRANSITIONS,
    NODE_TIMEOUTS,
    NODE_TRANSITIONS,
    HostState,
    JobState,
    NodeState,
)
from fawkes.store.migrations import CURRENT as SCHEMA_VERSION
from fawkes.store.migrations import MIGRATIONS, ensure_schema
from fawkes.store.schema import (
    ClusterTransition,
    DecisionRecord,
    Event,
    Framework,
    Host,
    Job,
    MRCluster,
    Node,
    NodeTransition,
    Sample,
)

__all__ = [
    "CLUSTER_TRANSITIONS", "JOB_TRANSITIONS", "MIGRATIONS", "NODE_TIMEOUTS",
    "NODE_TRANSITIONS", "SCHEMA_VERSION", "ClusterTransition", "DecisionRecord", "Event", "Framework", "Host",
    "HostState", "Job", "JobState", "MRCluster", "Node", "NodeState", "NodeTransition", "Sample", "Store",
    "ensure_schema", "normalize_url",
]
