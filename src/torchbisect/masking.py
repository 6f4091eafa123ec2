"""Token-shaped strings are masked before any text enters a log, the store or a page.

The first line of defence is that probes never receive credentials (`backends/probe_env.py`);
this is the second: whatever a probe, an installer or a document prints, a GitHub token, a cloud
or registry key, a `Bearer` header, a JWT or a password in a URL reaches no log, store row or
published page.  `mask` is applied where such text enters: the output of every command
(`proc`), a container's output (`backends/container.py`), every probe document
(`probe_doc.check`) and every stored run (`store_rows.run_to_row`), so every page drawn later is
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
_MIN_SECRET = 8  # shorter values ("1", "true") would mask ordinary words

# (pattern, replacement): the replacement keeps the kind (`ghp_***`) so a reader knows what was
# there, and never matches again.
_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(p), r) for p, r in (
    (r"\b(gh[pousr]_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # GitHub tokens
    (r"\b(github_pat_)[A-Za-z0-9_]{20,}", r"\1" + MASK),
    (r"\b((?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[A-Z0-9]{4})[A-Z0-9]{12,}\b",
     r"\1" + MASK),  # AWS key ids
    (r"(?i)(aws_secret_access_key\s*[=:]\s*)[A-Za-z0-9/+=]{20,}", r"\1" + MASK),
    (r"\b(hf_)[A-Za-z0-9]{20,}", r"\1" + MASK),  # Hugging Face
    (r"\b(pypi-)[A-Za-z0-9_-]{40,}", r"\1" + MASK),  # PyPI / TestPyPI upload tokens
    (r"\b(glpat-)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # GitLab
    (r"\b(xox[abposr]-)[A-Za-z0-9-]{10,}", r"\1" + MASK),  # Slack
    (r"\b(AIza)[0-9A-Za-z_-]{30,}", r"\1" + MASK),  # Google API keys
    (r"\b(sk-(?:proj-|ant-)?)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # OpenAI / Anthropic style
    (r"\b(npm_)[A-Za-z0-9]{30,}", r"\1" + MASK),
    (r"\b(dckr_pat_)[A-Za-z0-9_-]{20,}", r"\1" + MASK),  # Docker Hub
    (r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", MASK),  # a JWT
    (r"(?i)\b(Bearer|Basic)(\s+)[A-Za-z0-9._~+/=-]{16,}", r"\1\2" + MASK),  # headers
    (r"(?i)(authorization:\s*token\s+)\S{16,}", r"\1" + MASK),
    (r"(?i)(\b[a-z][a-z0-9+.-]*://[^/\s:@]+:)[^/\s@]+@", r"\1" + MASK + "@"),  # password in URL
    (r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
     "-----BEGIN PRIVATE KEY----- " + MASK),
))


def mask(text: str) -> str:
    """`text` with every token-shaped string, and every value of our own secrets, masked."""
    if not text:
        return text
    for value in _own_secrets(_secret_env_key()):
        if value in text:
            text = text.replace(value, MASK)
    for pattern, replacement in _SHAPES:
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


def _secret_env_key() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in os.environ.items()
                        if CREDENTIAL_NAME.search(k) and len(v) >= _MIN_SECRET))


@cache
def _own_secrets(pairs: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    # longest first, so a secret that contains another is masked whole
    return tuple(sorted({v for _, v in pairs}, key=len, reverse=True))
