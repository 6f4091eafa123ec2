"""The page in a real browser: Debian's headless chromium opens what `render_runs` wrote from the
recorded probe documents in tests/data/, plus a planted hostile run.

Driven by Playwright (its Python package only, pointed at /usr/bin/chromium) when it is installed,
and always by chromium's own `--dump-dom` / `--screenshot`, so the check runs where Playwright
is absent (CI installs chromium, not Playwright's browsers).
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

from torchbisect.model import BisectResult, Channel
from torchbisect.report import build_view, render_runs
from torchbisect.report.probe_files import bisection_from_document, run_from_document
from torchbisect.report.synthetic import synthetic_run

pytestmark = pytest.mark.chromium

DATA = Path(__file__).resolve().parent / "data"
# The real H200 recordings; synthetic fixtures of the same schema stand in until they exist.
RECORDED = sorted((DATA / "probe").glob("h200-torch-*.json")) or sorted(
    (DATA / "report").glob("synthetic-h200-torch-*.json"))
HOSTILE_ID = 'dev-"><script>window.__pwned = 6</script>'
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars"]
NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)


def _chromium() -> str:
    return shutil.which("chromium") or shutil.which("chromium-browser") or "chromium"


def _runs():
    runs = [run_from_document(p) for p in RECORDED]
    hostile = run_from_document(DATA / "report" / "synthetic-hostile-error-message.json")
    runs.append(dataclasses.replace(hostile, cell=dataclasses.replace(
        hostile.cell, channel=Channel.DEV, id=HOSTILE_ID),
        log_excerpt="<img src=x onerror=\"window.__pwned = 7\">"))
    runs.append(synthetic_run("2.14.0+cu130", infra="<b>wheel</b> download failed: HTTP 503",
                              log="uv pip install … <script>window.__pwned = 8</script>"))
    return runs


def _bisections() -> list[BisectResult]:
    return [bisection_from_document(DATA / "report" / "synthetic-bisection-fix.json")]


class _Cells(HTMLParser):
    """Row id → the texts of its verdict words, in column order."""

    def __init__(self):
        super().__init__()
        self.rows: dict[str, list[str]] = {}
        self._row = None
        self._in_word = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and attrs.get("id"):
            self._row = self.rows.setdefault(attrs["id"], [])
        self._in_word = tag == "span" and attrs.get("class") == "word"
        if self._in_word and self._row is not None:
            self._row.append("")

    def handle_endtag(self, tag):
        self._in_word = self._in_word and tag != "span"

    def handle_data(self, data):
        if self._in_word and self._row is not None:
            self._row[-1] += data


def _expected_rows(view) -> dict[str, list[str]]:
    rows = {}
    for section in view.sections:
        for group in section.groups:
            for row in group.rows:
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
            [_chromium(), *FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
             "--v=0", "--dump-dom", html.as_uri()],
            capture_output=True, text=True, timeout=120, check=True)
        shot = tmp_path / "report-cli.png"
        subprocess.run([_chromium(), *FLAGS, f"--user-data-dir={profile}",
                        "--window-size=1400,2400", f"--screenshot={shot}", html.as_uri()],
                       capture_output=True, timeout=120, check=True)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    console = [line for line in dump.stderr.splitlines() if ":CONSOLE" in line]
    assert console == []  # no script ran, and the page's CSP blocked nothing it had to
    _check_dom(dump.stdout, view)
    _check_png(shot)
    print(f"screenshot: {shot}")


def test_page_in_headless_chromium_playwright(rendered, tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed")
    html, view = rendered
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), args=FLAGS[1:])
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            messages, errors = [], []
            page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(html.as_uri())
            page.locator("td.c summary").first.click()  # a cell expands to its details
            opened = page.locator("td.c details[open] .pop").first.inner_text()
            pwned = page.evaluate("() => window.__pwned === undefined")
            title, dom = page.title(), page.content()
            scripts = page.locator("script").count()
            planted = page.get_by_text("window.__pwned = 1", exact=False).count()
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert messages == [] and errors == []
    assert pwned and title == view.title and scripts == 0
    assert planted == 1  # the planted script is on the page, as text
    assert "time" in opened and "driver" in opened
    _check_dom(dom, view)
    _check_png(shot)
    print(f"screenshot: {shot}")
