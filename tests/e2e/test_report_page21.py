"""The page at the size it grows to (21 releases, tests/helpers/releases.py), as its readers meet it
in headless Chromium: on a 390×844 phone and a 1400×1000 desk, closed and opened.

An opened build or cell is hit-tested: every point of its sheet or pop-up answers with the sheet
itself, never a row painted over it, and on a desk it stays inside its card and moves no row.
The W3C Nu checker (vnu.jar, on Java) and axe-core (in Chromium) find nothing on the page; CI
installs both (.ci/run), elsewhere they run when TORCHBISECT_TEST_VNU / TORCHBISECT_TEST_AXE or
.ci/node hold them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import IN_CI, REPO
from helpers.releases import RELEASES, release_runs

from torchbisect.bench.synthetic import synthetic_run
from torchbisect.report import render

pytestmark = pytest.mark.chromium

PHONE, DESK = (390, 844), (1400, 1000)
SIZES = pytest.mark.parametrize("size", [PHONE, DESK], ids=["390x844", "1400x1000"])
NODE = REPO / ".ci" / "node" / "node_modules"
# Which part of the sheet answers at a point: it must be the sheet (or inside it), row by row.
HIT_JS = r"""(sel => {
  const pop = document.querySelector(sel);
  const r = pop.getBoundingClientRect();
  // 10 px in: not the round corners, where the page behind shows
  const x0 = Math.max(r.left, 0) + 10, x1 = Math.min(r.right, innerWidth) - 10;
  const y0 = Math.max(r.top, 0) + 10, y1 = Math.min(r.bottom, innerHeight) - 10;
  const covered = [];
  let total = 0;
  for (let i = 0; i <= 12; i++) for (let j = 0; j <= 12; j++) {
    const e = document.elementFromPoint(x0 + (x1 - x0) * i / 12, y0 + (y1 - y0) * j / 12);
    total++;
    if (!pop.contains(e)) covered.push(e ? e.tagName + '.' + e.className + ':' +
                                        (e.innerText || '').slice(0, 30) : 'nothing');
  }
  return {total, covered, height: y1 - y0, width: x1 - x0};
})"""
RECT_JS = (
    "(sel => { const r = document.querySelector(sel).getBoundingClientRect();"
    " return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; })"
)


@pytest.fixture(scope="module")
def page21(tmp_path_factory) -> Path:
    """21 releases and a run of nightlies, stored in a real SQLite store and drawn by `render`."""
    from torchbisect.store.db import Store

    folder = tmp_path_factory.mktemp("page21")
    runs = release_runs() + [
        synthetic_run(f"2.16.0.dev202602{d:02d}+cu132", {"capture_data_ptr": (5, 5)})
        for d in range(10, 16)
    ]
    with Store(folder / "results.sqlite") as store:
        store.add_many(runs)
        render(store, folder / "out")
    return folder / "out" / "index.html"


def _browser(size):
    from torchbisect.pages.chromium import Browser

    return Browser(*size, mobile=size == PHONE)


def _row(n: int) -> str:
    """The n-th release's row (0-based), by its cell id."""
    version = RELEASES[n]
    return (
        "#gpu-nvidia-h200-preinstalled"
        if version == "2.11.0"
        else (f"[id^='gpu-nvidia-h200-stable-{version}-']")
    )


def _open(browser, summary: str) -> str:
    """Click `summary`; the selector of the sheet it opened."""
    browser.click(summary)
    opened = f"{summary.rsplit(' summary', 1)[0]} details[open] > .pop"
    assert browser.eval(f"!!document.querySelector({opened!r})"), opened
    browser.eval(f"document.querySelector({opened!r}).scrollIntoView({{block: 'nearest'}})")
    return opened


def _assert_uncovered(browser, sheet: str) -> None:
    hit = browser.eval(f"{HIT_JS}({sheet!r})")
    assert hit["height"] > 100 and hit["width"] > 300, hit
    assert hit["covered"] == [], f"{len(hit['covered'])}/{hit['total']}: {hit['covered'][:4]}"


