"""The manual: docs/, one page per reader, built with MkDocs in strict mode (a link to a page or a
heading that does not exist fails the build), and read in a real browser as a visitor of the
published site reads it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import IN_CI, REPO

AUDIENCES = (
    "The evidence",
    "Reading the page",
    "matrix.yaml and running",
    "Bisecting",
    "Running the service",
    "Development and the test suite",
    "Benchmarks",
)


def _nav() -> dict[str, str]:
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    return {title: page for entry in config["nav"] for title, page in entry.items()}


def test_every_page_of_docs_is_in_the_nav_and_every_audience_has_one():
    nav = _nav()
    assert set(AUDIENCES) <= set(nav)
    assert sorted(nav.values()) == sorted(p.name for p in (REPO / "docs").glob("*.md"))


def test_the_readme_links_the_manual_and_stays_a_landing_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)", readme))
    assert linked == set(_nav().values())  # every page, and none that is not there
    assert len(readme.splitlines()) <= 220
    evidence = readme.split("\n## Evidence\n", 1)[1].split("\n## ", 1)[0]
    assert "docs/evidence.md" in evidence and len(evidence.strip().splitlines()) <= 4


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    try:
        import mkdocs  # noqa: F401
    except ImportError:
        (pytest.fail if IN_CI else pytest.skip)("mkdocs is not installed (pip install mkdocs)")
    site = tmp_path_factory.mktemp("manual") / "docs"
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return site


@pytest.mark.slow  # a real MkDocs build
def test_the_manual_builds_in_strict_mode_with_every_local_link_resolving(built):
    for page in (p for p in built.glob("*.html") if p.name != "404.html"):  # 404: site-absolute
        for href in re.findall(r'href="([^"#:]+)(?:#[^"]*)?"', page.read_text(encoding="utf-8")):
            assert (page.parent / href).exists(), f"{page.name} links {href}, which is not there"


@pytest.mark.slow
@pytest.mark.chromium
def test_a_reader_finds_each_audience_from_the_manuals_first_page(built):
    from torchbisect.pages.chromium import Browser

    if shutil.which("chromium") is None and shutil.which("chromium-browser") is None:
        pytest.skip("Debian's chromium is not installed")
    with Browser(1200, 900) as browser:
        browser.open(built / "index.html")
        links = browser.eval(
            "Array.from(document.querySelectorAll('main a, .col-md-9 a'))"
            ".map(a => [a.textContent.trim(), a.href])"
        )
        found = {text: href for text, href in links}
        for title in AUDIENCES:
            assert title in found, f"the first page does not link {title!r}"
            browser.open(Path(found[title].removeprefix("file://")))
            heading = browser.eval("document.querySelector('h1').textContent")
            assert heading.strip().startswith(title.split(" and ")[0].split(":")[0]), heading
