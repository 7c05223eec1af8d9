"""Discrete-event simulator of FAWKES (spec B.3): replays the thesis' experiments and job traces
with the mechanism library unchanged.  Entry points: :func:`fawkes.sim.runner.run` and
:func:`fawkes.sim.runner.compare`; the CLI is ``fawkes simulate``.
"""