@SIZES
@pytest.mark.parametrize("n", [0, 10, 20], ids=["first", "middle", "last"])
def test_an_opened_build_is_never_covered_by_the_rows_below_it(page21, size, n):
    with _browser(size) as browser:
        browser.open(page21)
        sheet = _open(browser, f"{_row(n)} th[scope=row] summary")
        _assert_uncovered(browser, sheet)
        text = browser.eval(f"document.querySelector({sheet!r}).innerText")
    assert "driver" in text and ("The probe's output" in text) is (n > 0)


@pytest.mark.parametrize(
    "where",
    ["td.c.case:last-child", "td.c.case:nth-child(4)"],
    ids=["last-column", "a-middle-column"],
)
@pytest.mark.parametrize("n", [10, 20], ids=["middle", "last"])
def test_on_a_desk_an_opened_cell_is_never_covered_and_stays_in_its_card(page21, where, n):
    with _browser(DESK) as browser:
        browser.open(page21)
        pop = _open(browser, f"{_row(n)} {where} summary")
        _assert_uncovered(browser, pop)
        box = browser.eval(f"{RECT_JS}({pop!r})")
        card = browser.eval(f"{RECT_JS}('#gpu-nvidia-h200')")
        footer = browser.eval(f"{RECT_JS}('footer')")
    assert card["left"] <= box["left"] and box["right"] <= card["right"]
    assert card["top"] <= box["top"] and box["bottom"] <= card["bottom"]
    assert box["bottom"] < footer["top"]  # the footer's affected.json link stays uncovered


def test_on_a_desk_an_opened_build_stays_in_its_card_and_moves_no_row(page21):
    rows = (
        "[...document.querySelectorAll('#gpu-nvidia-h200 .matrix tr')].map(r => {"
        " const b = r.getBoundingClientRect(); return [b.top + scrollY, b.height, b.width]; })"
    )
    with _browser(DESK) as browser:
        browser.open(page21)
        before = browser.eval(rows)
        sheet = _open(browser, f"{_row(20)} th[scope=row] summary")
        box = browser.eval(f"{RECT_JS}({sheet!r})")
        card = browser.eval(f"{RECT_JS}('#gpu-nvidia-h200')")
        # a hash and a time are one line each, not broken mid-token
        lines = browser.eval(
            f"Object.fromEntries([...document.querySelectorAll({sheet!r} + "
            "' dl.facts dt')].map(dt => [dt.innerText, Math.round("
            "dt.nextElementSibling.getBoundingClientRect().height / "
            "parseFloat(getComputedStyle(dt.nextElementSibling).lineHeight))]))"
        )
        browser.eval("scrollTo(0, 0)")
        after = browser.eval(rows)
    assert len(before) > 21 and after == before
    assert lines["git_version"] == lines["started"] == lines["wheel sha256"] == 1, lines
    assert card["top"] <= box["top"] and box["bottom"] <= card["bottom"]
    assert card["left"] <= box["left"] and box["right"] <= card["right"]


def test_on_a_phone_every_case_is_reachable_without_scrolling_sideways(page21):
    with _browser(PHONE) as browser:
        browser.open(page21)
        box = "document.querySelector('.mscroll')"
        assert browser.eval(f"{box}.scrollWidth <= {box}.clientWidth")
        assert browser.eval("document.documentElement.scrollWidth") <= PHONE[0]
        first = browser.eval(f"document.querySelector({_row(3) + ' .row-sum'!r}).innerText")
        assert first == "all 5 cases affected; controls as expected"
        sheet = _open(browser, f"{_row(1)} th[scope=row] summary")
        cases = browser.eval(
            f"[...document.querySelectorAll({sheet + ' .row-cases li'!r})]"
            ".map(li => li.innerText.replace(/\\s+/g, ' '))"
        )
    assert len(cases) == 7
    assert any(
        c.startswith("compile (reduce-overhead) – not applicable")
        and "Dynamo does not support Python 3.12" in c
        for c in cases
    ), cases
    assert any(c.startswith("side-stream race ✗ affected 20/20") for c in cases), cases


