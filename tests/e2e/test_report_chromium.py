"""The page in a real browser: Debian's headless chromium opens what `render_runs` wrote from the
recorded probe documents in tests/data/, plus a planted hostile run.

Driven by Playwright (its Python package only, pointed at /usr/bin/chromium) when it is installed,
and always by chromium's own `--dump-dom` / `--screenshot` and by a stdlib DevTools-protocol client
(torchbisect/pages/chromium.py), so the checks run where Playwright is absent (CI installs chromium,
not Playwright's browsers).  The layout is measured at 1400×1000 and on a 390×844 phone.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
import subprocess
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from helpers import REPO, TESTS

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.model import Channel
from torchbisect.outcome import BisectResult
from torchbisect.pages.chromium import CONTRAST_JS
from torchbisect.report import build_view, render_runs
from torchbisect.report.probe_files import bisection_from_document, run_from_document

pytestmark = pytest.mark.chromium

DATA = TESTS / "data"
# The real H200 recordings; synthetic fixtures of the same schema stand in until they exist.
RECORDED = sorted((REPO / "reports" / "evidence" / "hand").glob("h200-torch-*.json")) or sorted(
    (DATA / "report").glob("synthetic-h200-torch-*.json")
)
HOSTILE_ID = 'dev-"><script>window.__pwned = 6</script>'
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
]
NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)


def _chromium() -> str:
    return shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"


def _runs():
    runs = [run_from_document(p) for p in RECORDED]
    hostile = run_from_document(DATA / "report" / "synthetic-hostile-error-message.json")
    runs.append(
        dataclasses.replace(
            hostile,
            cell=dataclasses.replace(hostile.cell, channel=Channel.DEV, id=HOSTILE_ID),
            log_excerpt='<img src=x onerror="window.__pwned = 7">',
        )
    )
    runs.append(
        synthetic_run(
            "2.14.0+cu130",
            infra="<b>wheel</b> download failed: HTTP 503",
            log="uv pip install … <script>window.__pwned = 8</script>",
        )
    )
    # a run of identical nightlies, which the page folds into one row
    runs += [
        synthetic_run(f"2.16.0.dev202602{d:02d}+cu132", {"capture_data_ptr": (5, 5)})
        for d in range(10, 16)
    ]
    return runs


def _bisections() -> list[BisectResult]:
    return [bisection_from_document(DATA / "report" / "synthetic-bisection-fix.json")]


class _Cells(HTMLParser):
    """Row id → the texts of its verdict words, in column order (the build's sheet, which lists
    them again for a phone, left out)."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._row = None
        self._in_word = False
        self._divs: list[bool] = []  # per open <div>: whether it is a sheet or pop-up

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr":  # a folded run's summary row has no id: its words belong to no build
            self._row = self.rows.setdefault(attrs["id"], []) if attrs.get("id") else None
        if tag == "div":
            self._divs.append("pop" in (attrs.get("class") or "").split())
        self._in_word = tag == "span" and attrs.get("class") == "word" and not any(self._divs)
        if self._in_word and self._row is not None:
            self._row.append("")

    def handle_endtag(self, tag):
        self._in_word = self._in_word and tag != "span"
        if tag == "div" and self._divs:
            self._divs.pop()

    def handle_data(self, data):
        if self._in_word and self._row is not None:
            self._row[-1] += data


def _expected_rows(view, *, fold=None) -> dict[str, list[str]]:
    """The rows drawn on index.html (a folded run's nightlies are on its own page), or, with
    `fold`, those on that fold's page."""
    rows = {}
    for section in view.sections:
        for group in section.groups:
            shown = [f.head for f in group.folds if not f.folded]
            if fold is not None:
                shown = [r for f in group.folds if f is fold for r in f.rows]
            for row in shown:
                words = [c.mark.label for c in row.cases]
                if not row.cases:
                    words = [f"{row.mark.label}: {row.mark.note}"]
                    rows[f"{section.anchor}-{row.cell_id}"] = words
                else:
                    rows[f"{section.anchor}-{row.cell_id}"] = [row.mark.label] + words
    return rows


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    runs, bisections = _runs(), _bisections()
    render_runs(runs, bisections, out, generated=NOW)
    return out / "index.html", build_view(runs, bisections, generated=NOW)


def _check_dom(dom: str, view) -> None:
    assert "<script" not in dom.lower()  # planted tags stayed text: none became an element
    assert "&lt;script&gt;window.__pwned = 1" in dom
    assert f"<title>{view.title}</title>" in dom
    parser = _Cells()
    parser.feed(dom)
    assert parser.rows == _expected_rows(view)


