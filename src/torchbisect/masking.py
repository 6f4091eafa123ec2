"""Token-shaped strings are masked before any text enters a log, the store or a page.

The first line of defence is that probes never receive credentials (`backends/probe_env.py`);
this is the second: whatever a probe, an installer or a document prints, a GitHub token, a cloud
or registry key, a `Bearer` header, a JWT or a password in a URL reaches no log, store row or
published page.  `mask` is applied where such text enters: the output of every command
(`proc`), a container's output (`backends/container.py`), every probe document
(`probe_doc.check`) and every stored run (`store.rows.run_to_row`), so every page drawn later is
clean.  The values of this process's own credential-named variables (GITHUB_TOKEN, …) are masked
too, whatever their shape, as GitHub Actions masks its secrets.
"""

from __future__ import annotations

import os
import re
from functools import cache

MASK = "***"
# A variable whose name says it holds a secret (also refused to probes by probe_env).
CREDENTIAL_NAME = re.compile(r"TOKEN|SECRET|PASSW|CREDENTIAL|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
                             r"|AUTH|SESSION_?KEY|COOKIE", re.IGNORECASE)
SHORTEST_SECRET = 8  # shorter values ("1", "true") would mask ordinary words

# (literals, pattern, replacement): the pattern runs only on text holding one of its literals
# (a substring test costs little; seventeen regular expressions over every log would not).
# The replacement keeps the kind (`ghp_***`) so a reader knows what was there, and never
# matches again.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = tuple(
    (literals, re.compile(p), r) for literals, p, r in (
        (("gh",), r"\b(gh[pousr]_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # GitHub tokens
        (("github_pat_",), r"\b(github_pat_)[A-Za-z0-9_]{20,}", r"\1" + MASK),
        (("AKIA", "ASIA", "AGPA", "AIDA", "AROA", "ANPA", "ANVA", "AIPA"),
         r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{4})[A-Z0-9]{12,}\b",
         r"\1" + MASK),  # AWS key ids
        (("ccess_key", "CCESS_KEY"), r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{20,}",
         r"\1" + MASK),
        (("hf_",), r"\b(hf_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # Hugging Face
        (("pypi-",), r"\b(pypi-)[A-Za-z0-9_-]{40,}", r"\1" + MASK),  # PyPI / TestPyPI tokens
        (("glpat-",), r"\b(glpat-)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # GitLab
        (("xox",), r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}", r"\1" + MASK),  # Slack
        (("AIza",), r"\b(AIza)[0-9A-Za-z_-]{30,}", r"\1" + MASK),  # Google API keys
        (("sk-",), r"\b(sk-(?:proj-|ant-)?)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # OpenAI, …
        (("npm_",), r"\b(npm_)[A-Za-z0-9]{30,}", r"\1" + MASK),
        (("dckr_pat_",), r"\b(dckr_pat_)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # Docker Hub
        (("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", MASK),  # JWT
        (("earer", "EARER", "asic", "ASIC"),
         r"(?i)\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{16,}", r"\1\2" + MASK),  # headers
        (("uthorization", "UTHORIZATION"), r"(?i)(authorization:\s*token\s+)\S{16,}",
         r"\1" + MASK),
        (("://",), r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@",
         r"\1" + MASK + "@"),  # a password in a URL
        (("://",), r"(?i)(\bhttps?://)[^/\s:@]{16,}@", r"\1" + MASK + "@"),  # a token as the user
        (("PRIVATE KEY",),
         r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
         "-----BEGIN PRIVATE KEY----- " + MASK),
    ))


# Any literal of any shape: most text holds none, and one search of this (in C) says so at once;
# testing the literals one by one in Python cost more than the rest of reading a big store.
_ANY_LITERAL = re.compile("|".join(re.escape(literal) for literals, _, _ in _SHAPES
                                   for literal in literals))


def mask(text: str) -> str:
    """`text` with every token-shaped string, and every value of our own secrets, masked."""
    if len(text) < SHORTEST_SECRET:
        return text
    for value in _own_secrets():
        if value in text:
            text = text.replace(value, MASK)
    if _ANY_LITERAL.search(text) is None:
        return text
    for literals, pattern, replacement in _SHAPES:
        if any(literal in text for literal in literals):
            text = pattern.sub(replacement, text)
    return text


def mask_value(value):
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


@cache
def _own_secrets() -> tuple[str, ...]:
    values = {v for k, v in os.environ.items() if CREDENTIAL_NAME.search(k)
              and len(v) >= SHORTEST_SECRET}
    return tuple(sorted(values, key=len, reverse=True))  # a secret holding another: whole
