"""A small stand-in for a pytorch clone (a real git repository): `main` and a `nightly` branch
whose commits name the main commit they were built from."""

from __future__ import annotations

import io
import subprocess
import time
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "PATH": "/usr/bin:/bin:/usr/local/bin",
}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], env=GIT_ENV, check=True, capture_output=True, text=True
    ).stdout.strip()


Step = tuple[str, str, dict[str, str | None], str | None]


def fast_import(repo: Path, steps: list[Step]) -> list[str]:
    """Commit `steps` into `repo` with one `git fast-import` (a history of many commits in one
    process instead of three or four each).  A step is (branch, subject, files, parent): `files`
    maps a path to its new text, or to None for a file deleted (none: an empty commit);
    `parent`, a sha the branch is first reset onto (as `git checkout -B branch <sha>` would), or
    None to go on from the branch's last commit.  The work tree is left as it was: see
    `check_out`.  Returns each step's sha, in order."""
    stamp = f"t <t@example.invalid> {int(time.time())} +0000"
    stream = io.BytesIO()

    def data(text: str) -> None:
        raw = text.encode()
        stream.write(b"data %d\n%s\n" % (len(raw), raw))

    for mark, (branch, subject, files, parent) in enumerate(steps, start=1):
        stream.write(
            f"commit refs/heads/{branch}\nmark :{mark}\n"
            f"author {stamp}\ncommitter {stamp}\n".encode()
        )
        data(subject + "\n")  # as `git commit -m` stores it
        if parent is not None:
            stream.write(f"from {parent}\n".encode())
        for name, text in files.items():
            if text is None:
                stream.write(f"D {name}\n".encode())
            else:
                stream.write(f"M 100644 inline {name}\n".encode())
                data(text)
    marks = repo / ".git" / "fast-import-marks"
    subprocess.run(
        ["git", "-C", str(repo), "fast-import", "--quiet", f"--export-marks={marks}"],
        input=stream.getvalue(),
        env=GIT_ENV,
        check=True,
        capture_output=True,
    )
    sha_of = dict(line.split() for line in marks.read_text().splitlines())
    marks.unlink()
    return [sha_of[f":{mark}"] for mark in range(1, len(steps) + 1)]


def check_out(repo: Path, branch: str = "main") -> None:
    """The work tree and index at `branch`'s last commit, as after committing there."""
    _git(repo, "checkout", "-q", "-f", branch)


def make_pytorch_clone(path: Path, dates: list[str], commits_per_day: int = 2) -> dict:
    """A small stand-in for a pytorch clone: `main` with a few commits per day and a `nightly`
    branch with one "YYYY-MM-DD nightly release (<main sha>)" commit per date, each made on that
    day's last main commit (the branch is reset onto it: only the last date's is on `nightly`,
    the others stay in the repository).

    Returns {date: (nightly sha, main sha)}.
    """
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    main = fast_import(
        path,
        [
            ("main", f"change {k} of {day}", {"file.txt": f"{day} {k}\n"}, None)
            for day in dates
            for k in range(commits_per_day)
        ],
    )
    built_from = {day: main[(i + 1) * commits_per_day - 1] for i, day in enumerate(dates)}
    # a nightly's subject names its main commit, whose sha is known once main is written
    nightly = fast_import(
        path,
        [("nightly", f"{day} nightly release ({sha})", {}, sha) for day, sha in built_from.items()],
    )
    check_out(path)
    return {day: (n, built_from[day]) for day, n in zip(dates, nightly, strict=True)}
