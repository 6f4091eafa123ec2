"""What a matrix run shows its user: a live line per cell (phase, elapsed) and the final table.

The scheduler only calls a `Handler`; all printing lives here.  `RichHandler` draws live rows
(cell, phase: download / install / probe, elapsed) on a terminal and prints plain timestamped
lines elsewhere (CI logs), where a redrawn display would be noise.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Sequence

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .model import Cell, CellRun, RunStatus, Verdict
from .words import count

_STYLES = {
    Verdict.AFFECTED: "bold red",
    Verdict.NOT_AFFECTED: "green",
    Verdict.REFUSED: "green",
    Verdict.SKIPPED: "dim",
    Verdict.NOT_APPLICABLE: "dim",
}
INFRA_LABEL = "infra failure"


class Handler:
    """Callbacks of a matrix run; the default stays silent.  `phase` comes from worker threads."""

    def start(self, *, to_run: int, reused: int) -> None:
        """`to_run` cells will be installed and probed; `reused` already have a verdict."""

    def phase(self, cell: Cell, phase: str) -> None:
        """`cell` entered `phase` ("download", "install" or "probe")."""

    def finished(self, run: CellRun) -> None:
        """`run` is stored."""

    def close(self) -> None:
        """The run is over (also after Ctrl-C)."""

    def __enter__(self) -> Handler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RichHandler(Handler):
    def __init__(self, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.live = _really_a_terminal(self.console)
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskID] = {}
        self._t0 = time.monotonic()
        self._progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"),
            TextColumn("[cyan]{task.fields[phase]}"), TimeElapsedColumn(),
            console=self.console, transient=True)
        self._overall: TaskID | None = None
        self._done = self._total = 0

    def start(self, *, to_run: int, reused: int) -> None:
        note = f"{reused} already have a verdict in the store" if reused else "none stored yet"
        self.console.print(f"{count(to_run, 'cell')} to probe; {note}")
        self._total = to_run
        if self.live and to_run:
            self._progress.start()
            self._overall = self._progress.add_task(self._count(), total=None, phase="")

    def phase(self, cell: Cell, phase: str) -> None:
        with self._lock:
            if not self.live:
                self.console.print(f"[{time.monotonic() - self._t0:7.1f}s] {cell.id}: {phase}",
                                   highlight=False)
                return
            task = self._tasks.get(cell.id)
            if task is None:
                self._tasks[cell.id] = self._progress.add_task(cell.id, total=None, phase=phase)
            else:
                self._progress.update(task, phase=phase)

    def finished(self, run: CellRun) -> None:
        with self._lock:
            task = self._tasks.pop(run.cell.id, None)
            if task is not None:
                self._progress.remove_task(task)
            self._done += 1
            if self._overall is not None:
                self._progress.update(self._overall, description=self._count())
            self.console.print(_finished_line(run), highlight=False)

    def close(self) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def _count(self) -> str:
        return f"[bold]{self._done}/{self._total} cells done"


def _really_a_terminal(console: Console) -> bool:
    # FORCE_COLOR (set by the workflows for coloured tables) makes rich call any output a
    # terminal; redrawn rows would then pile up in a CI log, so ask the file itself.
    try:
        tty = console.file.isatty()
    except (AttributeError, ValueError):
        tty = False
    return tty and console.is_terminal and not os.environ.get("CI")


def _finished_line(run: CellRun) -> Text:
    secs = f"install {run.seconds_install:.1f} s, probe {run.seconds_probe:.1f} s"
    if run.status is RunStatus.INFRA_FAILURE:
        return Text.assemble(("✗ ", "red"), run.cell.id, "  ", (INFRA_LABEL, "red"),
                             f": {run.reason}  ({secs})")
    verdict = run.verdict or Verdict.ERROR
    return Text.assemble(("✓ ", "green"), run.cell.id, "  ",
                         (verdict.value, _STYLES.get(verdict, "yellow")), f"  ({secs})")


def summary_table(runs: Sequence[CellRun], *, stored: Iterable[str] = (),
                  title: str | None = None) -> Table:
    """One row per run: cell id, verdict, its cases grouped by verdict, seconds, and a note
    (the reason of an infrastructure failure, or when a verdict taken from the store was made)."""
    stored = set(stored)
    table = Table(title=title, title_justify="left")
    table.add_column("cell", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("cases")
    table.add_column("seconds", justify="right", no_wrap=True)
    table.add_column("note")
    for run in sorted(runs, key=lambda r: r.cell.id):
        table.add_row(run.cell.id, _verdict_text(run), cases_text(run),
                      _seconds(run, run.cell.id in stored), _note(run, run.cell.id in stored))
    return table


def print_summary(runs: Sequence[CellRun], *, stored: Iterable[str] = (),
                  console: Console | None = None, title: str | None = None) -> None:
    (console or Console()).print(summary_table(runs, stored=stored, title=title))


def cases_text(run: CellRun) -> Text:
    """The cases grouped by verdict ("all 7 skipped" when they agree), stale rates included:
    one short cell whatever the number of cases, so the table fits a CI log's 80 columns."""
    cases = run.result.cases if run.result else ()
    groups: dict[Verdict, list[str]] = {}
    for case in cases:
        label = case.name
        if case.verdict is Verdict.AFFECTED and case.trials:
            label += f" {case.stale_trials}/{case.trials}"
        groups.setdefault(case.verdict, []).append(label)
    if len(groups) == 1 and len(cases) > 1:
        (verdict,) = groups
        return Text(f"all {len(cases)} {verdict.value}", style=_STYLES.get(verdict, "yellow"))
    text = Text()
    for verdict, names in groups.items():
        if text:
            text.append("; ")
        text.append(verdict.value, style=_STYLES.get(verdict, "yellow"))
        text.append(": " + ", ".join(names))
    return text


def _verdict_text(run: CellRun) -> Text:
    if run.status is RunStatus.INFRA_FAILURE or run.verdict is None:
        return Text(INFRA_LABEL, style="red")
    return Text(run.verdict.value, style=_STYLES.get(run.verdict, "yellow"))


def _seconds(run: CellRun, stored: bool) -> str:
    return "-" if stored else f"{run.seconds_install + run.seconds_probe:.1f}"


def _note(run: CellRun, stored: bool) -> str:
    if run.status is RunStatus.INFRA_FAILURE:
        return run.reason
    return f"stored {run.started[:16].replace('T', ' ')}" if stored else ""
