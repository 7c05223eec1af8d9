"""What every results file under bench/results/ records beside its figures: the command, the commit,
the date and the machine's load (docs cite figures only from files that carry these)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def commit() -> str:
    """HEAD's commit, with ``+dirty`` when the working tree has uncommitted changes."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True,
                              timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def meta() -> dict:
    return {"command": " ".join([Path(sys.argv[0]).name if sys.argv[0] else "python3", *sys.argv[1:]]),
            "commit": commit(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load": [round(x, 2) for x in os.getloadavg()]}
