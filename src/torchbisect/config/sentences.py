"""Where a bad matrix.yaml goes wrong, in one sentence: file, line, key and what was expected.

YAML is parsed to a node tree (so every key keeps its line) and then to data; pydantic's errors
are mapped back onto those nodes.  Dates stay text, so a bad one is reported by line too.

The file is bounded before anything walks it (`_bounded`): nesting deeper than `MAX_DEPTH`, an
anchor that contains itself, or aliases that expand to more than `MAX_NODES` values (a
"billion laughs" bomb of ten lines) are one sentence with the bound, in well under a second,
never a RecursionError or a run that never ends.
"""

from __future__ import annotations

import difflib
import errno
import stat
import types
import typing
import unicodedata
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel

from ..errors import ConfigError
from ..utils.words import INVISIBLE


def show(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str) and len(value) > _SHOWN:
        return repr(value[:_SHOWN]) + f"… ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > 10**100:
        return f"a number of {len(str(abs(value))):,} digits"
    if isinstance(value, (int, float, str)):
        return repr(value)
    if value == [] or value == {}:
        return "an empty list" if value == [] else "an empty mapping"
    kinds: dict[type, str] = {list: "a list", dict: "a mapping"}
    return kinds.get(type(value), type(value).__name__)


class Loader(yaml.SafeLoader):
    """safe_load's loader, except that dates stay text so pydantic reports bad ones by line."""


def _text(loader: yaml.SafeLoader, node: yaml.Node) -> str:
    return yaml.SafeLoader.construct_yaml_str(loader, node)


Loader.add_constructor("tag:yaml.org,2002:timestamp", _text)


def _int(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> int:
    """YAML's int, or a sentence by line when it has more digits than Python reads (4,300)."""
    try:
        return yaml.SafeLoader.construct_yaml_int(loader, node)
    except ValueError:
        raise yaml.constructor.ConstructorError(
            None,
            None,
            f"the number {node.value[:12]}… has {len(node.value):,} digits, more "
            "than any value here needs",
            node.start_mark,
        ) from None


Loader.add_constructor("tag:yaml.org,2002:int", _int)


MAX_DEPTH = 32  # matrix.yaml's deepest key is 4 levels down
MAX_NODES = 100_000  # values once aliases are expanded; the default matrix has about 200


MAX_BYTES = 4 * 1024 * 1024
_SHOWN = 200  # characters of a value quoted in a sentence


def read_config(path: Path, *, what: str, flag: str) -> str:
    """The text of a YAML file of ours (`what`: "a matrix"), read no further than MAX_BYTES;
    a missing, oversized or non-UTF-8 file is one sentence that names `flag`."""
    _regular(path, what=what, flag=flag)
    try:
        with path.open("rb") as fh:  # no further than the bound: a 2 GB file is not loaded
            raw = fh.read(MAX_BYTES + 1)
        if len(raw) > MAX_BYTES:
            raise ConfigError(
                f"{path} is larger than {MAX_BYTES // 1048576} MiB; {what} "
                "file is a few kilobytes: is this the right file?"
            )
        return raw.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path} does not exist: pass {flag} PATH") from None
    except IsADirectoryError:
        raise ConfigError(f"{path} is a folder: pass {flag} with {what} file") from None
    except OSError as err:  # unreadable (permissions, I/O error, a /proc file that refuses reads)
        if err.errno in (errno.ENAMETOOLONG, errno.ELOOP):
            raise  # the CLI names the flag that gave such a path (cli._unusable_path)
        reason = err.strerror or type(err).__name__
        raise ConfigError(
            f"{path} could not be read ({reason}): pass {flag} with {what} file"
        ) from None
    except UnicodeDecodeError as err:
        line = err.object[: err.start].count(b"\n") + 1
        raise ConfigError(f"{path}, line {line}: not UTF-8 text; save the file as UTF-8") from None


