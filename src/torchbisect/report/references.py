"""Where the page points its reader: the upstream report, the published page and the
repository the page is built from, as `references:` in the matrix file (config/matrix.py's
`References`, the one type of them) with the repository worked out here.  `torchbisect report`
and `torchbisect matrix` both draw their pages with `links_from`, given the matrix file they
loaded (the file is not read here)."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from ..config.matrix import MatrixConfig, References


def links_from(config: MatrixConfig | None, matrix: Path) -> References:
    """The page's links: `references:` in `config`, the loaded `matrix` file (none without
    one), with the repository the page is built from (`repository_url`) in place of the one it
    names."""
    refs = config.references if config is not None else None
    return (refs or References()).model_copy(
        update={"repository": repository_url(matrix, refs) or None}
    )


def repository_url(matrix: Path, refs: References | None) -> str:
    """In a workflow, the repository it runs in (GitHub's Actions context); elsewhere
    `references: repository:` when the matrix names one, else the `origin` of the git checkout
    that holds the matrix file; https URLs only, "" when none is known."""
    if os.environ.get("GITHUB_ACTIONS") == "true" and os.environ.get("GITHUB_REPOSITORY"):
        server = os.environ.get("GITHUB_SERVER_URL", "https://github.com").rstrip("/")
        return _https(f"{server}/{os.environ['GITHUB_REPOSITORY']}")
    named = getattr(refs, "repository", None) if refs is not None else None
    if named:
        return _https(str(named))
    if shutil.which("git") is None:
        return ""
    from ..utils import proc

    folder = Path(matrix).absolute().parent
    found = proc.run(
        ["git", "-C", str(folder), "config", "--get", "remote.origin.url"], timeout=30, check=False
    )
    return _https(found.output.strip()) if found.returncode == 0 else ""


def _https(url: str) -> str:
    """`git@github.com:o/r.git` and `https://github.com/o/r.git` → `https://github.com/o/r`;
    anything that is not then an https URL without credentials → ""."""
    ssh = re.fullmatch(r"git@([\w.-]+):(\S+?)(?:\.git)?/?", url)
    if ssh:
        url = f"https://{ssh[1]}/{ssh[2]}"
    url = re.sub(r"\.git/?$", "", url)
    return url if re.fullmatch(r"https://[\w.-]+(:\d+)?/[^\s@\"<>]+", url) else ""
