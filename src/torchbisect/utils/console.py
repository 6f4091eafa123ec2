"""The one way commands get a rich Console, and how a table reaches one that is too narrow.

On a terminal, rich's usual console: the terminal's width, live redraws.  Anywhere else (a pipe, a
file, a CI log) rich would wrap at 80 columns, breaking sentences mid-path and squeezing a table's
note column into fragments; there nothing wraps: a sentence is one line, which a log viewer wraps
for its reader and which stays whole for grep and copy.  A table is drawn when its rows fit
(the terminal's width; elsewhere $COLUMNS, else 120), otherwise each row becomes one line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Sequence

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

from .words import visible

_UNWRAPPED = 1_000_000  # columns of a console that is not a terminal: wide enough never to wrap
_LOG_COLUMNS = 120  # how wide a table may be in a log (when $COLUMNS does not say)


class _Console(Console):
    """rich's Console, showing the control codes of what it prints (a probe's ESC sequence, a
    BEL in a path) as words.visible says; rich's own codes (colour, cursor) are not text."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            yield (
                segment
                if segment.control or segment.text == visible(segment.text)
                else Segment(visible(segment.text), segment.style)
            )


def make_console(*, stderr: bool = False) -> Console:
    """A console on stdout (or stderr) that wraps only on a terminal."""
    if is_terminal(sys.stderr if stderr else sys.stdout):
        return _Console(stderr=stderr)
    return _Console(stderr=stderr, soft_wrap=True, width=_UNWRAPPED)


def is_terminal(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, ValueError):
        return False


def print_table(console: Console, table: Table, rows: Sequence[Sequence[str | Text]]) -> None:
    """`table` when its widest row fits, else a line of the column names and one line per row
    (`rows`: the table's cells as given to it)."""
    natural = console.measure(table, options=console.options.update_width(_UNWRAPPED)).maximum
    if natural <= _fit_width(console):
        console.print(table)
        return
    if table.title:
        console.print(table.title, soft_wrap=True, highlight=False)
    names = [str(column.header) for column in table.columns]
    console.print(Text("  ".join(names), style="dim"), soft_wrap=True)
    for row in rows:
        cells = [Text(c) if isinstance(c, str) else c for c in row]  # "-": a column stays put
        console.print(
            Text("  ").join(c if c.plain else Text("-") for c in cells),
            soft_wrap=True,
            highlight=False,
        )


def _fit_width(console: Console) -> int:
    if console.width < _UNWRAPPED:  # a terminal, or a width someone chose
        return console.width
    try:
        return int(os.environ.get("COLUMNS", "")) or _LOG_COLUMNS
    except ValueError:
        return _LOG_COLUMNS
