"""A SIMULATED fleet for the real coordinator: a test and capacity-planning tool, never a default.

An inventory with ``simulated: N`` (inventory/README.md) stands for N hosts that exist only in the
coordinator's process: :mod:`~fawkes.simfleet.world` keeps them (daemons that start, register and
decommission after latencies drawn from a cost file, jobs that run their tasks on the slots their
cluster holds, hosts that fail at a set rate), :mod:`~fawkes.simfleet.executor` answers the service's
commands from it instead of SSH, and the framework kind ``simulated`` (``fawkes/frameworks/simulated.py``)
drives it behind the same contract as every real kind.  :mod:`~fawkes.simfleet.player` requests a
trace's clusters and submits its jobs to the state as a user would.  The store, sampler, controller,
reconciler, dispatcher, metrics and dashboard are the real ones, unchanged (docs/simulated-fleet.md).
"""
