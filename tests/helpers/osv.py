"""The official OSV schema, as a fixture: the validator every test of an OSV record checks with."""

from __future__ import annotations

import json

import pytest

from helpers import REPO

SCHEMA = REPO / ".." / "shared" / "osv" / "schema.json"
SCHEMA_COMMIT = "51b8156b69b9e2e9ff2301e649db61636067fcfa"


@pytest.fixture(scope="module")
def validator():
    if not SCHEMA.is_file():  # a third-party file beside the clone: where it is absent, skip
        pytest.skip(f"{SCHEMA} is absent (osv-schema {SCHEMA_COMMIT[:12]}; CI has ../shared)")
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    assert SCHEMA_COMMIT in (SCHEMA.parent / "README.md").read_text()
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