@SIZES
def test_the_preinstalled_release_sits_among_the_stable_releases(page21, size):
    with _browser(size) as browser:
        browser.open(page21)
        labels = browser.eval(
            "[...document.querySelectorAll('#gpu-nvidia-h200 .matrix tbody"
            " th[scope=row] .ver')].map(e => e.innerText)"
        )
        groups = browser.eval(
            "[...document.querySelectorAll('#gpu-nvidia-h200 tr.group')].map(e => e.innerText)"
        )
    assert labels[:21] == list(RELEASES)
    assert [g.lower() for g in groups] == ["stable releases (21)", "nightlies (6)"]


# -- the checkers -------------------------------------------------------------------------------


def _tool(variable: str, default: Path) -> Path:
    found = Path(os.environ.get(variable) or default)
    if not found.is_file():
        message = f"{found} is missing: set {variable} or run .ci/run's npm install"
        if IN_CI:
            pytest.fail(message)
        pytest.skip(message)
    return found


def test_the_nu_checker_finds_no_error_and_no_warning(page21):
    vnu = _tool("TORCHBISECT_TEST_VNU", NODE / "vnu-jar" / "build" / "dist" / "vnu.jar")
    java = shutil.which("java")
    if not java:
        (pytest.fail if IN_CI else pytest.skip)("no java on PATH for the Nu checker")
    pages = [page21, *sorted((page21.parent / "nightlies").glob("*.html"))]
    assert len(pages) == 2
    done = subprocess.run(
        [java, "-jar", str(vnu), "--also-check-css", "--format", "json", *map(str, pages)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    messages = json.loads(done.stderr or '{"messages": []}')["messages"]
    assert messages == [] and done.returncode == 0, messages[:5]


@SIZES
@pytest.mark.parametrize(
    "opened",
    [
        "",
        f"{_row(10)} th[scope=row] summary",
        f"{_row(0)} th[scope=row] summary",
        f"{_row(10)} td.c.case:last-child summary",
    ],
    ids=["closed", "a-build", "a-build-without-log", "a-cell"],
)
def test_axe_finds_no_violation(page21, size, opened):
    if size == PHONE and "td.c" in opened:
        pytest.skip("a phone draws no case cells: their verdicts are in the build's sheet")
    axe = _tool("TORCHBISECT_TEST_AXE", NODE / "axe-core" / "axe.min.js").read_text()
    with _browser(size) as browser:
        browser.open(page21)
        if opened:
            _open(browser, opened)
        browser.call("Runtime.evaluate", expression=axe)
        found = browser.call(
            "Runtime.evaluate",
            awaitPromise=True,
            returnByValue=True,
            expression="axe.run(document).then(r => r.violations.map("
            "v => [v.id, v.nodes.length, v.nodes[0].target]))",
        )
    assert found["result"]["value"] == []


def test_on_a_phone_the_sheet_closes_from_its_close_button_above_it(page21):
    with _browser(PHONE) as browser:
        browser.open(page21)
        sheet = _open(browser, f"{_row(20)} th[scope=row] summary")
        top = browser.eval(f"{RECT_JS}({sheet!r})")["top"]
        # the button is drawn by the opened summary itself, just above the sheet's right end
        x, y = PHONE[0] - 40, top - 24
        assert browser.eval(
            f"document.elementFromPoint({x}, {y}).closest('summary') === "
            f"document.querySelector({_row(20) + ' th[scope=row] summary'!r})"
        )
        for kind in ("mousePressed", "mouseReleased"):
            browser.call(
                "Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1
            )
        assert browser.eval("document.querySelectorAll('details[name][open]').length") == 0
