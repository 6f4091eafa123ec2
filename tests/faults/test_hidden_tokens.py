"""Round 3, item 5: a token is masked however the output cuts, escapes or encodes it.

GitHub's log masker covers the base64, URI and JSON forms of a secret; `masking.mask` does the
same for every token shape and for our own secrets: JSON, `\\x` and percent escapes, base64
(standard, URL-safe, at every alignment), hex (either case), and a control character, an ANSI
sequence or an invisible character inside the token.  A token cut where `proc` keeps the head
and tail of a long output is masked on both sides of the cut.  Each form is checked on its own
(every shape x every form), then through a real `matrix` run into the log, the store and pages.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import sqlite3
from urllib.parse import quote

import pytest
from helpers import fake_torch_wheel
from helpers.cli import local_matrix, torchbisect

from torchbisect import masking
from torchbisect.exits import Exit
from torchbisect.masking import mask
from torchbisect.utils.proc import KEEP_BYTES, Kept

BODY = "Zq7Xw2Vu9Ts4Rp1On6Ml3Kj8Ih5Gf0Ed"  # the part of a token only its owner knows
SHAPES = {
    "github": f"ghp_{BODY}abcd",
    "github_pat": f"github_pat_11{BODY}_{BODY}",
    "gitlab": f"glpat-{BODY[:20]}",
    "hugging face": f"hf_{BODY}",
    "slack": f"xoxb-{BODY}",
    "openai": f"sk-proj-{BODY}",
    "npm": f"npm_{BODY}abcd",
    "aws": "AKIA" + BODY[:16].upper(),
    "pypi": f"pypi-{BODY}{BODY}",
    "bearer": f"Bearer {BODY}",
}


def _secret_part(token: str) -> str:
    return token[-16:]  # what must never be seen, in any form


def _b64(text: str, shift: int = 0, alphabet=base64.b64encode) -> str:
    return alphabet((" " * shift + text + " ").encode()).decode()  # at each of 3 alignments


FORMS = {
    "plain": lambda t: t,
    "json \\u escape of one letter": lambda t: t[0] + f"\\u{ord(t[1]):04x}" + t[2:],
    "json \\u escape of every letter": lambda t: "".join(f"\\u{ord(c):04x}" for c in t),
    "\\x escapes": lambda t: "".join(f"\\x{ord(c):02x}" for c in t),
    "percent-encoded, every byte": lambda t: "".join(f"%{b:02X}" for b in t.encode()),
    "percent-encoded, as a URL part": lambda t: quote(t, safe=""),
    "ansi reset inside": lambda t: t[:6] + "\x1b[0m" + t[6:],
    "ansi colour inside": lambda t: t[:3] + "\x1b[1;31m" + t[3:] + "\x1b[0m",
    "zero-width space inside": lambda t: t[:5] + "\u200b" + t[5:],
    "word joiner inside": lambda t: t[:9] + "\u2060" + t[9:],
    "SOH inside": lambda t: t[:4] + "\x01" + t[4:],
    "base64": lambda t: _b64(t),
    "base64, shifted by one": lambda t: _b64(t, 1),
    "base64, shifted by two": lambda t: _b64(t, 2),
    "base64url": lambda t: _b64(t, 1, base64.urlsafe_b64encode),
    "hex": lambda t: t.encode().hex(),
    "HEX": lambda t: (" " + t).encode().hex().upper(),
}


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_token_shape_is_masked_in_every_form(shape, form):
    token = SHAPES[shape]
    hidden = FORMS[form](token)
    out = mask(f"log line: {hidden} and more\n")
    assert hidden not in out and _secret_part(token) not in out, out
    for decoded in _decodings(out):  # nor does any decoding of what is left reveal it
        assert _secret_part(token) not in decoded, (out, decoded)


def _decodings(text: str) -> list[str]:
    words = text.split()
    out = [text]
    for word in words:
        for decode in (
            lambda w: base64.b64decode(w + "=" * (-len(w) % 4)),
            lambda w: bytes.fromhex(w),
        ):
            with contextlib.suppress(ValueError):
                out.append(decode(word).decode("latin-1"))
    return out


@pytest.mark.parametrize(
    "form",
    [
        "plain",
        "base64",
        "hex",
        "json \\u escape of one letter",
        "percent-encoded, every byte",
        "zero-width space inside",
    ],
)
def test_our_own_secret_of_any_shape_is_masked_in_every_form(monkeypatch, form):
    value = "correct-horse-battery-staple-42"  # no known shape: masked as the secret it is
    monkeypatch.setenv("DEPLOY_TOKEN", value)
    masking.refresh()
    try:
        out = mask(f"got {FORMS[form](value)} back")
    finally:
        monkeypatch.delenv("DEPLOY_TOKEN")
        masking.refresh()
    assert "battery-staple" not in "".join(_decodings(out)), out


def test_text_that_hides_no_secret_is_left_exactly_as_it_was():
    text = (
        "\x1b[1;32mPASSED\x1b[0m tests/test_x.py::test_y sha256="
        f"{'ab' * 32} /usr/lib/python3.11/site-packages/torch/lib "
        "aGVsbG8gd29ybGQsIG5vdGhpbmcgc2VjcmV0IGhlcmU= 100%|██████| caf\u00e9 \\u00e9\n"
    )
    assert mask(text) == text


@pytest.mark.parametrize("offset", [1, 2, 5, len(SHAPES["github"]) - 8])
@pytest.mark.parametrize("side", ["head", "tail"])
def test_a_token_cut_where_a_long_output_is_cut_is_masked_on_both_sides(side, offset):
    """proc keeps the first and last KEEP_BYTES of an output: a cut inside a token left a part
    of it that no shape matches (`hp_…`, one byte in at the tail)."""
    token, keep = SHAPES["github"], 64 * 1024
    kept = Kept(keep)
    if side == "tail":  # the tail begins `offset` bytes into the token
        kept.add(
            b"h" * keep
            + b"-" * 1000
            + b" "
            + token.encode()
            + b" " * (keep - len(token) + offset - 1)
        )
    else:  # the head ends `offset` bytes into the token
        kept.add(b"h" * (keep - offset) + token.encode() + b" " * (2 * keep))
    given = kept.new_lines() + kept.rest()
    assert kept.cut and "output cut here" in given
    assert token[offset : offset + 8] not in given and token[: offset + 8][-8:] not in given


PROBE = """
PROBE_OUTPUT = "document"
import argparse, json, os, sys
parser = argparse.ArgumentParser()
parser.add_argument("--cases"); parser.add_argument("--trials"); parser.add_argument("--json")
args = parser.parse_args()
forms = json.loads(os.environ["TB_FORMS"])
out = sys.stdout
out.write("\\n".join(forms) + "\\n")
out.write("x" * (%(keep)d + 4096) + "\\n")  # past the head: the rest is cut or the tail
token = os.environ["TB_CUT_TOKEN"]
out.write(token + " " * (%(keep)d - len(token)) + "\\n")  # the tail begins one byte into it
out.flush()
doc = {"schema": 1, "probe": "stale_replay", "probe_version": "1", "verdict": "skipped",
       "cases": {"capture_data_ptr": {"verdict": "skipped", "detail": " ".join(forms)}},
       "env": {"torch_version": "2.99.0+cpu"}}
