"""What a published file may say about the machine that ran it: paths relative to the run, or
names, never the runner's absolute paths.

The store keeps what the run wrote (a log excerpt quotes `/work/main/.torchbisect/venvs/…`, a
local wheel's `url` is `/tmp/wheels/torch-….whl`); the page, results.json and the OSV record are
published, and a runner's layout (home folders, user names, mount points) is none of a reader's
business nor stable from one runner to the next.  So every string drawn from a run passes here:
a path inside the run's working folder (`.torchbisect/…`) or the checkout's probes keeps its
part from there on, any other absolute path keeps its file name, and URLs stay as they are.
"""

from __future__ import annotations

import re
from functools import lru_cache

# An absolute path of two parts or more, or a file: URL, starting where a word cannot continue it
# (so the path part of an https URL is not one, nor `</b>`).  It ends at whitespace, quotes,
# brackets and the like.
_STOP = r"\s'\"()<>\[\]{},;|`\\"
_PATH = re.compile(rf"(?<![\w:/.~<-])(?:file://)?(/[^/{_STOP}]+/[^{_STOP}]+)")
# Folders whose part of a path is the same on every runner: from there on the path is kept.
_ANCHORS = (".torchbisect/", "probes/")


def public_path(path: str) -> str:
    """`/w/.torchbisect/venvs/a/bin/python` → `.torchbisect/venvs/a/bin/python`,
    `/w/probes/stale_replay.py` → `probes/stale_replay.py`, `/opt/t/bin/python3` → `python3`."""
    for anchor in _ANCHORS:
        at = path.find("/" + anchor)
        if at >= 0:
            return path[at + 1 :]
    trimmed = path.rstrip("/")
    return trimmed.rsplit("/", 1)[-1] or path


@lru_cache(maxsize=1 << 16)  # case details repeat from run to run; a big page asks ~70,000 times
def public_text(text: str) -> str:
    """`text` with every absolute path (and file: URL) made public as `public_path` says."""
    if "/" not in text:
        return text
    return _PATH.sub(lambda m: public_path(m.group(1)), text)


def public_url(url: str | None) -> str | None:
    """A wheel's location as published: an http(s) URL as it is, a local file by its name."""
    if not url or re.match(r"https?://", url):
        return url
    return public_path(url.removeprefix("file://"))
