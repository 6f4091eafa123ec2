"""From a nightly's `git_version` to the upstream main-branch commits it was built from.

A nightly's `torch.version.git_version` names a synthetic commit on pytorch's `nightly` branch whose
subject is "YYYY-MM-DD nightly release (<main sha>)".  That subject is read from a local clone
(`--repo PATH`, which must have fetched the `nightly` branch) or from the GitHub API; either may be
missing, and then the sha is left empty with a note saying why — never guessed.  The API is asked
through torchbisect.net.github with `GITHUB_TOKEN` when it is set (retried on 5xx and short
`Retry-After`s); a used-up rate limit is said once, with when it resets and what helps.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import CommandFailed, ConfigError
from ..net import API, Retries
from ..net.github import DEFAULT_API, GitHub, GitHubError, RateLimited
from .gitrange import git_data

PYTORCH = "https://github.com/pytorch/pytorch"
GITHUB_API = f"{DEFAULT_API}/repos/pytorch/pytorch"
_SUBJECT = re.compile(r"^(\d{4}-\d{2}-\d{2}) nightly release \(([0-9a-f]{7,40})\)")
_SHA = re.compile(r"[0-9a-f]{7,40}")


def is_sha(text: str) -> bool:
    """A commit sha, whole or abbreviated, as a compare URL takes it."""
    return _SHA.fullmatch(text) is not None


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

    def __init__(
        self,
        repo: Path | None = None,
        *,
        github: bool = True,
        api: str = GITHUB_API,
        timeout: float = 10.0,
        retries: int = 2,
        max_wait: float = 30.0,
        flag: str = "--repo",
    ):
        if repo is not None and not (Path(repo) / ".git").exists():
            raise ConfigError(f"{flag} {repo} is not a git clone of pytorch")
        self.repo = Path(repo) if repo is not None else None
        self.github = github
        self._token = os.environ.get("GITHUB_TOKEN") or None  # 5,000 requests an hour, not 60
        self._hub = GitHub(
            base_url=api,
            token=self._token,
            retries=Retries(attempts=retries + 1, base=1.0, max_wait=max_wait),
            deadlines=dataclasses.replace(API, total=timeout * 3, idle=timeout, connect=timeout),
        )
        self._limited = ""

    def main_sha(self, git_version: str) -> MainSha:
        if not is_sha(git_version or ""):
            return MainSha(note=f"no git_version to look up ({git_version or 'empty'})")
        notes = []
        if self.repo is not None:
            subject = self._subject_from_repo(git_version)
            found = parse_nightly_message(subject or "")
            if found:
                return MainSha(sha=found[1], source="repo")
            notes.append(f"{self.repo} has no nightly commit {git_version[:12]}")
        if self.github and self._limited:
            notes.append(self._limited)
        elif self.github:
            try:
                found = parse_nightly_message(self._hub.commit_message(git_version))
            except RateLimited as err:
                hint = (
                    "pass --repo with a pytorch clone"
                    if self._token
                    else ("set GITHUB_TOKEN (5,000 requests an hour instead of 60) or pass --repo")
                )
                self._limited = f"{err}: {hint}"  # say it once per lookup, and stop asking
                notes.append(self._limited)
            except GitHubError as err:
                notes.append(str(err))
            else:
                if found:
                    return MainSha(sha=found[1], source="github")
                notes.append(f"{git_version[:12]} is not a nightly release commit")
        else:
            notes.append("GitHub lookup disabled")
        return MainSha(note="; ".join(notes))

    def commits_between(self, old_sha: str, new_sha: str) -> tuple[str, ...]:
        """`git log --oneline old..new` from the clone, read whole (however many commits) and
        NUL-separated; empty without one or on failure."""
        if self.repo is None or not old_sha or not new_sha:
            return ()
        try:
            out = git_data(
                self.repo,
                "log",
                "-z",
                "--format=%h %s",
                "--end-of-options",
                f"{old_sha}..{new_sha}",
            )
        except CommandFailed:
            return ()
        return tuple(entry for entry in out.decode("utf-8", "replace").split("\0") if entry.strip())

    def _subject_from_repo(self, git_version: str) -> str | None:
        if self.repo is None:  # main_sha asks only with a clone
            return None
        try:  # stdout alone: a warning (a branch named like the sha) is no subject
            return git_data(
                self.repo, "show", "-s", "--format=%s", "--end-of-options", git_version, timeout=60
            ).decode("utf-8", "replace")
        except CommandFailed:
            return None
