"""Write an output file whole or not at all, without following anything planted beside it.

The text goes to a new temporary file in the target's directory, created with ``O_EXCL``
(:func:`tempfile.mkstemp`: a random name, never an existing file or symlink), then renamed over the
target.  A fixed name such as ``out.yaml.tmp`` would be opened through a symlink an attacker put
there, overwriting its target.  The result gets the usual mode (0666 minus the umask).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fawkes.errors import FawkesError


def write_atomic(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically; an error is one line naming ``path``."""
    target = Path(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, target)
        tmp = None
    except OSError as exc:
        raise FawkesError(f"{path}: cannot write: {exc.strerror or exc}") from None
    finally:
        if tmp is not None:
            Path(tmp).unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask
