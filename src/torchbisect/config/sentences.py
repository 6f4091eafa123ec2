"""Where a bad matrix.yaml goes wrong, in one sentence: file, line, key and what was expected.

YAML is parsed to a node tree (so every key keeps its line) and then to data; pydantic's errors
are mapped back onto those nodes.  Dates stay text, so a bad one is reported by line too.
"""

from __future__ import annotations

import difflib
import types
import typing
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel

from ..errors import ConfigError


def show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float, str)):
        return repr(value)
    if value == [] or value == {}:
        return "an empty list" if value == [] else "an empty mapping"
    return {list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


class Loader(yaml.SafeLoader):
    """safe_load's loader, except that dates stay text so pydantic reports bad ones by line."""


Loader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def parse_yaml(path: Path, text: str) -> tuple[yaml.Node, Any]:
    loader = Loader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            raise ConfigError(f"{path}: the file is empty; expected at least one of `stable`, "
                              "`test`, `nightly`, `dev` or `preinstalled`")
        _no_duplicate_keys(path, root)
        return root, loader.construct_document(root)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = f", line {mark.line + 1}" if mark else ""
        context = err.context
        if context and err.context_mark and mark and err.context_mark.line != mark.line:
            context += f" on line {err.context_mark.line + 1}"
        what = ", ".join(filter(None, (context, err.problem)))
        raise ConfigError(f"{path}{line}: not valid YAML ({what})") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({err})") from None
    finally:
        loader.dispose()


def _no_duplicate_keys(path: Path, node: yaml.Node, trail: str = "") -> None:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicate_keys(path, item, f"{trail}[{i}]")
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key, value in node.value:
        name = f"{trail}.{key.value}" if trail else str(key.value)
        line = key.start_mark.line + 1
        if key.value in seen:
            raise ConfigError(f"{path}, line {line}, key `{name}`: appears twice (first on line "
                              f"{seen[key.value]}); keep one")
        seen[key.value] = line
        _no_duplicate_keys(path, value, name)


_GENERIC = {
    "list_type": "a list", "dict_type": "a mapping", "model_type": "a mapping",
    "model_attributes_type": "a mapping", "string_type": "text", "bool_type": "true or false",
    "bool_parsing": "true or false", "int_type": "a whole number", "int_parsing": "a whole number",
    "float_type": "a number", "float_parsing": "a number",
}


def sentence(path: Path, root: yaml.Node, errors: list[dict[str, Any]],
             model: type[BaseModel]) -> str:
    """The first problem (by line) as one sentence; how many more there are, if any."""
    found = []
    for err in errors:
        loc = tuple(err["loc"])
        if err["type"] == "missing":
            line, key = _locate(root, loc[:-1])
            message = f"missing the required key `{loc[-1]}`"
        else:
            line, key = _locate(root, loc)
            message = _message(err, loc, model)
        where = f"{path}, line {line}" + (f", key `{key}`" if key else "")
        found.append((line, f"{where}: {message}"))
    found.sort(key=lambda f: f[0])
    more = len(found) - 1
    suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return found[0][1] + suffix


def _message(err: dict[str, Any], loc: tuple, model: type[BaseModel]) -> str:
    kind = err["type"]
    if kind == "expected":
        return err["msg"]
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`?" if close else "expected one of " + ", ".join(
            f"`{a}`" for a in allowed)
        return f"unknown key; {hint}"
    if not loc and kind == "model_type":
        got = show(err["input"])
        return f"expected a mapping of keys such as `stable` and `nightly`, got {got}"
    what = _GENERIC.get(kind)
    if what:
        return f"expected {what}, got {show(err.get('input'))}"
    return err["msg"][:1].lower() + err["msg"][1:]


def _locate(root: yaml.Node, loc: tuple) -> tuple[int, str]:
    """The line of the deepest key of `loc` that exists in the file, and the dotted key path."""
    node: yaml.Node | None = root
    line, parts = root.start_mark.line + 1, []
    for part in loc:
        if isinstance(node, yaml.MappingNode) and isinstance(part, int):
            continue  # one mapping written for a list of one
        if part == "[key]":
            continue
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1] if parts else ''}[{part}]"]
        else:
            parts.append(str(part))
        node, at = _child(node, part)
        if at:
            line = at
    return line, ".".join(parts)


def _child(node: yaml.Node | None, part: Any) -> tuple[yaml.Node | None, int | None]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if key.value == str(part):
                return value, key.start_mark.line + 1
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
        item = node.value[part]
        return item, item.start_mark.line + 1
    return None, None


def _fields_at(model: Any, loc: tuple) -> list[str]:
    """The keys allowed at `loc` under `model`, for "did you mean …" on an unknown key."""
    for part in loc:
        if isinstance(part, int):
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType, Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found:
                return found
    return None
