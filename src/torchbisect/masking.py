"""Token-shaped strings are masked before any text enters a log, the store or a page.

The first line of defence is that probes never receive credentials (`backends/probe_env.py`);
this is the second: whatever a probe, an installer or a document prints, a GitHub token, a cloud
or registry key, a `Bearer` header, a JWT or a password in a URL reaches no log, store row or
published page.  `mask` is applied where such text enters: the output of every command
(`proc`), a container's output (`backends/container.py`), every probe document
(`probe/document.py`) and every stored run (`store/runs.py`), so every page drawn later is
clean.  The values of this process's own credential-named variables (GITHUB_TOKEN, …) are masked
too, whatever their shape, as GitHub Actions masks its secrets.

As GitHub's own masker does, a secret is masked in the forms a log gives it too (`_unhidden`):
JSON, `\\x` and percent escapes, base64 (standard or URL-safe, at any alignment) and hex, and with
control characters, ANSI sequences or invisible characters (a zero-width space) inside it.  Text
that reveals no secret in any of those forms is left exactly as it was; text that does is given
decoded and masked (an encoded run that hides one becomes `***`).  Where output is cut
(`proc`'s kept head and tail), the word the cut goes through is masked too (`at_cut`): a token
missing its first byte no longer has its shape.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterator
from functools import cache, lru_cache
from typing import Any

MASK = "***"
# A variable whose name says it holds a secret (also refused to probes by probe_env).
CREDENTIAL_NAME = re.compile(
    r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|AUTH|SESSION_?KEY|COOKIE",
    re.IGNORECASE,
)
SHORTEST_SECRET = 8  # shorter values ("1", "true") would mask ordinary words
_LONGEST_SECRET = 4096  # of a word cut in two, what is masked; of an encoded run, what is tried

# (literals, pattern, replacement): the pattern runs only on text holding one of its literals
# (a substring test costs little; seventeen regular expressions over every log would not).
# The replacement keeps the kind (`ghp_***`) so a reader knows what was there, and never
# matches again.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = tuple(
    (literals, re.compile(p), r)
    for literals, p, r in (
        (("gh",), r"\b(gh[pousr]_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # GitHub tokens
        (("github_pat_",), r"\b(github_pat_)[A-Za-z0-9_]{20,}", r"\1" + MASK),
        (
            ("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
            r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{4})[A-Z0-9]{12,}\b",
            r"\1" + MASK,
        ),  # AWS key ids
        (
            ("ccess_key", "CCESS_KEY"),
            r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{20,}",
            r"\1" + MASK,
        ),
        (("hf_",), r"\b(hf_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # Hugging Face
        (("pypi-",), r"\b(pypi-)[A-Za-z0-9_-]{40,}", r"\1" + MASK),  # PyPI / TestPyPI tokens
        (("glpat-",), r"\b(glpat-)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # GitLab
        (("xox",), r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}", r"\1" + MASK),  # Slack
        (("AIza",), r"\b(AIza)[0-9A-Za-z_-]{30,}", r"\1" + MASK),  # Google API keys
        (("sk-",), r"\b(sk-(?:proj-|ant-)?)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # OpenAI, …
        (("npm_",), r"\b(npm_)[A-Za-z0-9]{30,}", r"\1" + MASK),
        (("dckr_pat_",), r"\b(dckr_pat_)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # Docker Hub
        (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", MASK),  # JWT
        (
            ("earer", "EARER", "asic", "ASIC"),
            r"(?i)\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{16,}",
            r"\1\2" + MASK,
        ),  # headers
        (("uthorization", "UTHORIZATION"), r"(?i)(authorization:\s*token\s+)\S{16,}", r"\1" + MASK),
        (
            ("://",),
            r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@",
            r"\1" + MASK + "@",
        ),  # a password in a URL
        (("://",), r"(?i)(\bhttps?://)[^/\s:@]{16,}@", r"\1" + MASK + "@"),  # a token as the user
        (
            ("PRIVATE KEY",),
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            "-----BEGIN PRIVATE KEY----- " + MASK,
        ),
    )
)


# Any literal of any shape: most text holds none, and one search of this (in C) says so at once;
# testing the literals one by one in Python cost more than the rest of reading a big store.
_ANY_LITERAL = re.compile(
    "|".join(re.escape(literal) for literals, _, _ in _SHAPES for literal in literals)
)


# Characters that hide a token from the shapes without changing what a terminal shows: control
# characters, ANSI sequences and invisible (format) characters.
_WORD = r"[A-Za-z0-9_+/=.-]"
_HIDDEN_CHARS = (
    r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad"
    r"\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff]"
)
_HIDDEN = re.compile(_HIDDEN_CHARS)  # anywhere: the text is only kept so when it hid a secret
# JSON (\u0067), \x and percent escapes of printable ASCII
_ESCAPE = re.compile(r"\\u00([2-7][0-9a-fA-F])|\\x([2-7][0-9a-fA-F])|%([2-7][0-9a-fA-F])")
_ENCODED = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}")  # a base64, base64url or hex run
_HEX = re.compile(r"[0-9a-fA-F]+")
_MIXED = re.compile(r"[A-Z+=]")
_WORD_CHARS = re.compile(_WORD)
_WORDS = re.compile(rf"{_WORD}+")
_HIDING = re.compile(
    r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\ufeff]|\\u00|\\x[2-7]|%[2-7]|[A-Za-z0-9+/_-]{16}"
)


def mask(text: str) -> str:
    """`text` with every token-shaped string, and every value of our own secrets, masked, in
    whatever escaped or encoded form it appears."""
    if len(text) < SHORTEST_SECRET:
        return text
    text = _masked(text)
    if _HIDING.search(text) is None:
        return text
    return _unhidden_short(text) if len(text) <= 1024 else _unhidden(text)


@lru_cache(maxsize=16384)  # a store's documents repeat the same short strings many times
def _unhidden_short(text: str) -> str:
    return _unhidden(text)


def at_cut(before: str, after: str) -> tuple[str, str]:
    """The text on each side of a cut, with the word the cut goes through masked on both sides
    (a token cut in two has the shape of none)."""
    start, bound = len(before), max(0, len(before) - _LONGEST_SECRET)
    while start > bound and _WORD_CHARS.fullmatch(before[start - 1]):
        start -= 1
    tail = _WORDS.match(after, 0, _LONGEST_SECRET)
    if len(before) - start >= SHORTEST_SECRET:
        before = before[:start] + MASK
    if tail and len(tail.group()) >= SHORTEST_SECRET:
        after = MASK + after[tail.end() :]
    return before, after


def _masked(text: str) -> str:
    for value in _own_secrets():
        if value in text:
            text = text.replace(value, MASK)
    if _ANY_LITERAL.search(text) is None:
        return text
    for literals, pattern, replacement in _SHAPES:
        if any(literal in text for literal in literals):
            text = pattern.sub(replacement, text)
    return text


def _unhidden(text: str) -> str:
    """`text` (already masked as it is) with the secrets its escaped, glued or encoded forms
    hide masked; unchanged when they hide none."""
    plain = _ESCAPE.sub(
        lambda m: chr(int(next(g for g in m.groups() if g), 16)), _HIDDEN.sub("", text)
    )
    if plain != text and _masked(plain) != plain:
        text = _masked(plain)
    return _ENCODED.sub(lambda m: MASK if _reveals(m.group()) else m.group(), text)


@lru_cache(maxsize=8192)  # the same runs (case names, digests) come back in every document
def _reveals(run: str) -> bool:
    """Whether a base64 or hex run decodes (at some alignment) to text holding a secret."""
    for decoded in _decodings(run):
        text = decoded.decode("latin-1")
        glued = _HIDDEN.sub("", text)
        if _masked(text) != text or _masked(glued) != glued:
            return True
    return False


def _decodings(run: str) -> Iterator[bytes]:
    if _HEX.fullmatch(run):
        yield binascii.unhexlify(run[len(run) % 2 :])
        return
    if "/" in run and not _MIXED.search(run):
        return  # a path (`/usr/lib/python3`), not base64: that has capitals, + or =
    body = run.rstrip("=")
    alphabet = b"-_" if "-" in body or "_" in body else b"+/"
    # the encoded text may begin a few characters into the run (tried on short runs)
    for skip in range(4 if len(body) < _LONGEST_SECRET else 1):
        part = body[skip:]
        part = part[: len(part) // 4 * 4 + (len(part) % 4 if len(part) % 4 > 1 else 0)]
        try:
            yield base64.b64decode(part + "=" * (-len(part) % 4), altchars=alphabet, validate=True)
        except (binascii.Error, ValueError):
            continue


def mask_value(value: Any) -> Any:
    """`value` with every string in it masked (a parsed JSON document: dicts, lists, scalars)."""
    if isinstance(value, str):
        return mask(value)
    if isinstance(value, dict):
        return {mask(k) if isinstance(k, str) else k: mask_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [mask_value(v) for v in value]
    return value


def refresh() -> None:
    """Read our own secrets again (they are read once: the environment torchbisect started
    with; call this after changing it in the same process)."""
    _own_secrets.cache_clear()
    _reveals.cache_clear()
    _unhidden_short.cache_clear()


@cache
def _own_secrets() -> tuple[str, ...]:
    values = {
        v for k, v in os.environ.items() if CREDENTIAL_NAME.search(k) and len(v) >= SHORTEST_SECRET
    }
    return tuple(sorted(values, key=len, reverse=True))  # a secret holding another: whole
