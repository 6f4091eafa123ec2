"""What a matrix run shows its user: a live line per cell (phase, elapsed) and the final table.

The run (`run_matrix`) and its scheduler call a `Handler`, and the backend tells it each cell's
phase and download progress (a `Handler` is the backend's `Watcher`, given in its options); all
printing lives here.
`RichHandler` draws live rows (cell, phase: download / install / probe, elapsed; bytes, rate
and time left while torchbisect downloads a wheel) under an overall "cells done, time left" row
on a terminal, and prints plain timestamped lines elsewhere (CI logs), where a redrawn display
would be noise.  Time left comes from this run's pace once a cell is done, before that from the
stored timings (`cost`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Sequence

from packaging.version import InvalidVersion, Version
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from ..backends.base import Watcher
from ..exits import Exit
from ..model import Attendance, Cell, CellRun, Channel, RunStatus, Verdict
from ..plan.cost import Cost, describe, duration
from ..utils.console import make_console, print_table
from ..utils.words import count, megabytes

_STYLES = {
    Verdict.AFFECTED: "bold red",
    Verdict.NOT_AFFECTED: "green",
    Verdict.REFUSED: "green",
    Verdict.SKIPPED: "dim",
    Verdict.NOT_APPLICABLE: "dim",
}
INFRA_LABEL = "infra failure"


class Handler(Watcher):
    """Callbacks of a matrix run; the default stays silent.  `phase` and `download` (from
    `Watcher`) come from worker threads."""

    def note(self, text: str) -> None:
        """A sentence for the user: a planning note, a cell not probed, the backend tidied up."""

    def backend_chosen(self, text: str) -> None:
        """The sentence naming the backend chosen, and why."""
        self.note(text)

    def attended(self, attendance: Attendance) -> None:
        """A runner kind's shard has its attendance stored (also after a failure or Ctrl-C)."""

    def start(self, *, to_run: int, reused: int, cost: Cost | None = None) -> None:
        """`to_run` cells will be installed and probed; `reused` already have a verdict."""

    def finished(self, run: CellRun) -> None:
        """`run` is stored."""

    def close(self) -> None:
        """The run is over (also after Ctrl-C)."""

    def __enter__(self) -> Handler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RichHandler(Handler):
    """The live rows on `console` (stderr); the run's sentences on `notes` (default: the same)."""

    def __init__(self, console: Console | None = None, *, notes: Console | None = None):
        self.console = console or make_console(stderr=True)
        self.notes = notes or self.console
        self.live = _really_a_terminal(self.console)
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskID] = {}
        self._t0 = time.monotonic()
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TextColumn("[cyan]{task.fields[phase]}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._overall: TaskID | None = None
        self._done = self._total = 0
        self._per_cell: float | None = None  # stored seconds per cell over the GPUs
        self._shown: dict[str, float] = {}  # when a CI log last got a download line, per cell

    def start(self, *, to_run: int, reused: int, cost: Cost | None = None) -> None:
        self._t0 = time.monotonic()
        if cost is not None:
            self.console.print(describe(cost), highlight=False)
            if cost.seconds_per_cell is not None:
                self._per_cell = cost.seconds_per_cell / max(cost.gpus, 1)
        else:
            note = f"{reused} already have a verdict in the store" if reused else "none stored yet"
            self.console.print(f"{count(to_run, 'cell')} to probe; {note}")
        self._total = to_run
        if self.live and to_run:
            self._progress.start()
            self._overall = self._progress.add_task(f"[bold]{self._count()}", total=None, phase="")

    def note(self, text: str) -> None:
        self.notes.print(text, highlight=False)

    def backend_chosen(self, text: str) -> None:
        self.notes.print(text)

    def attended(self, attendance: Attendance) -> None:
        self.note(
            f"attendance: {attendance.kind} shard {attendance.shard} of run "
            f"{attendance.run}: {count(attendance.cells, 'cell')}, {attendance.probed} "
            f"probed now, {attendance.reused} from the store, {attendance.failed} without "
            "a verdict"
        )

    def phase(self, cell: Cell, phase: str) -> None:
        with self._lock:
            if not self.live:
                self.console.print(
                    f"[{time.monotonic() - self._t0:7.1f}s] {cell.run_name}: {phase}",
                    highlight=False,
                )
                return
            task = self._tasks.get(cell.run_name)
            if task is None:
                self._tasks[cell.run_name] = self._progress.add_task(
                    cell.run_name, total=None, phase=phase
                )
            else:
                self._progress.update(task, phase=phase)

    def download(self, cell: Cell, got: int, total: int | None, rate: float) -> None:
        left = f", {duration((total - got) / rate)} left" if total and rate > 0 else ""
        size = f"{megabytes(got)[:-3]} of {megabytes(total)}" if total else megabytes(got)
        text = f"download {size}, {megabytes(rate)}/s{left}"
        with self._lock:
            now = time.monotonic()
            if self.live and cell.run_name in self._tasks:
                self._progress.update(self._tasks[cell.run_name], phase=text)
            elif not self.live and (got == total or now - self._shown.get(cell.run_name, 0) >= 15):
                self._shown[cell.run_name] = now  # a line every 15 s keeps a CI log readable
                self.console.print(
                    f"[{now - self._t0:7.1f}s] {cell.run_name}: {text}", highlight=False
                )

    def finished(self, run: CellRun) -> None:
        with self._lock:
            task = self._tasks.pop(run.cell.run_name, None)
            if task is not None:
                self._progress.remove_task(task)
            self._done += 1
            if self._overall is not None:
                self._progress.update(self._overall, description=f"[bold]{self._count()}")
            line = _finished_line(run)
            if not self.live and self._done < self._total:
                line.append(f"  [{self._count()}]", style="dim")
            self.console.print(line, highlight=False)

    def close(self) -> None:
        if self._progress.live.is_started:
            self._progress.stop()

    def _count(self) -> str:
        left = self._seconds_left()
        about = f", about {duration(left)} left" if left is not None else ""
        return f"{self._done}/{self._total} cells done{about}"

    def _seconds_left(self) -> float | None:
        """This run's pace once a cell is done (installs overlap probes, GPUs run side by
        side: elapsed time per finished cell measures both); before that, the stored timings."""
        remaining = self._total - self._done
        if not remaining:
            return None
        if self._done:
            return remaining * (time.monotonic() - self._t0) / self._done
        return remaining * self._per_cell if self._per_cell is not None else None


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
        return Text.assemble(
            ("✗ ", "red"),
            run.cell.run_name,
            "  ",
            (INFRA_LABEL, "red"),
            f": {run.reason}  ({secs})",
        )
    verdict = run.verdict or Verdict.ERROR
    if verdict.exit_code is Exit.CANNOT_TELL:  # skipped, inconclusive, a crash: nothing decided
        return Text.assemble(
            ("? ", "yellow"),
            run.cell.run_name,
            "  ",
            (verdict.value, _STYLES.get(verdict, "yellow")),
            f", no verdict  ({secs})",
        )
    return Text.assemble(
        ("✓ ", "green"),
        run.cell.run_name,
        "  ",
        (verdict.value, _STYLES.get(verdict, "yellow")),
        f"  ({secs})",
    )


def summary_table(
    runs: Sequence[CellRun], *, stored: Iterable[str] = (), title: str | None = None
) -> Table:
    """One row per run: cell id (with its probe unless the default one: `Cell.run_name`),
    verdict, its cases grouped by verdict, seconds, and a note (the reason of an infrastructure
    failure, or when a verdict taken from the store was made); `stored` holds run names."""
    table = Table(title=title, title_justify="left")
    table.add_column("cell", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("cases")
    table.add_column("seconds", justify="right", no_wrap=True)
    table.add_column("note")
    for row in _summary_rows(runs, stored):
        table.add_row(*row)
    return table


def _summary_rows(runs: Sequence[CellRun], stored: Iterable[str]) -> list[tuple[str | Text, ...]]:
    stored = set(stored)
    return [
        (
            run.cell.run_name,
            _verdict_text(run),
            cases_text(run),
            _seconds(run, run.cell.run_name in stored),
            _note(run, run.cell.run_name in stored),
        )
        for run in sorted(runs, key=_in_order)
    ]


_CHANNELS = list(Channel)


def _in_order(run: CellRun) -> tuple[int, int, Version, str, str]:
    """A channel's builds oldest first, by version (2.9.0 before 2.13.0, which the cell ids'
    letters put the other way round), as the page lists them."""
    try:
        version, unparsed = Version(run.cell.version), 0
    except InvalidVersion:
        version, unparsed = Version("0"), 1
    return (_CHANNELS.index(run.cell.channel), unparsed, version, run.cell.id, run.cell.probe)


def print_summary(
    runs: Sequence[CellRun],
    *,
    stored: Iterable[str] = (),
    console: Console | None = None,
    title: str | None = None,
) -> None:
    """The summary table, or one line per cell where the table does not fit (utils/console.py)."""
    print_table(
        console or make_console(),
        summary_table(runs, stored=stored, title=title),
        _summary_rows(runs, stored),
    )


def cases_text(run: CellRun) -> Text:
    """The cases grouped by verdict ("all 7 skipped" when they agree), affected rates included:
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
