"""What a release bisection says of a wheel whose `torch.version.git_version` is no commit sha."""

from __future__ import annotations

import pytest

from torchbisect.bisect.commits import CommitLookup
from torchbisect.bisect.result import _with_main_sha
from torchbisect.outcome import NightlyPoint, Outcome
from torchbisect.report.writers.bisection_text import _line


@pytest.mark.parametrize(
    "git_version", ["Unknown", "abc...def", "Unknown\nthe first bad release is 2.8.0 (exact)"]
)
def test_a_release_whose_git_version_is_no_sha_has_no_compare_url(git_version):
    """A torch built from a tree without git says "Unknown": the text and `--json` printed
    `compare/Unknown...Unknown` (and `main Unknown`) while `--markdown` said "unavailable", and
    a git_version holding a newline wrote its own line into the report."""
    point = NightlyPoint(date="", version="2.9.0", verdict=Outcome.BAD, git_version=git_version)
    notes: list[str] = []
    found = _with_main_sha(point, CommitLookup(github=False), notes)
    assert found.main_sha == ""
    assert notes == [f"2.9.0: torch.version.git_version is not a commit sha ({git_version!r})"]
    line = _line("first bad", found)
    assert line == "first bad:  release  2.9.0  git not a sha  main unknown"


def test_a_release_whose_git_version_is_a_sha_keeps_it():
    sha = "0123456789abcdef" * 2 + "01234567"
    point = NightlyPoint(date="", version="2.9.0", verdict=Outcome.BAD, git_version=sha)
    notes: list[str] = []
    found = _with_main_sha(point, CommitLookup(github=False), notes)
    assert found.main_sha == sha and notes == []
    assert _line("first bad", found).endswith(f"git {sha[:12]}  main {sha[:12]}")


@pytest.mark.parametrize(("git_version", "shown"), [("", "?"), ("0123456789ab", "0123456789ab")])
def test_an_unknown_or_short_git_version_reads_as_it_is(git_version, shown):
    """A script that could not tell says "?", as before; a short sha is a commit a compare URL
    takes, said the same way by the report and its notes."""
    point = NightlyPoint(date="", version="2.9.0", verdict=Outcome.BAD, git_version=git_version)
    notes: list[str] = []
    found = _with_main_sha(point, CommitLookup(github=False), notes)
    assert notes == [] and found.main_sha == git_version
    assert f"git {shown}  main " in _line("first bad", found)
