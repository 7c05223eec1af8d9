"""The state commands' tables: rich's ``Table``, written directly when it is a plain grid.

``rich`` lays out and renders every cell as a renderable (measure, wrap, pad, crop, style), some
100 µs each: a ``fawkes status`` of 1,000 clusters (14,000 cells) spent over a second in it.  Most
tables are a plain grid: one line per cell, no markup, every column at its natural width, the
whole table narrower than the console.  For those :func:`plain_table` writes the text rich would
write (the same box characters, padding, header and title styles, taken from rich itself) in a few
milliseconds; anything else (markup, wide or control characters, a table wider than the console, a
title wider than the table, no box drawing) is left to rich.  ``tests/test_cli_table.py`` checks
that both give the same bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.console import Console
from rich.table import Table


def rich_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> Table:
    """The table as rich builds it (every column folds when the console is too narrow)."""
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*row)
    return table


def print_table(con: Console, title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    """Print the table on ``con``: directly when it is a plain grid, else through rich."""
    text = plain_table(con, title, columns, rows)
    if text is None:
        con.print(rich_table(title, columns, rows))
    else:
        con.file.write(text)
        con.file.flush()


def plain_table(con: Console, title: str | None, columns: Sequence[str],
                rows: Sequence[Sequence[str]]) -> str | None:
    """The text ``con.print(rich_table(...))`` writes, or None when the table is not a plain grid."""
    if not rows or not columns or any(len(r) != len(columns) for r in rows):
        return None
    options = con.options
    table = Table()
    box = table.box.substitute(options, safe=table.safe_box)
    if box is not table.box or options.legacy_windows or con.is_dumb_terminal:
        return None
    plain: dict[str, bool] = {}

    def is_plain(s: str) -> bool:
        ok = plain.get(s)
        if ok is None:  # what rich makes of the string: the same characters, one cell each, no style
            ok = s.isascii() and s.isprintable() and _unstyled(con, s)
            plain[s] = ok
        return ok

    widths = [len(c) for c in columns]
    for row in rows:
        for i, cell in enumerate(row):
            if not is_plain(cell):
                return None
            widths[i] = max(widths[i], len(cell))
    if not all(is_plain(c) for c in columns) or (title and not is_plain(title)):
        return None
    if not all(widths):  # an empty column: rich merges its padding
        return None
    padded = [w + 2 for w in widths]  # one space either side (rich's default padding)
    total = sum(padded) + len(columns) + 1
    if total > options.max_width or (title and len(title) > total):
        return None
    color = con.color_system is not None
    head_style = con.get_style("table.header")
    title_style = con.get_style("table.title")

    def styled(text: str, style) -> str:
        return style.render(text, color_system=con.color_system) if color else text

    out = []
    if title:  # rich shows no empty title
        out.append(styled(title.ljust(total), title_style))
    out.append(box.get_top(padded))
    cells = (styled(" ", head_style) + styled(c.ljust(w), head_style) + styled(" ", head_style) if color
             else f" {c.ljust(w)} " for c, w in zip(columns, widths))
    out.append(box.head_left + box.head_vertical.join(cells) + box.head_right)
    out.append(box.get_row(padded, "head", edge=True))
    left, mid, right = box.mid_left, box.mid_vertical, box.mid_right
    for row in rows:
        out.append(left + mid.join(f" {c.ljust(w)} " for c, w in zip(row, widths)) + right)
    out.append(box.get_bottom(padded))
    return "\n".join(out) + "\n"


def _unstyled(con: Console, s: str) -> bool:
    text = con.render_str(s, highlight=False)
    return text.plain == s and not text.spans and not text.style