def _check_png(path: Path) -> None:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_page_in_headless_chromium_cli(rendered, tmp_path):
    html, view = rendered
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    try:
        dump = subprocess.run(
            [
                _chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                "--enable-logging=stderr",
                "--v=0",
                "--dump-dom",
                html.as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        shot = tmp_path / "report-cli.png"
        subprocess.run(
            [
                _chromium(),
                *FLAGS,
                f"--user-data-dir={profile}",
                "--window-size=1400,2400",
                f"--screenshot={shot}",
                html.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=True,
        )
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [line for line in dump.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script ran, and the page's CSP blocked nothing it had to
    _check_dom(dump.stdout, view)
    _check_png(shot)
    print(f"screenshot: {shot}")


def test_the_planted_script_stays_text_and_a_cell_opens_to_its_details(rendered):
    """Through the DevTools protocol (helpers.chromium): no script runs, the store's planted one
    is on the page as text, and a cell opens to its time and driver."""
    html, view = rendered
    planted = (
        "[...document.querySelectorAll('body *')].filter(e => [...e.childNodes].some("
        "n => n.nodeType === 3 && n.data.includes('window.__pwned = 1'))).length"
    )
    with _browser(DESKTOP) as browser:
        browser.open(html)
        assert browser.eval("window.__pwned === undefined")
        assert browser.eval("document.scripts.length") == 0
        assert browser.eval("document.title") == view.title
        assert browser.eval(planted) == 2  # the cell's pop-up and the build's sheet, as text
        browser.click("td.c summary")
        opened = browser.eval("document.querySelector('td.c details[open] .pop').innerText")
    assert "time" in opened and "driver" in opened


# -- layout, measured in the browser ----------------------------------------------------------

PHONE, DESKTOP = (390, 844), (1400, 1000)
# Every visible text's colour against the first opaque background behind it, with opacity.


def _browser(size):
    from torchbisect.pages.chromium import Browser

    return Browser(*size, mobile=size == PHONE)


def _rect(browser, selector: str) -> dict:
    return browser.eval(
        f"(() => {{ const r = document.querySelector({selector!r})"
        ".getBoundingClientRect(); return {left: r.left, right: r.right, "
        "top: r.top, bottom: r.bottom, width: r.width}; })()"
    )


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["390x844", "1400x1000"])
def test_the_document_never_scrolls_sideways(rendered, size):
    with _browser(size) as browser:
        browser.open(rendered[0])
        assert browser.eval("document.documentElement.scrollWidth") <= size[0]
        assert browser.eval("document.body.scrollWidth") <= size[0]


def test_on_a_phone_the_matrix_fits_its_box_a_row_summing_up_its_cases(rendered):
    with _browser(PHONE) as browser:
        browser.open(rendered[0])
        box = "document.querySelector('.mscroll')"
        assert browser.eval(f"{box}.scrollWidth <= {box}.clientWidth")
        assert browser.eval(
            "[...document.querySelectorAll('.matrix td.case')]"
            ".every(e => !e.getClientRects().length)"
        )  # in the sheet instead
        summary = browser.eval("document.querySelector('.matrix tbody .row-sum').innerText")
    assert "controls" in summary


def test_on_a_phone_an_opened_build_reads_as_a_sheet_inside_the_screen(rendered):
    with _browser(PHONE) as browser:
        browser.open(rendered[0])
        browser.click("tbody:not(.fold) th[scope=row] summary")
        pop = _rect(browser, "th[scope=row] details[open] .pop")
        assert pop["left"] >= 0 and pop["right"] <= PHONE[0] and pop["top"] >= 0
        assert pop["width"] >= PHONE[0] - 20  # about 45 characters a line, not 3
        text = browser.eval("document.querySelector('th[scope=row] details[open] .pop').innerText")
    assert "driver" in text and "capture + data_ptr()" in text


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["390x844", "1400x1000"])
def test_the_legend_follows_the_matrix_on_a_phone_and_precedes_it_on_a_wide_screen(rendered, size):
    with _browser(size) as browser:
        browser.open(rendered[0])
        legend, matrix = _rect(browser, ".legend"), _rect(browser, ".matrix")
    if size == PHONE:
        assert legend["top"] > matrix["bottom"]
    else:
        assert legend["bottom"] < matrix["top"]


@pytest.mark.parametrize("size", [PHONE, DESKTOP], ids=["390x844", "1400x1000"])
def test_every_text_reaches_4_5_to_1_contrast(rendered, size):
    with _browser(size) as browser:
        browser.open(rendered[0])
        # an open pop-up's (a phone: sheet's) text counts too
        browser.click(
            "tbody:not(.fold) " + ("th[scope=row]" if size == PHONE else "td.c.case") + " summary"
        )
        texts = browser.eval(CONTRAST_JS)
    assert len(texts) > 100
    low = [t for t in texts if t["ratio"] < 4.5]
    assert low == [], low[:5]


def test_a_folded_run_of_nightlies_links_to_a_page_that_lists_them(rendered):
    html, view = rendered
    [fold] = [f for s in view.sections for g in s.groups for f in g.folds if f.folded]
    assert fold.label == "2026-02-10 … 2026-02-15" and len(fold.rows) == 6
    with _browser(DESKTOP) as browser:
        browser.open(html)
        assert browser.eval("document.scripts.length") == 0
        assert browser.eval("document.querySelectorAll('tbody.fold tr').length") == 1
        head = browser.eval("document.querySelector('tbody.fold tr.fold-head').innerText")
        assert "2026-02-10 … 2026-02-15" in head and "6 nightlies" in head
        href = browser.eval("document.querySelector('tbody.fold a.fold-link').href")
    members = html.parent / fold.href
    assert href == members.as_uri() and members.is_file()
    with _browser(DESKTOP) as browser:
        browser.open(members)
        assert browser.eval("document.scripts.length") == 0
        assert browser.eval("document.querySelectorAll('tbody tr[id]').length") == 6
        assert browser.eval("document.documentElement.scrollWidth") <= DESKTOP[0]
    parser = _Cells()
    parser.feed(members.read_text())
    assert parser.rows == _expected_rows(view, fold=fold)


def test_on_a_desk_a_closed_matrix_card_ends_with_its_table(rendered):
    """The room an opened pop-up needs below the table is only made while one is open (an
    infrastructure failure's log, open inside its closed sheet, does not count)."""
    with _browser(DESKTOP) as browser:
        browser.open(rendered[0])
        card, table = _rect(browser, ".section .mscroll"), _rect(browser, ".section .matrix")
        assert card["bottom"] - table["bottom"] < 4
        browser.click("tbody:not(.fold) td.c.case summary")
        card, table = _rect(browser, ".section .mscroll"), _rect(browser, ".section .matrix")
    assert card["bottom"] - table["bottom"] > 300
