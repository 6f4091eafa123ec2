"""torchbisect: which PyTorch builds a GPU regression affects, since when, and which fixed it.

`home()` is where the project lives, as `[project.urls]` in pyproject.toml names it once: whatever
links to the project (the page, the sentence of a failure) asks it, never a copy of the URL.
"""

from __future__ import annotations

__version__ = "0.1.0"
_home: list[str] = []  # home(), once asked; nothing is imported here before (see __main__.py)


def home() -> str:
    """The project's home page (`Homepage` of `[project.urls]`), from the installed package's
    metadata; in a source tree that was never installed, from its pyproject.toml; else ""."""
    if not _home:
        _home.append(_read_home())
    return _home[0]


def _read_home() -> str:
    import re
    from importlib.metadata import PackageNotFoundError, metadata
    from pathlib import Path

    urls: list[str]
    try:
        urls = metadata("torchbisect").get_all("Project-URL") or []
    except PackageNotFoundError:
        urls = []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "homepage":
            return url.strip()
    source = Path(__file__).resolve().parents[2] / "pyproject.toml"
    text = source.read_text(encoding="utf-8") if source.is_file() else ""
    found = re.search(
        r'^\[project\.urls\]\n(?:(?!\[).*\n)*?Homepage = "([^"]+)"', text, re.MULTILINE
    )
    return found[1] if found else ""
