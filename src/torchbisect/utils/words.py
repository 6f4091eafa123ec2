"""Small wording helpers shared by the commands' output, so counts, sizes, signals and a
command's last words read the same everywhere."""

from __future__ import annotations

import re
import signal


def count(n: int, noun: str, plural: str | None = None) -> str:
    """`count(1, "cell")` → "1 cell"; `count(2, "cell")` → "2 cells"."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def megabytes(n: float) -> str:
    """Bytes as a person reads them: "1.5 MB" below 10 MB, "1,234 MB" from there on."""
    return f"{n / 1e6:,.0f} MB" if n >= 1e7 else f"{n / 1e6:.1f} MB"


def signal_name(number: int) -> str:
    """ "SIGKILL (9)"; the bare number for one this platform does not name."""
    try:
        return f"{signal.Signals(number).name} ({number})"
    except ValueError:
        return str(number)


def last_line(text: str) -> str:
    """The last line of a command's output that says something (cut at 300 characters), or ""."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


# Text from a probe, a log, a store or a path may carry control codes (an ESC sequence that
# recolours or rewrites a terminal, a BEL, a NUL), bidirectional overrides that reorder what a
# reader sees, or lone surrogates that no file or terminal can encode.  Tab, newline and carriage
# return are left as they are.
_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_SURROGATES = re.compile("[\ud800-\udfff]")


def _shown(char: str) -> str:
    code = ord(char)
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ … ␛ … ␟
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0xD800 <= code <= 0xDFFF:
        return "\ufffd"
    return f"[U+{code:04X}]"


def visible(text: str) -> str:
    """`text` as a page, a Markdown summary or a terminal may show it: each control code as its
    picture (ESC → ␛, NUL → ␀), a C1 code or a bidirectional override as `[U+202E]`, a lone
    surrogate as U+FFFD.  The one place torchbisect makes stored text safe to show."""
    return _HIDDEN.sub(lambda m: _shown(m[0]), text) if _HIDDEN.search(text) else text


def storable(text: str) -> str:
    """`text` that UTF-8 (a store, a file, a terminal) can encode: a lone surrogate (JSON's
    `"\\ud800"`) becomes U+FFFD; anything else is kept, to be shown by `visible`."""
    return _SURROGATES.sub("\ufffd", text) if _SURROGATES.search(text) else text


# Characters no name or label needs, which hide what it is: control characters (a BEL, a NUL),
# invisible ones (a zero-width space, a direction override), unassigned and private-use code
# points; tab and line breaks are left to the caller (config/sentences.py allows them in YAML).
INVISIBLE = re.compile(
    r"[^\t\n\r\x20-\x7e\xa0-\uffff\U00010000-\U0010ffff]|"
    r"[\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u206f"
    r"\ufeff\ufff9-\ufffb\ue000-\uf8ff]"
)


def plain_label(text: str) -> bool:
    """Whether `text` (a cell id, a runner kind or label) is printable and visible throughout."""
    return text.isprintable() and not INVISIBLE.search(text)
