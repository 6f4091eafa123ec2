"""The JSON Schemas of matrix.yaml and runners.yaml (for editors), from the models that check them.

pydantic's schema says what the types are; this adds what the validators accept beyond them: a
channel given as one mapping, `preinstalled: true`, numbers as environment values.
"""

from __future__ import annotations

import json
from typing import Any

from .matrix import MatrixConfig
from .runners import runners_schema


def matrix_schema() -> dict[str, Any]:
    """JSON Schema of matrix.yaml, adjusted for what the validators accept beyond the types."""
    schema = MatrixConfig.model_json_schema()
    for name in ("stable", "test", "nightly", "dev"):  # one mapping or a list of them
        prop = schema["properties"][name]
        items = prop.pop("items")
        prop.pop("type")
        prop["anyOf"] = [items, {"type": "array", "items": items}]
    schema["properties"]["preinstalled"]["anyOf"].insert(0, {"type": "boolean"})
    schema["properties"]["images"]["additionalProperties"] = False
    for definition in schema["$defs"].values():
        env = definition.get("properties", {}).get("env")
        if env:  # numbers become text
            env["patternProperties"] = {
                k: {"type": ["string", "number"]} for k in env["patternProperties"]
            }
            env["additionalProperties"] = False
    schema["title"] = "torchbisect matrix.yaml"
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return json.dumps(matrix_schema(), indent=2) + "\n"


def runners_schema_text() -> str:
    return json.dumps(runners_schema(), indent=2) + "\n"
