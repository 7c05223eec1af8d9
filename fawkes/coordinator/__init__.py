"""The live coordinator: the mechanism on durable state, carried out over SSH.

* :mod:`view` builds the mechanism's snapshot from the store;
* :mod:`control` decides (tick, admission between ticks, preview) and writes intent;
* :mod:`intent` turns a plan into store rows (nodes requested / draining);
* :mod:`reconcile` converges the hosts to the intent through the framework drivers;
* :mod:`sampler` turns daemon metrics into policy samples;
* :mod:`dispatch` runs each cluster's FIFO job queue;
* :mod:`service` schedules all of it (APScheduler) and serves /metrics
  (:mod:`metrics_http`) and the read-only web dashboard (:mod:`dashboard`) on one server.
"""