def _regular(path: Path, *, what: str, flag: str) -> None:
    """Refuse a FIFO, a device or a socket before it is opened (a FIFO would block the open)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return  # opening it says what is wrong, in its own sentence
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "a special file"
        )
        raise ConfigError(f"{path} is {kind}, not a file: pass {flag} with {what} file")


def _visible(path: Path, text: str) -> None:
    """Refuse a character that hides what a value is, by line and code point."""
    # Characters no matrix or runners file needs (words.INVISIBLE); a tab or line break is YAML;
    # a BOM may begin the file.
    found = INVISIBLE.search(text, 1 if text.startswith("\ufeff") else 0)
    if found:
        line = text.count("\n", 0, found.start()) + 1
        raise ConfigError(
            f"{path}, line {line}: holds the invisible or control character "
            f"U+{ord(found.group()):04X} {_char_name(found.group())}; delete it "
            "(it would make a name or label differ from what you see)"
        )


def _char_name(char: str) -> str:
    name = unicodedata.name(char, "")
    return f"({name})" if name else f"(a {unicodedata.category(char)} character)"


def parse_yaml(path: Path, text: str, *, empty: str) -> tuple[yaml.Node, Any]:
    """The node tree (for line numbers) and the data; `empty` says what an empty file lacks."""
    _visible(path, text)
    loader = Loader(text)
    try:
        _nesting(path, text)
        root = loader.get_single_node()
        if root is None:
            raise ConfigError(f"{path}: the file is empty; {empty}")
        _expanded(path, root, 0, {}, set())
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


def _nesting(path: Path, text: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH from the parser's events (no recursion: the composer
    that builds the node tree recurses once per level), and a value that holds an invisible or
    control character written as an escape (`"h200\\u200b"`), which `_visible` cannot see in the
    text: a runner label of that kind is another label than the one the file seems to say."""
    depth = 0
    for event in yaml.parse(text, Loader=Loader):
        assert event.start_mark is not None  # the parser marks every event it makes
        if isinstance(event, yaml.ScalarEvent) and (found := INVISIBLE.search(event.value)):
            raise ConfigError(
                f"{path}, line {event.start_mark.line + 1}: a value holds the "
                f"invisible or control character U+{ord(found.group()):04X} "
                f"{_char_name(found.group())}, written as an escape; delete it "
                "(it would make a name or label differ from what you see)"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    f"{path}, line {event.start_mark.line + 1}: nests deeper than "
                    f"{MAX_DEPTH} levels; matrix.yaml needs 4"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _expanded(
    path: Path, node: yaml.Node, depth: int, sizes: dict[int, tuple[int, int]], open_: set[int]
) -> tuple[int, int]:
    """(values, height) of `node` with every alias expanded, each shared node counted once per
    use but computed once; ConfigError past MAX_NODES or MAX_DEPTH, or for an anchor that
    contains itself.  Recursion stays below MAX_DEPTH frames."""
    key = id(node)
    if key in sizes:
        count, height = sizes[key]
    elif key in open_:
        raise ConfigError(
            f"{path}, line {node.start_mark.line + 1}: an anchor contains an alias "
            "of itself; write the values out"
        )
    else:
        open_.add(key)
        children = (
            [n for pair in node.value for n in pair]
            if isinstance(node, yaml.MappingNode)
            else node.value
            if isinstance(node, yaml.SequenceNode)
            else []
        )
        count, height = 1, 0
        for child in children:
            more, below = _expanded(path, child, depth + 1, sizes, open_)
            count, height = count + more, max(height, below + 1)
            if count > MAX_NODES:
                raise ConfigError(
                    f"{path}: its aliases (`*name`) expand to more than "
                    f"{MAX_NODES:,} values; write the entries out instead"
                )
        open_.discard(key)
        sizes[key] = (count, height)
    if depth + height > MAX_DEPTH:
        raise ConfigError(
            f"{path}, line {node.start_mark.line + 1}: nests deeper than "
            f"{MAX_DEPTH} levels once its aliases are expanded"
        )
    return count, height


def _no_duplicate_keys(path: Path, node: yaml.Node, trail: str = "") -> None:
    if isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _no_duplicate_keys(path, item, f"{trail}[{i}]")
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key, value in node.value:
        line = key.start_mark.line + 1
        if not isinstance(key, yaml.ScalarNode):  # `? [a, b]`: a YAML complex key
            where = f", under `{trail}`" if trail else ""
            raise ConfigError(
                f"{path}, line {line}{where}: a key is a "
                f"{'list' if isinstance(key, yaml.SequenceNode) else 'mapping'}; "
                "keys are plain names such as `dates`"
            )
        name = f"{trail}.{key.value}" if trail else str(key.value)
        if key.value in seen:
            raise ConfigError(
                f"{path}, line {line}, key `{name}`: appears twice (first on line "
                f"{seen[key.value]}); keep one"
            )
        seen[key.value] = line
        _no_duplicate_keys(path, value, name)


_Loc = tuple[str | int, ...]  # where an error is: pydantic's `loc`, keys and list positions
_GENERIC = {
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "string_type": "text",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "int_type": "a whole number",
    "int_parsing": "a whole number",
    "float_type": "a number",
    "float_parsing": "a number",
}


def sentence(
    path: Path, root: yaml.Node, errors: Sequence[Mapping[str, Any]], model: type[BaseModel]
) -> str:
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


def _message(err: Mapping[str, Any], loc: _Loc, model: type[BaseModel]) -> str:
    kind, msg = err["type"], str(err["msg"])  # pydantic's message, or a check's sentence: text
    if kind == "expected":
        return msg
    if kind == "extra_forbidden":
        allowed = _fields_at(model, loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = (
            f"did you mean `{close[0]}`?"
            if close
            else "expected one of " + ", ".join(f"`{a}`" for a in allowed)
        )
        return f"unknown key; {hint}"
    if not loc and kind == "model_type":  # the file's top level: name the keys of its own model
        fields = _fields_at(model, ())
        keys = [k for k in fields if k in ("stable", "nightly")] or fields[:2]
        such = " and ".join(f"`{k}`" for k in keys)
        such = f"of keys such as {such}" if len(keys) > 1 else f"with the key {such}"
        return f"expected a mapping {such}, got {show(err['input'])}"
    what = _GENERIC.get(kind)
    if what:
        return f"expected {what}, got {show(err.get('input'))}"
    return msg[:1].lower() + msg[1:]


def _locate(root: yaml.Node, loc: _Loc) -> tuple[int, str]:
    """The line of the deepest key of `loc` that exists in the file, and the dotted key path."""
    node: yaml.Node | None = root
    line = root.start_mark.line + 1
    parts: list[str] = []
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


def _fields_at(model: Any, loc: _Loc) -> list[str]:
    """The keys allowed at `loc` under `model`, for "did you mean …" on an unknown key."""
    keyed = False  # the part after a mapping of names (`probes:`) is a name, not a key
    for part in loc:
        if isinstance(part, int) or keyed:
            keyed = False
            continue
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        keyed = field is not None and typing.get_origin(field.annotation) is dict
        model = _model_in(field.annotation) if field else None
        if model is None:
            return []
    return [f.alias or n for n, f in model.model_fields.items()]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (list, dict, typing.Union, types.UnionType, Annotated):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found:
                return found
    return None