json.dump(doc, open(args.json, "w"))
sys.exit(125)
"""


@pytest.mark.slow
def test_no_form_of_a_token_reaches_the_log_the_store_or_a_page(tmp_path):
    token = SHAPES["github"]
    forms = [FORMS[f](token) for f in sorted(FORMS)]
    (tmp_path / "probes").mkdir()
    (tmp_path / "probes" / "stale_replay.py").write_text(PROBE % {"keep": KEEP_BYTES})
    wheel = fake_torch_wheel(tmp_path / "wheels", "2.99.0+cpu")
    (tmp_path / "matrix.yaml").write_text(
        f"dev:\n  - wheel: {wheel}\n    name: hidden\n    overlay: true\n"
    )
    env = {
        **os.environ,
        "TORCHBISECT_PROBES": str(tmp_path / "probes"),
        "TORCHBISECT_PASS_ENV": "TB_*",
        "TB_FORMS": json.dumps(forms),
        "TB_CUT_TOKEN": "ghp_" + BODY + "cutcut",
    }
    done = torchbisect(
        *local_matrix(),
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == Exit.OK, done.stderr
    log = (tmp_path / "reports" / "logs" / "dev-hidden.log").read_text()
    assert "output cut here" in log
    with sqlite3.connect(tmp_path / "results.sqlite") as db:
        stored = "\n".join(db.iterdump())
    pages = {
        name: (tmp_path / "reports" / name).read_text()
        for name in ("index.html", "results.json", "summary.md")
    }
    for where, text in {"log": log, "store": stored, **pages}.items():
        for form in forms:
            assert form not in text, (where, form)
        assert BODY[-12:] not in text and (BODY + "cutcut")[1:] not in text, where
