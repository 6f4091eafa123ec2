"""From a nightly's `git_version` to the upstream main-branch commits it was built from.

A nightly's `torch.version.git_version` names a synthetic commit on pytorch's `nightly` branch whose
subject is "YYYY-MM-DD nightly release (<main sha>)".  That subject is read from a local clone
(`--repo PATH`, which must have fetched the `nightly` branch) or from the GitHub API; either may be
missing, and then the sha is left empty with a note saying why — never guessed.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from .. import proc
from ..errors import CommandFailed, ConfigError

PYTORCH = "https://github.com/pytorch/pytorch"
GITHUB_API = "https://api.github.com/repos/pytorch/pytorch"
_SUBJECT = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-f]{7,40})\)")
_SHA = re.compile(r"^[0-9a-f]{7,40}$")


def parse_nightly_message(message: str) -> tuple[str, str] | None:
    """("YYYY-MM-DD", main sha) from a nightly commit's message, or None for any other message."""
    match = _SUBJECT.match(message.strip())
    return (match.group(1), match.group(2)) if match else None


def compare_url(old_sha: str, new_sha: str) -> str:
    return f"{PYTORCH}/compare/{old_sha}...{new_sha}"


@dataclass(frozen=True, kw_only=True)
class MainSha:
    """The main-branch sha behind one nightly, or an empty sha and the reason."""

    sha: str = ""
    source: str = ""  # "repo" | "github"
    note: str = ""


class CommitLookup:
    """Looks main shas up in a local clone first, then on GitHub (unless told to stay offline)."""

    def __init__(self, repo: Path | None = None, *, github: bool = True,
                 api: str = GITHUB_API, timeout: float = 10.0):
        if repo is not None and not (Path(repo) / ".git").exists():
            raise ConfigError(f"--repo {repo} is not a git clone of pytorch")
        self.repo = Path(repo) if repo is not None else None
        self.github = github
        self.api = api
        self.timeout = timeout

    def main_sha(self, git_version: str) -> MainSha:
        if not _SHA.match(git_version or ""):
            return MainSha(note=f"no git_version to look up ({git_version or 'empty'})")
        notes = []
        if self.repo is not None:
            subject = self._subject_from_repo(git_version)
            found = parse_nightly_message(subject or "")
            if found:
                return MainSha(sha=found[1], source="repo")
            notes.append(f"{self.repo} has no nightly commit {git_version[:12]}")
        if self.github:
            try:
                found = parse_nightly_message(self._subject_from_github(git_version))
            except (OSError, ValueError) as err:  # URLError, HTTPError, timeouts, bad JSON
                notes.append(f"GitHub API unreachable ({_reason(err)})")
            else:
                if found:
                    return MainSha(sha=found[1], source="github")
                notes.append(f"{git_version[:12]} is not a nightly release commit")
        else:
            notes.append("GitHub lookup disabled")
        return MainSha(note="; ".join(notes))

    def commits_between(self, old_sha: str, new_sha: str) -> tuple[str, ...]:
        """`git log --oneline old..new` from the clone; empty without one or on failure."""
        if self.repo is None or not old_sha or not new_sha:
            return ()
        try:
            out = proc.run(["git", "-C", str(self.repo), "log", "--oneline", "--no-decorate",
                            f"{old_sha}..{new_sha}"], timeout=60).output
        except CommandFailed:
            return ()
        return tuple(line for line in out.splitlines() if line.strip())

    def _subject_from_repo(self, git_version: str) -> str | None:
        try:
            return proc.run(["git", "-C", str(self.repo), "show", "-s", "--format=%s",
                             git_version], timeout=60).output
        except CommandFailed:
            return None

    def _subject_from_github(self, git_version: str) -> str:
        request = urllib.request.Request(
            f"{self.api}/commits/{git_version}",
            headers={"Accept": "application/vnd.github+json", "User-Agent": "torchbisect"},
        )
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            doc = json.loads(response.read().decode())
        message = str(doc.get("commit", {}).get("message", "")) if isinstance(doc, dict) else ""
        return (message.splitlines() or [""])[0]


def _reason(err: Exception) -> str:
    if isinstance(err, urllib.error.HTTPError):
        return f"HTTP {err.code}"
    if isinstance(err, urllib.error.URLError):
        return str(err.reason)
    return str(err) or type(err).__name__
