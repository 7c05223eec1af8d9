"""Traces in and out of the simulator (docs/simulation.md, traces/README.md): CSV job traces and
cluster files (:mod:`fawkes.traces.trace`), Spark event logs (:mod:`fawkes.traces.spark_eventlog`),
the coordinator's state as a trace and a cost file (:mod:`fawkes.traces.from_state`,
:mod:`fawkes.traces.costfile`) and plots of a run (:mod:`fawkes.traces.plot`); the CLI is
``fawkes trace`` and ``fawkes simulate --trace / --cost-file / --plot``.  They may import the
simulator (:mod:`fawkes.sim`); it never imports them.
"""
