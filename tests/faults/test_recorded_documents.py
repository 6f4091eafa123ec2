"""E5: `report --probe-json` and `--bisection` read recorded documents through the same gate as a
live probe's (probe/document.py): a hostile file is one sentence naming it (exit 2), never a
traceback, never a page as large as the file; a long detail is capped."""

from __future__ import annotations

import json

import pytest
from helpers import probe_doc
from helpers.cli import call

from torchbisect.exits import Exit
from torchbisect.probe import document as gate

DEEP = "[" * 100_000 + "]" * 100_000


def _probe(**case) -> str:
    doc = probe_doc("affected", {"capture_data_ptr": "affected", "control_clone": "not_affected"})
    doc["cases"]["capture_data_ptr"].update(case)
    doc["env"] = {"torch": "2.15.0+cu132", "python": "3.12.3", "gpu": "NVIDIA H200"}
    return json.dumps(doc)


HOSTILE_PROBES = {
    "deep": (DEEP, "nests deeper than 12 levels"),
    "huge-detail": (_probe(detail="d" * 50_000_000), "larger than 1,000,000 bytes"),
    "types": (_probe(stale_trials="x"), "stale_trials is not a whole number"),
    "verdict": (_probe(verdict="pwned"), "'pwned' is not one of"),
    "list": ("[1, 2, 3]", "not a JSON object"),
    "env": (json.dumps({**json.loads(_probe()), "env": {"torch": ["2.15"]}}), "env torch"),
    "binary": ("\udcff\x00garbage{", "not JSON"),
    "empty": ("", "not JSON"),
}


@pytest.fixture
def bisection(data_dir) -> dict:
    return json.loads((data_dir / "report" / "synthetic-bisection-fix.json").read_text())


def _write(path, text: str):
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))
    return path


@pytest.mark.parametrize("name", sorted(HOSTILE_PROBES))
def test_a_hostile_recorded_probe_document_is_one_sentence(name, tmp_path, capsys):
    text, why = HOSTILE_PROBES[name]
    path = _write(tmp_path / f"{name}.json", text)
    assert call("report", "--probe-json", str(path), "--out", str(tmp_path / "out")) == Exit.MISTAKE
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and str(path) in err and why in err, err
    assert not (tmp_path / "out").exists()  # nothing drawn from it


def _bisections(doc: dict) -> dict[str, tuple[str, str]]:
    point = doc["last_bad"]
    return {
        "deep": (DEEP, "nests deeper than 12 levels"),
        "huge": (json.dumps({**doc, "reproduce": "r" * 50_000_000}), "larger than 1,000,000"),
        "probes": (json.dumps({**doc, "probes": "many"}), "`probes` is not a whole number"),
        "points": (json.dumps({**doc, "points": {"a": 1}}), "`points` is not a list"),
        "point-key": (json.dumps({**doc, "points": [{**point, "evil": 1}]}), "unknown keys"),
        "verdict": (json.dumps({**doc, "last_bad": {**point, "verdict": 7}}), "verdict 7"),
        "direction": (json.dumps({**doc, "direction": None}), "direction None"),
        "fraction": (
            json.dumps({**doc, "first_good": {**point, "stale_fraction": "1"}}),
            "stale_fraction is not a number",
        ),
        "commits": (json.dumps({**doc, "commits": [{"sha": 1}]}), "`commits` item 0"),
        "candidates": (
            json.dumps({**doc, "candidates": "2026-03-05"}),
            "`candidates` is not a list",
        ),
        "exact": (json.dumps({**doc, "exact": "yes"}), "`exact` is not true or false"),
    }


@pytest.mark.parametrize(
    "name",
    [
        "deep",
        "huge",
        "probes",
        "points",
        "point-key",
        "verdict",
        "direction",
        "fraction",
        "commits",
        "candidates",
        "exact",
    ],
)
def test_a_hostile_recorded_bisection_is_one_sentence(name, bisection, data_dir, tmp_path, capsys):
    text, why = _bisections(bisection)[name]
    path = _write(tmp_path / f"{name}.json", text)
    probe = data_dir / "report" / "synthetic-h200-torch-2.15.0+cu132.json"
    code = call(
        "report",
        "--probe-json",
        str(probe),
        "--bisection",
        str(path),
        "--out",
        str(tmp_path / "out"),
    )
    err = capsys.readouterr().err.strip()
    assert code == Exit.MISTAKE and err.count("\n") == 0 and str(path) in err and why in err, err


def test_long_strings_of_a_recorded_document_are_capped_on_the_page(bisection, tmp_path):
    probe = _write(tmp_path / "long.json", _probe(detail="y" * 500_000))
    long_bisection = _write(tmp_path / "b.json", json.dumps({**bisection, "rule": "z" * 500_000}))
    out = tmp_path / "out"
    assert (
        call(
            "report",
            "--probe-json",
            str(probe),
            "--bisection",
            str(long_bisection),
            "--out",
            str(out),
        )
        == Exit.OK
    )
    page = (out / "index.html").read_text()
    assert "y" * gate.DETAIL_CHARS not in page and "z" * gate.DETAIL_CHARS not in page
    assert sum(p.stat().st_size for p in out.iterdir() if p.is_file()) < 500_000
