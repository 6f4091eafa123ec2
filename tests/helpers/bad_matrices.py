"""The malformed matrix.yaml files of tests/data/matrix/bad/: the first line of each says the
sentence torchbisect answers it with."""

from __future__ import annotations

from pathlib import Path


def expected_error(path: Path) -> str:
    """The first line of each bad file: `# expect: {path}, line N, key `…`: …`."""
    first = path.read_bytes().split(b"\n", 1)[0].decode()
    assert first.startswith("# expect: "), path
    return first[len("# expect: ") :].replace("{path}", str(path))
