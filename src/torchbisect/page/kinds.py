"""The runner kinds runners.yaml declares, each with what the store's attendance says of it.

A kind whose runners did not run is no verdict and would otherwise be silently missing from the
page: its GPU model simply has no section.  So each declared kind is listed with the one thing the
store can say: it reported in the latest run (which shards, how many cells probed, reused or
left without a verdict), it did not (and when it last did, or that its GPU's results came from
runs that kept no attendance), or it never has.  "The latest run" is
the run of the newest attendance row, whatever kind wrote it, with all its attempts (a re-run of
a failed shard is the same run); nothing here is guessed beyond the rows, and of a store without
any attendance (an older one, or local runs) each kind is said to be not known.  The scheduled
build's merge adds a roll call for its run (`merge --roll-call`: a row without kind or shard), so
a run in which no shard of any kind reported is still the latest run, and every kind is said to
have missed it, instead of the run before it reading as the latest.

Attendance rows of a kind runners.yaml no longer declares are listed too, as such: the store
holds them, and dropping them would hide where results came from.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from ..utils.words import count
from .parts import KindView


class _Kind(Protocol):  # config.runners.Kind, as far as the page reads it
    # read-only (properties), as the frozen dataclass's fields are
    @property
    def name(self) -> str: ...

    @property
    def gpu(self) -> str: ...

    @property
    def platform(self) -> str: ...

    @property
    def shards(self) -> int: ...

    def matches(self, gpu_name: str) -> bool: ...


class _Attendance(Protocol):  # model.Attendance, read-only as _Kind
    @property
    def is_roll_call(self) -> bool: ...

    @property
    def kind(self) -> str: ...

    @property
    def shard(self) -> str: ...

    @property
    def run(self) -> str: ...

    @property
    def gpu(self) -> str: ...

    @property
    def started(self) -> str: ...

    @property
    def finished(self) -> str: ...

    @property
    def cells(self) -> int: ...

    @property
    def probed(self) -> int: ...

    @property
    def reused(self) -> int: ...

    @property
    def failed(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class _Run:
    key: str  # the workflow run, whatever its attempt
    label: str  # its ids as the rows have them: "100-1" or "100-1, 100-2"
    date: str


def _run_key(run: str) -> str:
    """`<run id>-<attempt>` → the run id: re-running a failed shard is attempt 2 of the same run,
    and the shards attempt 1 finished still count for it (GitHub keeps their results)."""
    match = _ATTEMPT.fullmatch(run)
    return match[1] if match else run


_ATTEMPT = re.compile(r"(\d+)-\d+")


def _latest(attendance: Sequence[_Attendance]) -> _Run | None:
    """The run of the newest row, with every attempt of it."""
    if not attendance:
        return None
    key = _run_key(attendance[-1].run)
    ids = dict.fromkeys(a.run for a in attendance if _run_key(a.run) == key)
    return _Run(key=key, label=", ".join(ids), date=_date(attendance[-1]))


def kind_views(
    kinds: Sequence[_Kind], attendance: Sequence[_Attendance], gpus: Iterable[str]
) -> tuple[KindView, ...]:
    """Each declared kind (in runners.yaml's order), then each undeclared kind that reported;
    `gpus` are the GPU models with results on the page, which a kind links to when it names them."""
    gpus = tuple(gpus)
    latest = _latest(attendance)  # a roll call counts here: it names the run
    attendance = [a for a in attendance if not a.is_roll_call]  # and only here
    views = [
        _view(
            k.name,
            k.platform,
            k.gpu,
            k.shards,
            [a for a in attendance if a.kind == k.name],
            latest,
            tuple(g for g in gpus if k.matches(g)),
        )
        for k in kinds
    ]
    declared = {k.name for k in kinds}
    for name in dict.fromkeys(a.kind for a in attendance if a.kind not in declared):
        rows = [a for a in attendance if a.kind == name]
        seen = {g.strip() for a in rows for g in a.gpu.split(",") if g.strip()}
        views.append(
            _view(
                name,
                "",
                ", ".join(sorted(seen)),
                0,
                rows,
                latest,
                tuple(g for g in gpus if g in seen),
                declared=False,
            )
        )
    return tuple(views)


def _view(
    name: str,
    platform: str,
    gpu: str,
    shards: int,
    rows: list[_Attendance],
    latest: _Run | None,
    gpus: tuple[str, ...],
    *,
    declared: bool = True,
) -> KindView:
    state, text = _state(shards, rows, latest, gpus)
    if not declared:
        text = f"not declared in runners.yaml; {text}"
    return KindView(
        name=name, platform=platform, gpu=gpu, state=state, text=text, gpus=gpus, declared=declared
    )


def _state(
    shards: int, rows: list[_Attendance], latest: _Run | None, gpus: tuple[str, ...]
) -> tuple[str, str]:
    """`gpus`: the GPU models with results on the page that this kind names."""
    if latest is None:  # no kind ever reported: nothing says whether this one ran
        return "unknown", (
            "declared; the store holds no attendance (it was written before "
            "torchbisect kept it, or by runs without `matrix --kind`), so whether "
            "its runners ran is not known"
        )
    if not rows and gpus:  # its GPU's results came from runs that kept no attendance
        return "absent", (
            f"did not report in the latest run (run {latest.label}, {latest.date}); its "
            "results in the store come from runs that kept no attendance (before torchbisect "
            "kept it, or without `matrix --kind`)"
        )
    if not rows:
        return "never", "declared, never reported — its runners have not run the matrix"
    # each shard's newest row in the latest run (a re-run attempt's, when it was re-run)
    now = list({a.shard: a for a in rows if _run_key(a.run) == latest.key}.values())
    if not now:
        last = rows[-1]
        return "absent", (
            f"did not report in the latest run (run {latest.label}, "
            f"{latest.date}); last reported {_date(last)} (run {last.run})"
        )
    seen = sorted({a.shard for a in now}, key=_shard_order)
    missing = _missing_shards(seen, shards)
    cells = sum(a.cells for a in now)
    said = (
        f"reported in the latest run (run {latest.label}, {latest.date}): "
        f"{'shard' if len(seen) == 1 else 'shards'} {', '.join(seen)} seen"
        + (f", {missing} did not report" if missing else "")
        + f"; {count(cells, 'cell')}: {sum(a.probed for a in now)} probed, "
        f"{sum(a.reused for a in now)} reused, "
        f"{sum(a.failed for a in now)} without a verdict"
    )
    return ("partial" if missing else "reported"), said


def _missing_shards(seen: list[str], shards: int) -> str:
    """The shards of the run's fan-out (the `N` of the `i/N` seen, else runners.yaml's count)
    that did not report."""
    sizes = {int(n) for s in seen if (n := s.partition("/")[2]).isdigit()}
    if len(sizes) > 1:  # several fan-outs in one run: nothing sure to say
        return ""
    size = sizes.pop() if sizes else shards
    gone = [f"{i}/{size}" for i in range(1, size + 1) if f"{i}/{size}" not in seen]
    return (("shard " if len(gone) == 1 else "shards ") + ", ".join(gone)) if gone else ""


def _shard_order(shard: str) -> tuple[int, str]:
    head = shard.partition("/")[0]
    return (int(head), shard) if head.isdigit() else (1 << 30, shard)


def _date(a: _Attendance) -> str:
    return (a.finished or a.started)[:10] or "date not recorded"
