"""The one GitHub REST client: the commit lookups of `bisect` and the status issue of `notify`.

Every call goes through net.client (so through the link policy, the deadlines and the one retry
policy).  The token goes only to the API's own origin.  A used-up rate limit is said once, with
when it resets, and GitHub is not asked again by this client.  An answer is bounded in size
(`ANSWER_LIMIT`) and checked for the fields that are read, so a hostile or broken API is one
sentence (`GitHubError`, exit 3) and never a traceback.  The base URL is a parameter
(`$GITHUB_API_URL` in Actions, also on GitHub Enterprise) so tests point it at a local server.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypeGuard

from ..errors import InfraError
from . import retry
from .client import API, Deadlines, Route, request
from .failures import NetError, Refused

DEFAULT_API = "https://api.github.com"
ANSWER_LIMIT = 32 * 10**6  # a page of 100 issues with the largest bodies GitHub allows: ~7 MB
_HEADERS = {
    "Accept": "application/vnd.github+json",
    "X-GitHub-Api-Version": "2022-11-28",
    "Content-Type": "application/json",
}
WRITE_HINT = "the job needs `permissions: issues: write`"
RETRIES = retry.Retries(attempts=3, base=1.0, max_wait=30.0)


class GitHubError(InfraError):
    """A GitHub call failed; the message is the one sentence to show."""


class RateLimited(GitHubError):
    """The rate limit is used up; the message says until when."""


class GitHub:
    def __init__(
        self,
        *,
        base_url: str = DEFAULT_API,
        token: str | None = None,
        retries: retry.Retries = RETRIES,
        deadlines: Deadlines = API,
        limit: int = ANSWER_LIMIT,
    ):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.retries, self.deadlines, self.limit = retries, deadlines, limit
        self._limited: RateLimited | None = None
        secret = (("Authorization", f"Bearer {token}"),) if token else ()
        self._route = Route(base=self.base_url, secret=secret)

    def call(self, method: str, path: str, payload: Any = None, *, hint: str = "") -> Any:
        """The JSON GitHub answers to `method path`; GitHubError when it fails or is not JSON."""
        if self._limited is not None:  # said once; not asked again
            raise self._limited
        body = None if payload is None else json.dumps(payload).encode()
        what = f"{method} {path.split('?')[0]}"
        try:
            raw = retry.attempt(lambda: self._once(method, path, body, what), self.retries)
        except NetError as err:
            raise self._sentence(err, what, hint) from None
        try:
            return json.loads(raw or b"null")
        except ValueError:  # UnicodeDecodeError is one too
            raise GitHubError(f"GitHub's answer to {what} is not JSON") from None

    def commit_message(self, sha: str) -> str:
        """The first line of a commit's message (`base_url` is a repository's API URL)."""
        doc = self.call("GET", f"/commits/{sha}")
        commit = doc.get("commit") if isinstance(doc, dict) else None
        message = commit.get("message") if isinstance(commit, dict) else None
        if not isinstance(message, str):
            raise GitHubError(f"GitHub's answer for commit {sha[:12]} has no commit message")
        return (message.splitlines() or [""])[0]

    def find_issue(self, repo: str, label: str) -> tuple[int, str] | None:
        """(number, body) of the oldest open issue with this label (pull requests left out)."""
        return min(self.find_issues(repo, label), default=None)

    def find_issues(self, repo: str, label: str) -> list[tuple[int, str]]:
        """(number, body) of each open issue with this label, oldest first (no pull requests)."""
        found = self.call(
            "GET",
            f"/repos/{repo}/issues?state=open&labels={label}"
            "&sort=created&direction=asc&per_page=100",
            hint=WRITE_HINT,
        )
        if not isinstance(found, list) or not all(isinstance(i, dict) for i in found):
            raise GitHubError(
                f"GitHub's answer listing the issues of {repo} is not a list of issues"
            )
        issues = [(i.get("number"), i.get("body") or "") for i in found if "pull_request" not in i]
        if any(not _whole(n) or not isinstance(b, str) for n, b in issues):
            raise GitHubError(
                f"GitHub's answer listing the issues of {repo} has an issue "
                "without a number or with a body that is not text"
            )
        return sorted(issues)

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> int:
        made = self.call(
            "POST",
            f"/repos/{repo}/issues",
            {"title": title, "body": body, "labels": labels},
            hint=WRITE_HINT,
        )
        number = made.get("number") if isinstance(made, dict) else None
        if not _whole(number):
            raise GitHubError(f"GitHub opened an issue in {repo} but did not say its number")
        return number

    def update_issue(self, repo: str, number: int, body: str) -> None:
        self.call("PATCH", f"/repos/{repo}/issues/{number}", {"body": body}, hint=WRITE_HINT)

    def comment(self, repo: str, number: int, body: str) -> None:
        self.call(
            "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}, hint=WRITE_HINT
        )

    def _once(self, method: str, path: str, body: bytes | None, what: str) -> bytes:
        try:
            with request(
                method,
                self.base_url + path,
                route=self._route,
                headers=_HEADERS,
                body=body,
                deadlines=self.deadlines,
            ) as answer:
                return answer.read(self.limit, f"GitHub's answer to {what}")
        except NetError as err:
            limited = _rate_limit(err, self.retries.max_wait)
            if limited is not None:
                self._limited = limited
                raise limited from None
            if method == "POST" and err.status != 429:
                err.transient = False  # a POST that may have been done is not sent twice
            raise

    def _sentence(self, err: NetError, what: str, hint: str) -> GitHubError:
        if err.status is not None:
            hint = f": {hint}" if hint and err.status in (401, 403, 404) else ""
            return GitHubError(f"GitHub answered {err} to {what}{_message(err.body)}{hint}")
        if isinstance(err, Refused):
            return GitHubError(f"GitHub API call {what} stopped: {err}")
        tries = f" after {err.attempts} attempts" if err.attempts > 1 else ""
        return GitHubError(f"cannot reach the GitHub API at {self.base_url}{tries}: {err}")


def _rate_limit(err: NetError, max_wait: float) -> RateLimited | None:
    """A used-up rate limit: None when it is not one or when its Retry-After is short (then the
    error is left transient, and retried after that wait)."""
    used_up = (
        err.status == 429 or err.status == 403 and err.headers.get("x-ratelimit-remaining") == "0"
    )
    if not used_up:
        return None
    told = retry.parse_retry_after(err.retry_after)
    if told is not None and told <= max_wait:
        err.transient = True
        return None
    reset = err.headers.get("x-ratelimit-reset", "")
    until = time.strftime("%H:%M UTC", time.gmtime(int(reset))) if reset.isdigit() else "later"
    return RateLimited(f"GitHub API rate limit reached until {until}")


def _message(body: bytes) -> str:
    try:
        message = json.loads(body).get("message")
    except (ValueError, AttributeError):
        return ""
    return f" ({message[:200]})" if isinstance(message, str) and message else ""


def _whole(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
