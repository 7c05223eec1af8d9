"""Discrete-event simulator of FAWKES (docs/simulation.md): replays the thesis' experiments and
job traces through the same control loop as the coordinator (``fawkes.mechanism.controller``;
docs/mechanism.md).  Entry points: :func:`fawkes.sim.runner.run_matrix` and
:func:`fawkes.sim.runner.compare` (several policies on the same seeds); the CLI is
``fawkes simulate``.  Trace import/export and plots live in :mod:`fawkes.traces`, the seed
papers' experiments in :mod:`fawkes.seeds`; both import the simulator, never the reverse.
"""
