"""A build's log excerpt as a reader wants it: the probe's own lines first, the tool's setup folded.

A stored excerpt is the tail of the cell's log, in the order things ran: the tool creating a venv,
asking the interpreter for its paths, installing the wheel, then the probe's command and its
`[stale_replay] case verdict` lines.  A reader who opens a build wants the last part, so it leads;
the setup follows, folded, without uv's deprecation warnings about the runner's own settings
(they say nothing about the build, and repeat at every uv call).  Nothing else is dropped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# "[my_probe] some_case   affected ...": what a probe prints about its cases and verdict.
_PROBE_LINE = re.compile(r"^\[[\w.-]+\] ")
# The tool's line that starts the probe: `$ python probes/stale_replay.py …` (venv) or
# `# torchbisect: [probe in IMAGE on GPU 0] python3 /probes/stale_replay.py …` (docker).
_PROBE_COMMAND = re.compile(r"^(\$ |# torchbisect: \[probe )\S*.*\.py\b")
# uv's warnings about the runner's configuration (UV_NATIVE_TLS, native-tls), at every uv call.
_NOISE = re.compile(r"^warning: The .* (is|are) deprecated and will be removed")


@dataclass(frozen=True, kw_only=True)
class LogExcerpt:
    probe: str  # the probe's command and its own lines, or "" when the probe never printed
    setup: str  # everything else, in order, uv's deprecation warnings left out
    dropped: int  # how many such warnings were left out

    @property
    def setup_lines(self) -> int:
        return len(self.setup.splitlines())

    @property
    def text(self) -> str:
        return "\n".join(x for x in (self.probe, self.setup) if x)


def split_log(text: str) -> LogExcerpt:
    """The excerpt's probe part (its command and `[probe] …` lines) and the rest."""
    probe: list[str] = []
    setup: list[str] = []
    dropped = 0
    for line in text.splitlines():
        if _NOISE.match(line):
            dropped += 1
        elif _PROBE_LINE.match(line) or _PROBE_COMMAND.match(line) and "probes/" in line:
            probe.append(line)
        else:
            setup.append(line)
    if not any(_PROBE_LINE.match(line) for line in probe):  # the probe said nothing: all is setup
        setup, probe = [line for line in text.splitlines() if not _NOISE.match(line)], []
    return LogExcerpt(probe="\n".join(probe), setup="\n".join(setup), dropped=dropped)
