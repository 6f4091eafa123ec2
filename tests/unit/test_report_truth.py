"""Every claim of a regression's page is true for any history (issues 52.3 and 53.3).

Histories of releases are drawn (hypothesis): each release measured on one or more
configurations (GPU model and CUDA tag), each measurement affected, not affected, refused,
without a verdict (error) or an infrastructure failure; releases the store knows only from a
failure are gaps never measured.  The page (HTML), summary.md, results.json and the OSV record
are rendered by the product from runs made through its own model (bench/synthetic.py), and
every claim they make is checked against the drawn verdicts by an oracle written here, apart
from the product's code: what is said affected, fixed, not tested, and since when.

The structured outputs are read as data (OSV events, results.json's headlines, the headline's
data attributes, the Markdown table); the sentences ("fixed in X", "since X", "every tested
release up to X is affected", "again") are parsed and each checked for truth, and a sentence the
checks do not know fails the test, so a new wording cannot slip past them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import tempfile
from collections import Counter
from html import unescape
from pathlib import Path

import pytest
from helpers import REPO
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from packaging.version import Version

from torchbisect.bench.synthetic import synthetic_run as run
from torchbisect.model import Verdict
from torchbisect.report import build_view, render_runs
from torchbisect.report.writers.osv import osv_document

NOW = dt.datetime(2026, 3, 20, 12, 0, tzinfo=dt.timezone.utc)
H200, H100 = "NVIDIA H200", "NVIDIA H100"
OUTCOMES = {
    "bad": {"capture_data_ptr": (5, 5), "capture_write": (5, 5)},
    "good": {"capture_data_ptr": (0, 5), "capture_write": (0, 5)},
    "refused": {"capture_data_ptr": Verdict.REFUSED},  # a clear error: not affected
    "error": {"capture_data_ptr": Verdict.ERROR},  # probed, no verdict
    # measured without the API the probe needs (its REQUIRES_API): the regression cannot be there
    "absent": {name: Verdict.NOT_APPLICABLE for name in ("capture_data_ptr", "capture_write")},
}
API = "torch._lazy_clone"  # stale_replay's REQUIRES_API, named in an absent build's details
# Real releases, so versions keep their gaps (2.10 → 2.12 skips a minor series).
RELEASES = (
    "2.3.0",
    "2.3.1",
    "2.4.0",
    "2.5.0",
    "2.5.1",
    "2.6.0",
    "2.7.0",
    "2.8.0",
    "2.9.0",
    "2.9.1",
    "2.10.0",
    "2.12.0",
    "2.12.1",
    "2.13.0",
    "2.14.0",
    "2.14.1",
    "2.15.0",
)
SCHEMA = REPO / ".." / "shared" / "osv" / "schema.json"

Config = tuple[str, str]
History = list[tuple[str, Config, str]]  # (release, (GPU, CUDA tag), outcome)


def runs_of(history: History):
    return [
        run(f"{v}+{tag}", infra="wheel download: HTTP 503", gpu=gpu)
        if o == "infra"
        else run(
            f"{v}+{tag}",
            OUTCOMES[o],
            gpu=gpu,
            detail=f"{API} is absent in this build" if o == "absent" else "",
        )
        for v, (gpu, tag), o in history
    ]


# --- the oracle: what the verdicts say, computed here, not by the product ---------------------


def _key(v: str) -> Version:
    return Version(v)


def _gap(older: str, newer: str) -> bool:
    """A release must exist between them: a minor series skipped, or a new one not from .0."""
    a, b = Version(older).release, Version(newer).release
    return a[0] != b[0] or b[1] > a[1] + 1 or (b[1] == a[1] + 1 and b[2] != 0)


class Truth:
    """The verdicts of a history on one GPU model, or on all of them (`gpu` None)."""

    def __init__(self, history: History, gpu: str | None = None):
        rows = [(v, c, o) for v, c, o in history if gpu is None or c[0] == gpu]
        self.known = sorted({v for v, _, _ in rows}, key=_key)
        self.config: dict[tuple[str, Config], str] = {}
        for v, c, o in rows:
            if o != "infra":
                self.config[(v, c)] = {
                    "bad": "bad",
                    "good": "good",
                    "refused": "good",
                    "absent": "absent",
                }.get(o, "unknown")
        self.state: dict[str, str] = {}
        for v in self.known:
            said = [s for (w, _), s in self.config.items() if w == v]
            if said:
                self.state[v] = (
                    "bad"
                    if "bad" in said
                    else "good"
                    if all(s == "good" for s in said)
                    else "absent"
                    if all(s == "absent" for s in said)
                    else "unknown"
                )
        for v in self.known:
            if self.state.get(v) == "good" and self.hidden(v):
                self.state[v] = "unknown"
        self.affected = [v for v in self.known if self.state.get(v) == "bad"]
        self.good = [v for v in self.known if self.state.get(v) == "good"]
        self.absent = [v for v in self.known if self.state.get(v) == "absent"]
        self.quiet = sorted(self.good + self.absent, key=_key)  # measured not affected
        self.tested = [v for v in self.known if self.state.get(v) in ("good", "bad", "absent")]
        self.unclear = [v for v in self.known if self.state.get(v) == "unknown"]

    def hidden(self, version: str, gpu: str | None = None) -> bool:
        """Whether a configuration measured affected before and after `version` has no verdict
        there: then what was measured not affected on others is no "not affected" of it."""
        for c in {c for (_, c) in self.config if gpu is None or c[0] == gpu}:
            bad = [v for (v, d), s in self.config.items() if d == c and s == "bad"]
            if (
                (version, c) not in self.config
                and any(_key(v) < _key(version) for v in bad)
                and any(_key(v) > _key(version) for v in bad)
            ):
                return True
        return False

    def next_known(self, version: str) -> str:
        return next((v for v in self.known if _key(v) > _key(version)), "")

    def between(self, older: str, newer: str) -> list[str]:
        return [v for v in self.known if _key(older) < _key(v) < _key(newer)]

    @property
    def newest_affected(self) -> str:
        return self.affected[-1] if self.affected else ""

    @property
    def fixed(self) -> str:
        """The release after the newest affected one, with nothing known between, measured not
        affected on every configuration that was ever measured affected."""
        if not self.affected:
            return ""
        n = self.newest_affected
        f = self.next_known(n)
        if not f or self.state.get(f) != "good" or _gap(n, f):
            return ""
        ever = {c for (_, c), s in self.config.items() if s == "bad"}
        return f if all(self.config.get((f, c)) == "good" for c in ever) else ""

    def since(self) -> tuple[str, str]:
        """(the first affected release after the newest release measured not affected before
        the newest affected one, that release) — ("", "") when no release before it was."""
        if not self.affected:
            return "", ""
        quiet = [v for v in self.quiet if _key(v) < _key(self.newest_affected)]
        if not quiet:
            return "", ""
        after = quiet[-1]
        return next(v for v in self.affected if _key(v) > _key(after)), after

    def affected_on(self, version: str) -> set[str]:
        return {c[0] for (v, c), s in self.config.items() if v == version and s == "bad"}

    def gpu_state(self, version: str, gpu: str) -> str:
        said = [s for (v, c), s in self.config.items() if v == version and c[0] == gpu]
        if not said:
            return ""
        state = (
            "bad"
            if "bad" in said
            else "good"
            if all(s == "good" for s in said)
            else "absent"
            if all(s == "absent" for s in said)
            else "unknown"
        )
        return "unknown" if state == "good" and self.hidden(version, gpu) else state


# --- the checks -------------------------------------------------------------------------------


def check_osv(doc: dict, history: History) -> None:
    t = Truth(history)
    found = doc["affected"][0]
    assert found["versions"] == t.affected
    pypi = [r for r in found["ranges"] if r["type"] == "ECOSYSTEM"]
    # one range, or two where a fix closes a stretch after one that closed with last_affected
    # (OSV's schema has no range holding both): read as one list of stretches, oldest first
    assert len(pypi) <= 2 and all(len(r["events"]) % 2 == 0 for r in pypi)
    if len(pypi) == 2:
        assert "fixed" in pypi[1]["events"][-1] and len(pypi[1]["events"]) == 2
        assert all("fixed" not in e for e in pypi[0]["events"])
    events = [e for r in pypi for e in r["events"]]
    claimed, fixed = set(), None
    for start, end in zip(events[::2], events[1::2], strict=True):
        first = start["introduced"]
        assert first != "0"
        if "fixed" in end:
            fixed = end["fixed"]
            span = [v for v in RELEASES if _key(first) <= _key(v) < _key(fixed)]
        else:
            span = [v for v in RELEASES if _key(first) <= _key(v) <= _key(end["last_affected"])]
        claimed |= set(span)
    # nothing claimed affected was measured not affected, and every affected release is claimed
    assert not claimed & set(t.quiet), (events, t.state)
    assert set(t.affected) <= claimed
    # what each `introduced` rests on
    basis = {k: v for r in pypi for k, v in r["database_specific"]["introduced"].items()}
    assert list(basis) == [e["introduced"] for e in events[::2]]
    probed = t.tested + t.unclear
    for first, why in basis.items():
        earlier = [v for v in sorted(probed, key=_key) if _key(v) < _key(first)]
        if why == "the oldest release tested: older ones were not tested":
            assert not earlier
            continue
        if m := re.fullmatch(
            rf"the first release with {re.escape(API)}: (\S+) was measured "
            r"without it",
            why,
        ):
            assert m[1] == earlier[-1] and m[1] in t.absent
            assert t.next_known(m[1]) == first and not _gap(m[1], first)
            assert not [v for v in earlier if v in t.affected]
            continue
        m = re.fullmatch(
            r"(the oldest affected release tested); (\S+) before it was measured "
            r"(.+)|the first affected release tested after (\S+), which was "
            r"measured (.+)",
            why,
        )
        assert m, why
        before, said = (m[2], m[3]) if m[1] else (m[4], m[5])
        assert before == earlier[-1]
        assert (
            said
            == {"good": "not affected", "unknown": "without a verdict", "absent": f"without {API}"}[
                t.state[before]
            ]
        )
        if m[1]:  # the oldest: no release before it was affected
            assert not [v for v in earlier if v in t.affected]
    # `fixed` only where the fix was measured on every configuration that was affected
    assert fixed == (t.fixed or None), (events, t.config)
    assert found["database_specific"]["fixed_version"] == (t.fixed or None)
    assert found["database_specific"]["tested_versions"] == t.tested
    for gpu, mine in found["database_specific"]["per_gpu"].items():
        own = Truth(history, gpu)
        assert mine["fixed_version"] == (own.fixed or None), (gpu, own.config)
        assert mine["affected_versions"] == own.affected


def check_results(doc: dict, history: History) -> None:
    for h in doc["headlines"]:
        t = Truth(history, h["gpu"])
        assert h["fixed_in"] == (t.fixed or None)
        assert h["tested"] == t.tested and h["unclear"] == t.unclear
        # each range runs from an affected release to an affected one, across none measured
        # not affected (a release between them without a verdict is the span's, as in OSV)
        inside = {
            v
            for first, last in h["affected_ranges"]
            for v in t.known
            if _key(first) <= _key(v) <= _key(last)
        }
        assert {v for r in h["affected_ranges"] for v in r} <= set(t.affected)
        assert set(t.affected) <= inside and not inside & set(t.quiet)
        release, after = t.since()
        since = h.get("since")
        if not after:
            assert since is None
            continue
        assert (since["release"], since["after"]) == (release, after)
        assert since["again"] == any(_key(v) < _key(after) for v in t.affected)
        assert since["exact"] == (t.next_known(after) == release and not _gap(after, release))


def check_scope(text: str, t: Truth, *, pooled: bool) -> None:
    """What the headline says it does not cover, or where the newest affected stretch began."""
    release, after = t.since()
    again = "again " if after and any(_key(v) < _key(after) for v in t.affected) else ""
    measured = f"without {API}" if t.state.get(after) == "absent" else "not affected"
    if m := re.fullmatch(
        r"releases before (\S+) have no torch\._lazy_clone: (\S+) was measured "
        r"without it",
        text,
    ):
        assert (m[1], m[2]) == (release, after) and after in t.absent and not again
        assert t.next_known(after) == release and not _gap(after, release)
    elif m := re.fullmatch(r"(again )?since (\S+): (\S+) before it was measured (.+)", text):
        assert (m[1] or "", m[2], m[3], m[4]) == (again, release, after, measured)
        assert t.next_known(after) == release and not _gap(after, release)
        assert all(t.gpu_state(after, g) in ("good", "absent") for g in t.affected_on(release))
    elif m := re.fullmatch(
        r"(again )?since (\S+) or an unmeasured release after (\S+): \3 was "
        r"measured (.+)",
        text,
    ):
        assert (m[1] or "", m[2], m[3], m[4]) == (again, release, after, measured)
        assert t.next_known(after) != release or _gap(after, release)
        assert not [v for v in t.between(after, release) if t.state.get(v) in ("good", "bad")]
    elif m := re.fullmatch(
        r"(again )?since (\S+) at the latest: (\S+) was measured (.+), but "
        r"not on (.+), where \2 is affected",
        text,
    ):
        assert pooled and (m[1] or "", m[2], m[3], m[4]) == (again, release, after, measured)
        named = set(re.split(r", | and ", m[5]))
        assert named == {
            g for g in t.affected_on(release) if t.gpu_state(after, g) not in ("good", "absent")
        }
        assert named
    elif text == "no release was tested":
        assert not t.tested and not t.unclear
    elif m := re.fullmatch(r"releases before (\S+) were not tested", text):
        assert all(_key(v) >= _key(m[1]) for v in t.tested + t.unclear)
        assert not after  # a release measured not affected before it is always said
    else:
        pytest.fail(f"a sentence the checks do not know: {text!r}")


def check_claim(claim: str, t: Truth) -> None:
    fixed = re.search(r", fixed in (\S+)$", claim)
    assert (fixed[1] if fixed else "") == t.fixed, (claim, t.config)
    if t.affected:
        assert " affected " in claim and not claim.startswith("No ")
    else:
        assert claim.startswith("No ")


def _names(listed: str | None) -> list[str]:
    """ "2.3.0, 2.4.0 and 2.5.0" → the versions."""
    return re.split(r", | and ", listed) if listed else []


def check_fix_line(line: str, t: Truth) -> None:
    """One "Fixed builds" line: each clause checked against the verdicts."""
    n = t.newest_affected
    release, _, rest = line.partition("; ")
    left = [
        c
        for c in rest.split("; ")
        if c and not c.startswith(("first fixed nightly", "no fixed nightly"))
    ]
    if left:  # "2.14.1 after 2.14.0 has no verdict"
        m = re.fullmatch(r"(.+) after (\S+) (?:has|have) no verdict", left[0])
        assert m and m[2] == n, line
        named = set(re.split(r", | and ", m[1]))
        assert named == {
            v for v in t.known if _key(v) > _key(n) and t.state.get(v, "unknown") == "unknown"
        }
    if release == "no release has a verdict yet":
        assert not t.tested
    elif release == "no tested release is affected":
        assert t.tested and not t.affected
    elif m := re.fullmatch(r"fixed in (\S+) \(the first release measured after (\S+)\)", release):
        assert (m[1], m[2]) == (t.fixed, n)
    elif m := re.fullmatch(
        r"no fixed release yet \(every tested release up to (\S+) is "
        r"affected(?:, and (.+) ha(?:s|ve) no verdict)?\)",
        release,
    ):
        assert m[1] == n and t.tested == t.affected
        assert _names(m[2]) == [v for v in t.unclear if _key(v) < _key(n)], line
    elif m := re.fullmatch(
        r"no fixed release yet \(every tested release from (\S+) up to (\S+) "
        r"is affected(?:, and (.+) ha(?:s|ve) no verdict)?\)",
        release,
    ):
        assert m[2] == n == t.tested[-1] and m[1] in t.affected
        assert _names(m[3]) == [v for v in t.unclear if _key(m[1]) < _key(v) < _key(n)], line
        assert [v for v in t.tested if _key(v) >= _key(m[1])] == [
            v for v in t.affected if _key(v) >= _key(m[1])
        ]
    elif m := re.fullmatch(
        r"no fixed release yet: (\S+), the newest release measured, is "
        r"affected( again \((\S+) was measured not affected after an affected "
        r"one\))?",
        release,
    ):
        assert m[1] == n == t.tested[-1] and t.quiet
        if m[2]:
            assert m[3] in t.quiet and _key(m[3]) < _key(n)
            assert any(_key(v) < _key(m[3]) for v in t.affected)
        else:
            assert not any(_key(g) > _key(t.affected[0]) for g in t.quiet), line
    elif m := re.fullmatch(
        r"(\S+) was measured not affected, but never on (.+), where earlier "
        r"releases were affected: no fix is claimed there",
        release,
    ):
        assert m[1] == t.next_known(n) and m[1] in t.good and not t.fixed
    elif m := re.fullmatch(
        r"(\S+) was measured not affected, but not every release between it "
        r"and (\S+) \(the newest affected\) was measured(, nor .+)?",
        release,
    ):
        assert m[2] == n and m[1] in t.good and _key(m[1]) > _key(n) and not t.fixed
        assert t.next_known(n) != m[1] or _gap(n, m[1])
    else:
        pytest.fail(f"a sentence the checks do not know: {release!r}")


def _text(html: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", html)).split())


_BADGE = {
    "affected": "affected",
    "not_affected": "not affected",
    "refused": "refused",
    "error": "error",
    "not_applicable": "not applicable",
    None: "infra failure",
}


def check_html(html: str, history: History, gpus: list[str], runs) -> None:
    heads = re.findall(
        r'<div class="headline[^"]*"((?: data-[\w-]+="[^"]*")+)>\s*'
        r'<p class="big">(.*?)</p>\s*<ul>\s*<li class="scope">(.*?)</li>',
        html,
        re.S,
    )
    assert len(heads) == len(gpus)
    for attrs, claim, scope in heads:
        data = {k: unescape(v) for k, v in re.findall(r' data-([\w-]+)="([^"]*)"', attrs)}
        t = Truth(history, data["gpu"])
        assert data["affected"].split() == t.affected
        assert data["tested"].split() == t.tested and data["unclear"].split() == t.unclear
        assert data["fixed"] == t.fixed
        assert data["newest-affected"] == t.newest_affected
        release, after = t.since()
        assert data["since-after"] == after
        if data["since"]:
            assert data["since"] == release and t.next_known(after) == release
        check_claim(unescape(claim), t)
        check_scope(unescape(scope), t, pooled=False)
    # each headline's badges count its GPU's runs by verdict (the issue's "not affected × 3")
    for block in html.split('<div class="headline')[1 : len(gpus) + 1]:
        gpu = unescape(re.search(r'data-gpu="([^"]*)"', block)[1])
        chips = re.search(r'<ul class="chips">(.*?)</ul>', block, re.S)[1]
        shown = {
            unescape(w).strip(): int(n)
            for w, n in re.findall(
                r'<li class="badge v-\w+">\S+ ([^<]*?)(?: \([^)]*\))?\s*<span class="n">× (\d+)',
                chips,
            )
        }
        want = Counter(
            _BADGE[r.verdict.value if r.verdict else None] for r in runs if r.gpu_model == gpu
        )
        assert shown == dict(want), (gpu, chips)
    todo = re.search(r"<dt>Fixed builds</dt>\s*<dd>(.*?)</dd>", html, re.S)
    lines = re.findall(r'<span class="line">(.*?)\.</span>', todo[1])
    for line in lines:
        line = unescape(line)
        if line.startswith("The fix, as the probe names it"):
            continue
        gpu, t = _whose(line, history, gpus)
        check_fix_line(line.removeprefix(f"{gpu}: ") if len(gpus) > 1 else line, t)


def _whose(line: str, history: History, gpus: list[str]) -> tuple[str, Truth]:
    if len(gpus) == 1:
        return gpus[0], Truth(history, gpus[0])
    gpu = next(g for g in gpus if line.startswith(f"{g}: "))
    return gpu, Truth(history, gpu)


_MD_WORD = {
    "affected": "affected",
    "not_affected": "ok",
    "refused": "refused",
    "error": "error",
    "not_applicable": "n/a",
    None: "infra failure",
}


def check_markdown(md: str, history: History, gpus: list[str], runs) -> None:
    bold = re.findall(r"^\*\*(.*)\*\*$", md, re.M)
    for gpu in gpus:  # each model's headline (the title alone, with one model)
        text = next(b for b in bold if f" on {gpu}" in b and " GPU models measured " not in b)
        t = Truth(history, gpu)
        if t.affected:
            claim, scope = text.removesuffix(")").rsplit(" (", 1)
            check_claim(claim, t)
            check_scope(scope, t, pooled=False)
    fixes = re.search(r"^- \*\*Fixed builds:\*\* (.*)$", md, re.M)[1]
    for line in re.split(r"(?<=\.) (?=[A-Z0-9])", fixes):
        line = line.removesuffix(".")
        gpu, t = _whose(line, history, gpus)
        check_fix_line(line.removeprefix(f"{gpu}: ") if len(gpus) > 1 else line, t)
    # each GPU's table: one row per build, its verdict the run's
    for gpu in gpus:
        section = md.split(f"### {gpu}\n", 1)[1].split("\n### ", 1)[0]
        rows = re.findall(
            r"^\| (\d[^ |]*)(?: \((\S+) · [^)]*\))? \| stable \| ([^|]*?) \|", section, re.M
        )
        shown = Counter((label, tag, _word(cell)) for label, tag, cell in rows)
        mine = [r for r in runs if r.gpu_model == gpu]
        twice = Counter(r.cell.version.split("+")[0] for r in mine)
        want = Counter(  # a release measured in two tags names each row's tag
            (
                r.cell.version.split("+")[0],
                r.cell.cuda if twice[r.cell.version.split("+")[0]] > 1 else "",
                _MD_WORD[r.verdict.value if r.verdict else None],
            )
            for r in mine
        )
        assert shown == want, section


def _word(cell: str) -> str:
    """The verdict a Markdown cell names ("✓ ok", "⚠ infra failure: x")."""
    return next(
        w for w in ("infra failure", "refused", "error", "ok", "n/a", "affected") if w in cell
    )


def check_all(history: History) -> None:
    runs = runs_of(history)
    gpus = sorted({c[0] for _, c, _ in history})
    with tempfile.TemporaryDirectory() as out:
        render_runs(runs, [], Path(out), generated=NOW)
        html = (Path(out) / "index.html").read_text()
        md = (Path(out) / "summary.md").read_text()
        results = json.loads((Path(out) / "results.json").read_text())
        osv = json.loads((Path(out) / "affected.json").read_text())
    # the sentences first, then the data beside them
    check_markdown(md, history, gpus, runs)
    check_osv(osv, history)
    check_html(html, history, gpus, runs)
    check_results(results, history)
    if len(gpus) > 1:  # the page's title: what holds across the models, as the record says it
        t = Truth(history)
        headline = results["models"]["headline"]
        fixed = re.search(r", fixed in (\S+) \(", headline)
        assert (fixed[1] if fixed else "") == t.fixed
        scope = re.search(
            r"measured \([^)]*\)(?:, not measured between .+?)?(?:, fixed in \S+)? \((.*)\)"
            r"(?:; no release "
            r"verdict on .*)?$",
            headline,
        )
        if t.affected:
            check_scope(scope[1], t, pooled=True)
    if SCHEMA.is_file():
        jsonschema = pytest.importorskip("jsonschema")
        jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(osv)


# --- the histories ------------------------------------------------------------------------------

OUTCOME = st.sampled_from(("good", "bad", "good", "bad", "refused", "error", "infra"))


@st.composite
def histories(draw, gpus=(H200,), tags=("cu130",), absent: bool = False) -> History:
    """Releases measured on some configurations each; with `absent`, the oldest few measured
    without the API (as 2.2.2 is without torch._lazy_clone), or not at all."""
    versions = sorted(draw(st.sets(st.sampled_from(RELEASES), min_size=1, max_size=7)), key=_key)
    configs = [(g, t) for g in gpus for t in tags]
    without = draw(st.integers(0, min(2, len(versions)))) if absent else 0
    history: History = []
    for i, v in enumerate(versions):
        measured = draw(
            st.lists(st.sampled_from(configs), min_size=1, max_size=len(configs), unique=True)
        )
        outcome = st.sampled_from(("absent", "absent", "infra")) if i < without else OUTCOME
        history += [(v, c, draw(outcome)) for c in sorted(measured)]
    return history


# A render takes a tenth of a second: 40 histories per property, and no shrinking (a render per
# step made it run for minutes); a failure prints the drawn history, short by construction.
PROPERTY = settings(
    max_examples=int(os.environ.get("TRUTH_EXAMPLES", 40)),
    deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow],
)


@PROPERTY
@given(histories())
def test_every_claim_is_true_for_any_history_of_one_configuration(history):
    check_all(history)


@PROPERTY
@given(histories(gpus=(H200, H100), tags=("cu128", "cu130")))
def test_every_claim_is_true_per_gpu_model_and_cuda_tag(history):
    check_all(history)


@PROPERTY
@given(histories(gpus=(H200, H100), tags=("cu130",), absent=True))
def test_every_claim_is_true_after_releases_measured_without_the_api(history):
    check_all(history)


# --- the histories the issues name, each once (they fail on the code before 52.3 / 53.3) -------


def _h(*steps: tuple[str, str], config: Config = (H200, "cu130")) -> History:
    return [(v, config, o) for v, o in steps]


NAMED = {
    "one release": _h(("2.14.0", "bad")),
    "all good": _h(("2.12.0", "good"), ("2.13.0", "good")),
    "all bad": _h(("2.12.0", "bad"), ("2.13.0", "bad")),
    "a regression": _h(("2.12.0", "good"), ("2.12.1", "bad"), ("2.13.0", "bad")),
    "fixed": _h(("2.12.0", "bad"), ("2.12.1", "good")),
    "fixed then broken again": _h(("2.12.0", "bad"), ("2.12.1", "good"), ("2.13.0", "bad")),
    "good, bad, good, bad": _h(
        ("2.10.0", "good"),
        ("2.12.0", "good"),
        ("2.12.1", "bad"),
        ("2.13.0", "good"),
        ("2.14.0", "bad"),
    ),
    "a gap never measured": _h(("2.12.0", "good"), ("2.12.1", "infra"), ("2.13.0", "bad")),
    "without the API, then affected": _h(("2.3.0", "absent"), ("2.3.1", "bad")),
    "without the API, a gap, then affected": _h(
        ("2.3.0", "absent"), ("2.3.1", "infra"), ("2.4.0", "bad"), ("2.5.0", "good")
    ),
}


def test_a_release_measured_without_the_api_is_where_the_regression_begins_only_next_to_it():
    page = _page(NAMED["without the API, then affected"])
    assert page.sections[0].headline.untested == (
        "releases before 2.3.1 have no torch._lazy_clone: 2.3.0 was measured without it"
    )
    gap = _page(NAMED["without the API, a gap, then affected"])
    assert gap.sections[0].headline.untested == (
        "since 2.4.0 or an unmeasured release after 2.3.0: 2.3.0 was measured without "
        "torch._lazy_clone"
    )


@pytest.mark.parametrize("name", NAMED)
def test_every_claim_is_true_for_the_histories_the_issue_names(name):
    check_all(NAMED[name])


def _page(history: History):
    return build_view(runs_of(history), [], generated=NOW)


def test_good_bad_good_bad_is_never_every_tested_release_affected():
    """Issue 52: 'no fixed release yet (every tested release up to 2.14.0 is affected)' beside
    a badge 'not affected × 3'."""
    page = _page(NAMED["good, bad, good, bad"])
    assert page.advice.fixes == (
        "no fixed release yet: 2.14.0, the newest release measured, is "
        "affected again (2.13.0 was measured not affected after an "
        "affected one)",
    )
    assert page.title == (
        "2.12.1 and 2.14.0 affected on NVIDIA H200 (again since 2.14.0: 2.13.0 "
        "before it was measured not affected)"
    )


def test_a_regression_says_it_began_after_the_release_measured_not_affected():
    """Issue 52: good on 2.9.1, bad on 2.11.0 (2.10.0 not measured): the headline said only
    'releases before 2.9.1 were not tested'."""
    history = _h(("2.9.1", "good"), config=("NVIDIA H100 80GB HBM3", "cu128")) + _h(
        ("2.11.0", "bad"), config=("NVIDIA H100 80GB HBM3", "cu130")
    )
    page = _page(history)
    assert page.title == (
        "2.11.0 affected on NVIDIA H100 80GB HBM3 (since 2.11.0 or an "
        "unmeasured release after 2.9.1: 2.9.1 was measured not affected)"
    )
    assert page.advice.fixes == (
        "no fixed release yet: 2.11.0, the newest release measured, is affected",
    )
    exact = _page(_h(("2.10.0", "good"), ("2.11.0", "bad")))
    assert exact.sections[0].headline.untested == (
        "since 2.11.0: 2.10.0 before it was measured not affected"
    )


def test_a_fix_seen_on_another_gpu_model_is_no_fix():
    """Issue 53: a release affected on one GPU kind and measured not affected only on another
    got `fixed`, though its own per_gpu said otherwise."""
    history = [("2.14.0", (H200, "cu130"), "bad"), ("2.15.0", (H100, "cu130"), "good")]
    doc = osv_document(runs_of(history), [], generated=NOW)
    assert doc["affected"][0]["ranges"][0]["events"] == [
        {"introduced": "2.14.0"},
        {"last_affected": "2.14.0"},
    ]
    page = _page(history)
    assert "fixed in" not in page.title
    check_all(history)


def test_a_fix_seen_on_another_cuda_tag_is_no_fix():
    """Issue 53: the same across CUDA tags: 2.14.0 affected on cu126 and cu130, 2.15.0
    measured not affected on cu130 only."""
    history = [
        ("2.14.0", (H200, "cu126"), "bad"),
        ("2.14.0", (H200, "cu130"), "bad"),
        ("2.15.0", (H200, "cu130"), "good"),
    ]
    doc = osv_document(runs_of(history), [], generated=NOW)
    assert doc["affected"][0]["ranges"][0]["events"][-1] == {"last_affected": "2.14.0"}
    assert doc["affected"][0]["database_specific"]["fix_not_measured_on"] == {
        "release": "2.15.0",
        "configurations": ["cu126"],
    }
    page = _page(history)
    assert page.sections[0].headline.claim == "2.14.0 affected on NVIDIA H200"
    assert page.advice.fixes == (
        "2.15.0 was measured not affected, but never on cu126, where "
        "earlier releases were affected: no fix is claimed there",
    )
    # measured there too, it is the fix
    fixed = history + [("2.15.0", (H200, "cu126"), "good")]
    assert osv_document(runs_of(fixed), [], generated=NOW)["affected"][0]["ranges"][0]["events"][
        -1
    ] == {"fixed": "2.15.0"}
    check_all(history)
    check_all(fixed)


def test_a_fix_after_a_stretch_that_came_and_went_is_a_range_of_its_own():
    """OSV's schema allows no range holding both `last_affected` and `fixed`: bad on 2.3.0, good
    on 2.3.1, bad again on 2.12.0 and fixed in 2.12.1 gave one range with both (the property test
    found it against osv-schema), which a validating consumer rejects."""
    history = _h(("2.3.0", "bad"), ("2.3.1", "good"), ("2.12.0", "bad"), ("2.12.1", "good"))
    doc = osv_document(runs_of(history), [], generated=NOW)
    pypi = [r["events"] for r in doc["affected"][0]["ranges"] if r["type"] == "ECOSYSTEM"]
    assert pypi == [
        [{"introduced": "2.3.0"}, {"last_affected": "2.3.0"}],
        [{"introduced": "2.12.0"}, {"fixed": "2.12.1"}],
    ]
    assert doc["affected"][0]["database_specific"]["fixed_version"] == "2.12.1"
    check_all(history)
