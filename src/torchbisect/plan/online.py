"""Which declared runner kinds have a runner online, asked of GitHub before their jobs are queued.

A job whose labels no online runner carries waits in GitHub's queue for 24 to 48 hours, and the
scheduled build waits for every probe job: one kind whose runners are all down would hold the
whole page for a day or more, every day.  `plan --runners … --online-runners SCOPE` asks GitHub
for the self-hosted runners of SCOPE (`repos/OWNER/REPO`, `orgs/ORG`; several are joined) and
leaves out the shards of a kind none of whose runners is online and carries all its labels
(GitHub matches labels without regard to case).  Its lock is planned all the same, and the page
says the kind did not report in the run (the build's roll call).

Listing runners needs a token GitHub Actions does not give a workflow (`Administration: read` on
the repository, `Self-hosted runners: read` on an organisation): `$RUNNERS_TOKEN`.  Without one,
or when the listing fails, nothing is left out and the run goes on as before, said in one line:
a failed check must never drop a kind that might be online.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..config.runners import Kind
from ..net.github import DEFAULT_API, GitHub, GitHubError

TOKEN_VARIABLE = "RUNNERS_TOKEN"
PAGE = 100
MAX_PAGES = 50  # 5,000 runners: more than any pool this serves; a looping API stops here


@dataclass(frozen=True, kw_only=True)
class Runner:
    online: bool
    labels: frozenset[str]  # lower case


@dataclass(frozen=True, kw_only=True)
class Online:
    """What the check found: the kinds not to queue, and the lines to say."""

    offline: tuple[Kind, ...]
    said: tuple[str, ...]


def check(
    kinds: Sequence[Kind], scopes: Sequence[str], *, environ: Mapping[str, str] = os.environ
) -> Online:
    """The kinds without an online runner in `scopes`; none when the check cannot be made."""
    token = environ.get(TOKEN_VARIABLE, "")
    if not token:
        return Online(
            offline=(),
            said=(
                f"not checked: no ${TOKEN_VARIABLE} (a token that may list the "
                "self-hosted runners): every kind's shards are queued, and a kind with no runner "
                "online holds the run until GitHub drops its jobs (24-48 hours)",
            ),
        )
    client = GitHub(base_url=environ.get("GITHUB_API_URL") or DEFAULT_API, token=token)
    try:
        runners = [r for scope in scopes for r in _listed(client, scope)]
    except GitHubError as err:
        return Online(offline=(), said=(f"not checked ({err}): every kind's shards are queued",))
    online = [r for r in runners if r.online]
    offline, said = [], []
    for kind in kinds:
        wanted = {label.lower() for label in kind.labels}
        carrying = [r for r in runners if wanted <= r.labels]
        up = [r for r in carrying if r.online]
        if up:
            said.append(f"{kind.name}: {len(up)} of {len(carrying)} runners with its labels online")
        else:
            offline.append(kind)
            said.append(
                f"{kind.name}: no runner online with the labels {list(kind.labels)} "
                f"({len(carrying)} registered with them, {len(online)} runners online "
                f"in {', '.join(scopes)}): not queued this run, so the page says it "
                "did not report"
            )
    return Online(offline=tuple(offline), said=tuple(said))


def _listed(client: GitHub, scope: str) -> Iterable[Runner]:
    """Every runner of one scope, page by page."""
    for page in range(1, MAX_PAGES + 1):
        doc = client.call(
            "GET",
            f"/{scope}/actions/runners?per_page={PAGE}&page={page}",
            hint=f"${TOKEN_VARIABLE} must be allowed to list the runners of {scope}",
        )
        found = doc.get("runners") if isinstance(doc, dict) else None
        if not isinstance(found, list):
            raise GitHubError(
                f"GitHub's answer listing the runners of {scope} has no list of runners"
            )
        for entry in found:
            yield _runner(entry, scope)
        if len(found) < PAGE:
            return


def _runner(entry: Any, scope: str) -> Runner:  # one item of GitHub's JSON answer
    labels = entry.get("labels") if isinstance(entry, dict) else None
    if not isinstance(labels, list) or not all(
        isinstance(label, dict) and isinstance(label.get("name"), str) for label in labels
    ):
        raise GitHubError(
            f"GitHub's answer listing the runners of {scope} has a runner without its labels"
        )
    return Runner(
        online=entry.get("status") == "online",
        labels=frozenset(label["name"].lower() for label in labels),
    )
