"""Where the shipped data directories (templates/, policies/) live.

An installed wheel carries them as ``fawkes/_data/<name>``; a source checkout (or an
editable install) has them at the top of the repository.
"""

from __future__ import annotations

from pathlib import Path

_PKG = Path(__file__).resolve().parent


def data_dir(name: str) -> Path:
    """Return the directory of shipped data ``name`` ("templates" or "policies")."""
    for candidate in (_PKG / "_data" / name, _PKG.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"fawkes data directory {name!r} not found (broken install?)")
