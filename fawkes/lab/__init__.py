"""The SSH test lab: hosts as network namespaces with their own sshd (see docs/lab.md).

    lab = Lab.up(hosts=4)                 # or Lab.load(dir)
    with lab.executor() as ex:
        ex.run(None, ["hostname"])
    lab.crash("h2"); lab.revive("h2")
    lab.down()
"""

from fawkes.lab import slurm
from fawkes.lab.lab import DEFAULT_DIR, Lab, LabHost, default_dir

__all__ = ["Lab", "LabHost", "DEFAULT_DIR", "default_dir", "slurm"]
