"""Errors that reach the user as one clear line (and exit code 2), never a traceback."""

from __future__ import annotations


class FawkesError(Exception):
    """Bad input or a refused operation: the message is shown as is, exit code 2."""

    exit_code = 2


class ConfigError(FawkesError):
    """A config, preset, inventory or trace file is invalid.

    The message names the file, and where known the line and the field.
    """

    def __init__(self, file: str | None, message: str, *, line: int | None = None, field: str | None = None):
        where = str(file) if file else "<input>"
        if line is not None:
            where += f":{line}"
        if field:
            where += f": {field}"
        super().__init__(f"{where}: {message}")
        self.file, self.line, self.field, self.detail = file, line, field, message
