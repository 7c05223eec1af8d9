"""fawkes.cli.table: a plain grid written directly is byte for byte what rich writes; anything
else goes through rich."""

from __future__ import annotations

import io
import random

import pytest
from rich.console import Console

from fawkes.cli.table import plain_table, print_table, rich_table

ALPHABET = "abc XYZ 0123.-_:/()#*,"


def rich_text(title, columns, rows, *, width: int, terminal: bool) -> str:
    buf = io.StringIO()
    Console(file=buf, soft_wrap=False, width=width, force_terminal=terminal).print(rich_table(title, columns, rows))
    return buf.getvalue()


def fast_text(title, columns, rows, *, width: int, terminal: bool) -> str | None:
    con = Console(file=io.StringIO(), soft_wrap=False, width=width, force_terminal=terminal)
    return plain_table(con, title, columns, rows)


def test_random_plain_grids_are_what_rich_writes():
    rng = random.Random(26)
    written = 0
    for _ in range(1500):
        terminal = rng.random() < 0.5
        width = rng.choice([40, 80, 160])
        n = rng.randint(1, 6)
        columns = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(1, 8))) for _ in range(n)]
        rows = [["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12))) for _ in range(n)]
                for _ in range(rng.randint(1, 6))]
        title = rng.choice([None, "", "forecast: when hosts free up", "t"])
        got = fast_text(title, columns, rows, width=width, terminal=terminal)
        if got is None:
            continue
        written += 1
        assert got == rich_text(title, columns, rows, width=width, terminal=terminal), (title, columns, rows)
    assert written > 500  # most of them are plain grids; the rest went to rich


@pytest.mark.parametrize("cell", ["[bold]x[/bold]", "x :smile: y", "naïve", "日本", "a\tb", "a\nb", "\x1b[1mx"])
def test_anything_rich_would_change_goes_to_rich(cell):
    assert fast_text(None, ["a", "b"], [["x", cell]], width=160, terminal=False) is None


def test_too_wide_for_the_console_or_a_title_wider_than_the_table_goes_to_rich():
    rows = [["x" * 30, "y" * 30]]
    assert fast_text(None, ["a", "b"], rows, width=60, terminal=False) is None
    assert fast_text(None, ["a", "b"], rows, width=80, terminal=False) is not None
    assert fast_text("t" * 70, ["a", "b"], rows, width=160, terminal=False) is None
    assert fast_text(None, ["a"], [], width=160, terminal=False) is None  # no rows: rich


def test_print_table_writes_the_same_either_way():
    rows = [[f"c{i:04d}", "spark-hdfs", "active", str(i % 7), "", "0.001"] for i in range(300)]
    columns = ["cluster", "kind", "state", "min", "draining", "weight"]
    for terminal in (False, True):
        buf = io.StringIO()
        print_table(Console(file=buf, soft_wrap=False, width=160, force_terminal=terminal), "title", columns, rows)
        assert buf.getvalue() == rich_text("title", columns, rows, width=160, terminal=terminal)
        rows[5][1] = "[red]x[/red]"  # now through rich: still the same text
