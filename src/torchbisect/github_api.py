"""The few GitHub REST calls `notify` makes: find, open and update one issue, and comment on it.

stdlib only (urllib), so the pipeline needs no client library.  The base URL is a parameter
(`$GITHUB_API_URL` in Actions, also on GitHub Enterprise) so tests point it at a local server.
A failure is an InfraError naming the request and GitHub's answer, never a traceback.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from .errors import InfraError

DEFAULT_API = "https://api.github.com"


class GitHubApi:
    def __init__(self, *, repo: str, token: str, base_url: str = DEFAULT_API,
                 timeout: float = 30.0):
        self.repo, self.token, self.timeout = repo, token, timeout
        self.base_url = base_url.rstrip("/")

    def find_issue(self, label: str) -> dict[str, Any] | None:
        """The oldest open issue with this label (pull requests excluded), or None."""
        found = self._call("GET", f"/repos/{self.repo}/issues?state=open&labels={label}"
                                  "&sort=created&direction=asc&per_page=100")
        issues = [i for i in found if "pull_request" not in i]
        if not issues:
            return None
        first = min(issues, key=lambda i: i["number"])
        return {"number": first["number"], "body": first.get("body") or ""}

    def create_issue(self, title: str, body: str, labels: list[str]) -> int:
        made = self._call("POST", f"/repos/{self.repo}/issues",
                          {"title": title, "body": body, "labels": labels})
        return int(made["number"])

    def update_issue(self, number: int, body: str) -> None:
        self._call("PATCH", f"/repos/{self.repo}/issues/{number}", {"body": body})

    def comment(self, number: int, body: str) -> None:
        self._call("POST", f"/repos/{self.repo}/issues/{number}/comments", {"body": body})

    def _call(self, method: str, path: str, payload: dict[str, Any] | None = None) -> Any:
        data = None if payload is None else json.dumps(payload).encode()
        request = urllib.request.Request(
            self.base_url + path, data=data, method=method,
            headers={"Accept": "application/vnd.github+json",
                     "Authorization": f"Bearer {self.token}",
                     "X-GitHub-Api-Version": "2022-11-28",
                     "Content-Type": "application/json", "User-Agent": "torchbisect"})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as err:
            detail = _message(err)
            hint = (": the job needs `permissions: issues: write`"
                    if err.code in (401, 403, 404) else "")
            raise InfraError(f"GitHub answered {err.code} to {method} {path.split('?')[0]}"
                             f" ({detail}){hint}") from None
        except (urllib.error.URLError, OSError) as err:
            reason = getattr(err, "reason", err)
            raise InfraError(f"cannot reach the GitHub API at {self.base_url}: {reason}") from None


def _message(err: urllib.error.HTTPError) -> str:
    try:
        return str(json.loads(err.read()).get("message", err.reason))
    except (ValueError, AttributeError, OSError):
        return str(err.reason)
