"""The regression a page is about, as its probe's own file says it (probe/info.py).

The report knows no bug of its own: the title, the description, the workaround, the case labels,
the controls and the API whose absence makes a build `not_applicable` are the probe file's
literals, read without running it.  The runs name their probe (`CellRun.cell.probe`); when that
file is not at hand (a store measured elsewhere, a probe since removed) the page still draws,
named after the probe, its cases by their own names.

A probe file is text anyone can write, so what is taken from it is made plain here: control
codes dropped, whitespace folded, lengths bounded, links only when they are https.  Escaping for
HTML and Markdown stays the templates' and `md_text`'s job, as for any probe output.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .. import defaults
from ..errors import ConfigError
from ..model import CellRun, Verdict
from ..probe.info import ProbeInfo, read_info
from ..probe.scripts import probe_path, shipped
from .timeline import safe_url

_TITLE_LIMIT = 200
_TEXT_LIMIT = 2000
_LABEL_LIMIT = 80


@dataclass(frozen=True, kw_only=True)
class Regression:
    """What a page, its Markdown, its OSV record and its status issue call the regression."""

    probe: str  # the probe's name (the matrix's `probe:`), its folder on a site of several
    title: str
    description: str = ""
    upstream_issue: str = ""  # https only, else ""
    fix_pr: str = ""  # https only, else ""
    workaround: str = ""
    requires_api: str = ""  # a build without it was measured without the regression's code
    case_labels: dict[str, str] = field(default_factory=dict)  # in the page's order
    case_notes: dict[str, str] = field(default_factory=dict)
    controls: dict[str, Verdict] = field(default_factory=dict)
    osv_id: str = ""
    workaround_bench: str = ""  # reports/bench/<this>.json measures the workaround's cost
    workaround_cost: dict[str, str] = field(default_factory=dict)  # how it is quoted (info.py)
    variants: dict[str, str] = field(default_factory=dict)  # how a case's variants are counted
    trial_cases: dict[str, int] = field(default_factory=dict)  # cases judged over trials
    needs_gpu: bool = False  # the probe says it needs a GPU: the self-check says so
    file: Path | None = None  # the probe file, published beside the page for the self-check
    shipped: bool = False  # the file is one of torchbisect's own probes (no folder to name)

    def label(self, case: str) -> str:
        return self.case_labels.get(case, case)

    @property
    def check_file(self) -> str:
        """The probe's file name as published beside the page, "" when it is not at hand."""
        return self.file.name if self.file else ""


def regression_for(probe: str = defaults.PROBE) -> Regression:
    """The probe's file read (never run), or a Regression named after the probe when the file is
    not there or cannot be read."""
    stem = probe.partition(":")[0]
    try:
        info = read_info(probe_path(stem), name=stem)
    except (ConfigError, OSError):
        return Regression(
            probe=stem, title=_plain(stem.replace("_", " "), _TITLE_LIMIT), osv_id=osv_id(stem)
        )
    return from_info(info)


def from_info(info: ProbeInfo) -> Regression:
    return Regression(
        probe=info.name,
        title=_plain(info.title, _TITLE_LIMIT) or info.name,
        description=_plain(info.description, _TEXT_LIMIT),
        upstream_issue=safe_url(_plain(info.upstream_issue, _TEXT_LIMIT)),
        fix_pr=safe_url(_plain(info.fix_pr, _TEXT_LIMIT)),
        workaround=_plain(info.workaround, _TEXT_LIMIT),
        requires_api=_plain(info.requires_api, _LABEL_LIMIT),
        case_labels=_plain_map(info.case_labels),
        case_notes=_plain_map(info.case_notes),
        controls={
            _plain(k, _LABEL_LIMIT): Verdict(v)
            for k, v in info.controls.items()
            if v in {x.value for x in Verdict}
        },
        osv_id=_plain(info.osv_id, _LABEL_LIMIT) or osv_id(info.name),
        workaround_bench=_BENCH.sub("", info.workaround_bench)[:_LABEL_LIMIT],
        workaround_cost=_plain_map(info.workaround_cost),
        variants=_plain_map(info.variants),
        trial_cases=dict(info.trial_cases),
        needs_gpu=info.needs_gpu,
        file=info.path,
        shipped=shipped(info.path),
    )


def probe_of(runs: Iterable[CellRun]) -> str:
    """The probe these runs were made with: the first one named (a page draws one probe's)."""
    return next((r.cell.probe for r in runs if r.cell.probe), defaults.PROBE)


_OSV_ID = re.compile(r"[^A-Za-z0-9.-]+")
_BENCH = re.compile(r"[^A-Za-z0-9._-]|^\.+")  # a file name in reports/bench/, never a path


def osv_id(probe: str) -> str:
    """`x_TORCHBISECT-<probe>`: the `x_` prefix the OSV schema reserves for databases not
    registered with it; `_` and anything else outside the id's alphabet become `-`."""
    return "x_TORCHBISECT-" + (_OSV_ID.sub("-", probe).strip("-") or "probe")


def _plain(text: str, limit: int) -> str:
    """One line of printable text: control and format characters (and lone surrogates) gone,
    whitespace folded, at most `limit` characters."""
    kept = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in str(text))
    folded = " ".join(kept.split())
    return folded if len(folded) <= limit else folded[: limit - 1].rstrip() + "…"


def _plain_map(mapping: dict[str, str]) -> dict[str, str]:
    return {_plain(k, _LABEL_LIMIT): _plain(v, _LABEL_LIMIT) for k, v in mapping.items()}
