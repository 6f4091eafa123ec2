"""Reading a store's JSON export one entry at a time, in bounded memory.

An export (`Store.export_json`) is `{"schema": 1, "bisections": [...], "attendance": [...],
"runs": [...]}` in any key order (one without "attendance" is from before it existed); a merged
shard's may be hundreds of megabytes.  `entries` reads it in 1 MiB pieces and yields each run,
bisection or attendance as soon as it is complete, so memory is that of one entry, whatever
the file's size: an entry larger than `MAX_ENTRY_BYTES`, or nested deeper than `MAX_DEPTH`, is
one sentence naming the file and the bound, never a RecursionError or gigabytes of memory.
The stdlib decoder parses each entry (`raw_decode`); this module only walks the two outer levels.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import ConfigError

MAX_ENTRY_BYTES = 16 * 1024 * 1024  # one run: its probe document (≤ 1 MB) and log excerpt
MAX_DEPTH = 24  # run → probe → cases → case → value is 5
_CHUNK = 1 << 20
_LISTS = ("runs", "bisections", "attendance")
_DECODER = json.JSONDecoder()


def entries(path: Path) -> Iterator[tuple[str, Any]]:
    """("schema", value), then ("runs" | "bisections", entry) in file order; ConfigError for a
    file that is not such an export, or breaks a bound."""
    with Path(path).open("r", encoding="utf-8", errors="strict") as fh:
        reader = _Reader(fh, path)
        try:
            yield from reader.document()
        except UnicodeDecodeError as err:
            raise reader.bad(f"not UTF-8 text: {err.reason}") from None


class _Reader:
    def __init__(self, fh: IO[str], path: Path) -> None:
        self.fh, self.path, self.buf, self.pos, self.eof = fh, path, "", 0, False

    def document(self) -> Iterator[tuple[str, Any]]:
        self.expect("{")
        if self.peek() == "}":
            return
        while True:
            key = self.value()
            if not isinstance(key, str):
                raise self.bad("an object key is not a string")
            self.expect(":")
            if key in _LISTS:  # an export's lists are lists: `"runs": "x"` was read as a run
                if self.peek() != "[":
                    raise self.bad(f'"{key}" is not a list')
                yield from ((key, item) for item in self.items())
            else:
                yield key, self.value()
            if self.separator("}"):
                return

    def items(self) -> Iterator[Any]:
        self.expect("[")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield self.value()
            if self.separator("]"):
                return

    def separator(self, close: str) -> bool:
        """True at `close` (consumed), False at a comma (consumed); anything else is an error."""
        char = self.peek()
        self.pos += 1
        if char == close:
            return True
        if char != ",":
            raise self.bad(
                f"expected ',' or '{close}', found {char[:1]!r}"
                if char
                else "it ends in the middle"
            )
        return False

    def value(self) -> Any:
        self.peek()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                if self.eof:
                    raise self.bad(f"not JSON ({err.msg})") from None
            except RecursionError:
                raise self.bad(f"an entry nests deeper than {MAX_DEPTH} levels") from None
            else:  # a number or literal at the buffer's end may go on in the next piece
                if end < len(self.buf) or self.eof or isinstance(value, (dict, list, str)):
                    self.pos = end
                    _check_depth(value, self)
                    return value
            if len(self.buf) - self.pos > MAX_ENTRY_BYTES:
                raise self.bad(f"an entry is larger than {MAX_ENTRY_BYTES // 1048576} MiB")
            self.fill()

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), not consumed."""
        while True:
            while self.pos < len(self.buf) and self.buf[self.pos] in " \t\r\n":
                self.pos += 1
            if self.pos < len(self.buf) or self.eof:
                return self.buf[self.pos : self.pos + 1]
            self.fill()

    def expect(self, char: str) -> None:
        found = self.peek()
        if found != char:
            raise self.bad(
                f"expected {char!r}, found {found[:1]!r}" if found else "it ends in the middle"
            )
        self.pos += 1

    def fill(self) -> None:
        piece = self.fh.read(_CHUNK)
        self.buf, self.pos = self.buf[self.pos :] + piece, 0
        self.eof = not piece

    def bad(self, why: str) -> ConfigError:
        return ConfigError(
            f"{self.path} is not a torchbisect export: neither a SQLite store nor "
            f"a JSON export that can be merged ({why}); give a results .sqlite "
            "file or a JSON export of one"
        )


def _check_depth(value: Any, reader: _Reader) -> None:
    """Refuse an entry deeper than MAX_DEPTH (walked without recursion)."""
    level = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [
            v
            for item in level
            for v in (
                item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            )
        ]
        if not level:
            return
    raise reader.bad(f"an entry nests deeper than {MAX_DEPTH} levels")
